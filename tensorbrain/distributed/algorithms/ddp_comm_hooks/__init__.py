"""``torch.distributed.algorithms.ddp_comm_hooks``: torch's path of the DDP communication hooks,
which live in :mod:`tensorbrain.nn.parallel.comm_hooks` (docs/ddp.md).

As in torch, this package's ``default_hooks`` and ``powerSGD_hook`` are the *modules* (the
idiom ``from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD``,
then ``powerSGD.PowerSGDState``); both are the modules of ``nn.parallel.comm_hooks``, served by
the old-path table of :mod:`tensorbrain.distributed._legacy_paths`.

>>> from tensorbrain.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
>>> from tensorbrain.nn.parallel.comm_hooks import PowerSGDState
>>> powerSGD.PowerSGDState is PowerSGDState
True
"""
from . import default_hooks, powerSGD_hook

__all__ = ["default_hooks", "powerSGD_hook"]
