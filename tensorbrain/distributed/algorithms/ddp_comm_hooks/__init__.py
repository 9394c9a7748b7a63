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
import sys as _sys

import tensorbrain.nn.parallel.comm_hooks.powerSGD_hook

from ....nn.parallel.comm_hooks import default_hooks

# from sys.modules: the package ``nn.parallel.comm_hooks`` exports the *function* powerSGD_hook
powerSGD_hook = _sys.modules["tensorbrain.nn.parallel.comm_hooks.powerSGD_hook"]

__all__ = ["default_hooks", "powerSGD_hook"]
