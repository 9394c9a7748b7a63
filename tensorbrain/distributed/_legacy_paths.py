"""torch.distributed's private and older module paths that published programs still import.

Tensor- and sequence-parallel programs written for torch 2.2-2.4 import
``torch.distributed._tensor.device_mesh``, FSDP2 programs of torch 2.4-2.5
``torch.distributed._composable.fsdp.fully_shard``, DDP programs
``torch.distributed.algorithms.ddp_comm_hooks.default_hooks``. torch keeps these paths as
aliases of the public modules (it enters them in ``sys.modules``); so do we: :data:`PATHS` maps
each old path (below ``tensorbrain.distributed``) to the module that serves it, and the finder
below hands out *that module object*, so ``DeviceMesh`` imported from either path is one class.
A path under an aliased prefix maps the same way. Under ``python -m tensorbrain.as_torch``
``torch.distributed.X`` is ``tensorbrain.distributed.X``, so the table serves both spellings.

The targets are imported when a program asks for the old path, never when
``tensorbrain.distributed`` is imported (as a package's lazy ``__getattr__`` does).

>>> from tensorbrain.distributed._tensor.device_mesh import DeviceMesh
>>> import tensorbrain.distributed.device_mesh as public
>>> DeviceMesh is public.DeviceMesh
True
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

_BASE = "tensorbrain.distributed."

#: old path (below ``tensorbrain.distributed``) -> the module that serves it (full name).
PATHS: dict[str, str] = {
    # torch 2.2-2.4's DTensor package (torch.distributed._tensor.*)
    "_tensor.device_mesh": "tensorbrain.distributed.device_mesh",
    "_tensor.placement_types": "tensorbrain.distributed.tensor.placement_types",
    "_tensor.api": "tensorbrain.distributed.tensor._api",
    "tensor.device_mesh": "tensorbrain.distributed.device_mesh",
    # torch 2.4-2.5's FSDP2 modules
    "_composable.fsdp.fully_shard": "tensorbrain.distributed.fsdp",
    "_composable.fsdp._fsdp_api": "tensorbrain.distributed.fsdp",
    # DDP communication hooks live in nn.parallel here (the package algorithms.ddp_comm_hooks
    # exposes these two modules, as torch's does)
    "algorithms.ddp_comm_hooks.default_hooks": "tensorbrain.nn.parallel.comm_hooks.default_hooks",
    "algorithms.ddp_comm_hooks.powerSGD_hook": "tensorbrain.nn.parallel.comm_hooks.powerSGD_hook",
    "algorithms.ddp_comm_hooks.post_localSGD_hook":
        "tensorbrain.nn.parallel.comm_hooks.post_localSGD_hook",
}


def resolve(fullname: str) -> str | None:
    """The module that serves ``fullname``, or None when it is not an old path.

    Args:
        fullname: a module name such as ``'tensorbrain.distributed._tensor.device_mesh'``.

    Returns:
        The serving module's name (``'tensorbrain.distributed.device_mesh'``), or None.

    Example:
        >>> resolve("tensorbrain.distributed.algorithms.ddp_comm_hooks.default_hooks")
        'tensorbrain.nn.parallel.comm_hooks.default_hooks'
    """
    if not fullname.startswith(_BASE):
        return None
    rest = fullname[len(_BASE):]
    for old, new in PATHS.items():
        if rest == old or rest.startswith(old + "."):
            return new + rest[len(old):]
    return None


class _Loader(importlib.abc.Loader):
    def __init__(self, real: str):
        self.real = real

    def create_module(self, spec):
        module = importlib.import_module(self.real)
        self.saved_spec = module.__spec__  # the import system overwrites it; restored below
        return module

    def exec_module(self, module):
        module.__spec__ = self.saved_spec


class _Finder(importlib.abc.MetaPathFinder):
    """Serves the old paths of :data:`PATHS` by the public module objects."""

    def find_spec(self, fullname, path=None, target=None):
        real = resolve(fullname)
        if real is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Loader(real))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once): before the path finder, which would
    load a second copy of a served package's submodule under the old name."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
