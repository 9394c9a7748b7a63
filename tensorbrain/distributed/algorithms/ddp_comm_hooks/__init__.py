"""``torch.distributed.algorithms.ddp_comm_hooks``: torch's path of the DDP communication hooks,
which live in :mod:`tensorbrain.nn.parallel.comm_hooks` (docs/ddp.md).

As in torch, this package's ``default_hooks`` and ``powerSGD_hook`` are the *modules* (the
idiom ``from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD``,
then ``powerSGD.PowerSGDState``); both are the modules of ``nn.parallel.comm_hooks``, served by
the old-path table of :mod:`tensorbrain.distributed._legacy_paths` (so their import paths give
the same module objects). This package sits in the parallel layer, with ``nn.parallel``.

>>> from tensorbrain.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
>>> from tensorbrain.nn.parallel.comm_hooks import PowerSGDState
>>> powerSGD.PowerSGDState is PowerSGDState
True
"""
import enum as _enum
import sys as _sys

import tensorbrain.nn.parallel.comm_hooks.post_localSGD_hook
import tensorbrain.nn.parallel.comm_hooks.powerSGD_hook

from ....nn.parallel._future import Future as _Future
from ....nn.parallel.comm_hooks import default_hooks

# from sys.modules: the package ``nn.parallel.comm_hooks`` exports the *functions*
powerSGD_hook = _sys.modules["tensorbrain.nn.parallel.comm_hooks.powerSGD_hook"]
post_localSGD_hook = _sys.modules["tensorbrain.nn.parallel.comm_hooks.post_localSGD_hook"]
default = default_hooks   # torch's second name for the module


def _noop_hook(_, bucket):
    """torch's ``debugging.noop_hook``: no communication, the bucket as it is."""
    return _Future.completed(bucket.buffer())


class _Register:
    """What a :class:`DDPCommHookType` member's ``value(model=..., state=...)`` does."""

    def __init__(self, hook, rank=None):
        self.hook, self.rank = hook, rank

    def __call__(self, model, state=None):
        if self.rank is None:
            model.register_comm_hook(state, self.hook)
        else:   # torch: the state given is the process group; PowerSGD's options are fixed
            model.register_comm_hook(powerSGD_hook.PowerSGDState(
                process_group=state, matrix_approximation_rank=self.rank,
                start_powerSGD_iter=1_000), self.hook)

    def __repr__(self):
        return f"register({self.hook.__name__}, rank={self.rank})"


class DDPCommHookType(_enum.Enum):
    """The built-in hooks by name, as torch's: ``register_ddp_comm_hook(DDPCommHookType.
    FP16_COMPRESS, ddp_model)`` or ``DDPCommHookType.X.value(model=ddp_model, state=pg)``.
    torch's ``QUANTIZE_PER_TENSOR`` / ``QUANTIZE_PER_CHANNEL`` are left out (no quantization
    kernels)."""

    ALLREDUCE = _Register(default_hooks.allreduce_hook)
    FP16_COMPRESS = _Register(default_hooks.fp16_compress_hook)
    BF16_COMPRESS = _Register(default_hooks.bf16_compress_hook)
    POWER_SGD = _Register(powerSGD_hook.powerSGD_hook, 1)
    POWER_SGD_RANK2 = _Register(powerSGD_hook.powerSGD_hook, 2)
    BATCHED_POWER_SGD = _Register(powerSGD_hook.batched_powerSGD_hook, 1)
    BATCHED_POWER_SGD_RANK2 = _Register(powerSGD_hook.batched_powerSGD_hook, 2)
    NOOP = _Register(_noop_hook)


def register_ddp_comm_hook(comm_hook_type: DDPCommHookType, model, state=None) -> None:
    """Register a built-in hook on a DDP model by its :class:`DDPCommHookType` (torch's).

    Args:
        comm_hook_type: the hook.
        model: the ``DistributedDataParallel`` model.
        state: the process group (None: the default one).
    """
    comm_hook_type.value(model=model, state=state)


__all__ = ["DDPCommHookType", "default", "default_hooks", "post_localSGD_hook", "powerSGD_hook",
           "register_ddp_comm_hook"]
