"""``tb.cuda.nccl`` (``torch.cuda.nccl``): which NCCL the GPU path would use.

``version()`` gives NCCL's version as torch does, a tuple ``(major, minor, patch)``, read from
CuPy's NCCL binding; ``is_available(tensors)`` says whether NCCL could run on those tensors
(all on the GPU, NCCL present). The direct collectives of this module (``nccl.all_reduce``...)
are not offered: TensorBrain's collectives go through ``tb.distributed`` with
``backend="nccl"``, which also works within one process.

>>> import tensorbrain as tb
>>> tb.cuda.nccl.is_available([tb.zeros(2)])   # a CPU tensor: never
False
"""
from __future__ import annotations

from .. import _xp
from .._unsupported import unsupported

SUM = 0   # ncclSum, as torch's nccl.SUM


def _nccl():
    """CuPy's NCCL binding, or None when CuPy or its NCCL is absent."""
    cp = _xp._cupy
    if cp is None:
        return None
    try:
        from cupy.cuda import nccl  # type: ignore
    except ImportError:
        return None
    return nccl if getattr(nccl, "available", True) else None


def version() -> tuple[int, int, int]:
    """NCCL's version as ``(major, minor, patch)`` (torch's form: compare it with a tuple,
    ``tb.cuda.nccl.version() >= (2, 10)``).

    Returns:
        The version of the NCCL that CuPy loads.

    Raises:
        RuntimeError: CuPy with NCCL is not installed (torch's build without NCCL fails here
            too).
    """
    nccl = _nccl()
    if nccl is None:
        raise RuntimeError("NCCL is not available: TensorBrain uses NCCL through CuPy "
                           "(pip install 'tensorbrain[cuda12]' on a machine with a GPU)")
    code = int(nccl.get_version())   # 2.27.3 -> 22703 (from 2.9; 2.8.4 -> 2804 before)
    if code >= 10000:
        return code // 10000, code // 100 % 100, code % 100
    return code // 1000, code // 100 % 10, code % 100


def is_available(tensors) -> bool:
    """Whether NCCL can work on ``tensors``: NCCL present and every tensor dense, contiguous
    and on the GPU (torch's test).

    Args:
        tensors: a tensor or a sequence of tensors.

    Returns:
        True when NCCL could run a collective on them.
    """
    from ..tensor import Tensor
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    if _nccl() is None:
        return False
    return all(isinstance(t, Tensor) and _xp.is_cupy_array(t._data)
               and not getattr(t, "is_sparse", False) and t.is_contiguous() for t in tensors)


_WHY = ("TensorBrain runs NCCL collectives through its process groups, not on lists of tensors "
        "of one process")
_USE = 'tb.distributed.init_process_group(backend="nccl") and tb.distributed.all_reduce'
all_reduce = unsupported("torch.cuda.nccl.all_reduce", _WHY, _USE)
reduce = unsupported("torch.cuda.nccl.reduce", _WHY, _USE)
broadcast = unsupported("torch.cuda.nccl.broadcast", _WHY, _USE)
all_gather = unsupported("torch.cuda.nccl.all_gather", _WHY, _USE)
reduce_scatter = unsupported("torch.cuda.nccl.reduce_scatter", _WHY, _USE)
init_rank = unsupported("torch.cuda.nccl.init_rank", _WHY, _USE)
unique_id = unsupported("torch.cuda.nccl.unique_id", _WHY, _USE)

__all__ = ["SUM", "all_gather", "all_reduce", "broadcast", "init_rank", "is_available",
           "reduce", "reduce_scatter", "unique_id", "version"]
