"""``ShardedGradScaler``: loss scaling for FSDP (torch's
``torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler``).

Under FSDP each rank holds only its shard of every gradient, so an overflow (inf/NaN) may show
up on one rank alone. :class:`tensorbrain.amp.GradScaler` would then skip the step on that rank
and take it on the others, and the shards would drift apart. This scaler all-reduces the
"found inf" flag over the process group in ``unscale_`` (which ``step`` calls), so that every
rank skips or steps together and every rank's scale stays the same. It also unscales float16
gradients in place (``keep_low_precision_grads``), which the plain scaler refuses.
"""
from __future__ import annotations

import numpy as np

from ...amp.grad_scaler import GradScaler
from ...tensor import Tensor
from .. import distributed_c10d as c10d

__all__ = ["ShardedGradScaler"]


class ShardedGradScaler(GradScaler):
    """:class:`tensorbrain.amp.GradScaler` whose inf/NaN check spans every rank's shards.

    Args:
        device: ``"cuda"`` (torch's default) or ``"cpu"``; as for ``GradScaler``.
        init_scale: the first scale factor.
        backoff_factor: the scale is multiplied by this after a step with inf/NaN gradients.
        growth_factor: the scale is multiplied by this after ``growth_interval`` clean steps.
        growth_interval: clean steps in a row before the scale grows.
        enabled: False makes every method a pass-through.
        process_group: the group whose ranks must agree (default: the world).

    Example:
        >>> import tensorbrain as tb, tensorbrain.distributed as dist
        >>> from tensorbrain.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
        >>> dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
        >>> model = tb.nn.Linear(3, 1)
        >>> opt = tb.optim.SGD(model.parameters(), lr=0.1)
        >>> scaler = ShardedGradScaler("cpu")
        >>> scaler.scale(model(tb.ones(2, 3)).sum()).backward()
        >>> scaler.step(opt); scaler.update(); scaler.get_scale()
        65536.0
        >>> dist.destroy_process_group()
    """

    _allow_fp16 = True

    def __init__(self, device="cuda", init_scale=2.0 ** 16, backoff_factor=0.5,
                 growth_factor=2.0, growth_interval=2000, enabled=True, process_group=None):
        super().__init__(device, init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)
        self.process_group = process_group

    def unscale_(self, optimizer):
        """Unscale this rank's gradients, then agree with the other ranks on inf/NaN (a MAX
        all-reduce of the flag: every rank of the group must call it).

        Args:
            optimizer: the optimizer whose parameters' gradients are divided.

        Raises:
            RuntimeError: as ``GradScaler.unscale_``; or no process group is initialised.
        """
        if not self._enabled:
            return
        super().unscale_(optimizer)
        if not c10d.is_initialized():
            raise RuntimeError("ShardedGradScaler needs a process group: call "
                               "tb.distributed.init_process_group(...) first")
        state = self._opt_state(optimizer)
        flag = Tensor._wrap(np.array([1.0 if state["found_inf"] else 0.0], dtype=np.float32))
        c10d.all_reduce(flag, op=c10d.ReduceOp.MAX, group=self.process_group)
        state["found_inf"] = bool(flag._data[0] > 0)
