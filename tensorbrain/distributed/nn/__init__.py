"""``tb.distributed.nn`` (``torch.distributed.nn``): differentiable collectives
(:mod:`.functional`) and :class:`RemoteModule` (a module on another RPC worker)."""
from . import functional
from ._remote_module import RemoteModule
from .functional import (all_gather, all_reduce, all_to_all, all_to_all_single, broadcast,
                         gather, reduce, reduce_scatter, scatter)

__all__ = ["RemoteModule", "all_gather", "all_reduce", "all_to_all", "all_to_all_single",
           "broadcast", "functional", "gather", "reduce", "reduce_scatter", "scatter"]
