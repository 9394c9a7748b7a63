"""``tb.set_num_threads`` / ``tb.get_num_threads``: the CPU threads of the BLAS/OpenMP pools
behind NumPy's matrix products and of the large fused native kernels (GELU, softmax, layer norm,
log_softmax, cross-entropy, Adam: csrc/kernels/parallel.h), torch's intra-op threads. The native
kernels run on one thread until ``set_num_threads`` is called (unlike torch, whose default is
every core: several ranks of one job on a small machine would otherwise oversubscribe it).

The pools are resized with ``threadpoolctl`` when it is installed (scikit-learn brings it);
without it the number is only recorded and ``OMP_NUM_THREADS`` set before start-up is what
counts. Horovod and DeepSpeed programs call ``torch.set_num_threads(1)`` per worker.
"""
from __future__ import annotations

import os

from . import _native

_state: dict = {"threads": None, "interop": None, "limiter": None, "blas_pool": None, "blas_items": False}


def _limit(n: int) -> None:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:   # optional: the number is recorded only
        return
    _state["limiter"] = threadpool_limits(limits=n)   # stays in force until the next call


# scipy-openblas names its symbols with a prefix and a suffix; plain OpenBLAS builds without
_CALLBACK_SYMBOLS = ("scipy_openblas_set_threads_callback_function64_",
                     "scipy_openblas_set_threads_callback_function",
                     "openblas_set_threads_callback_function64_",
                     "openblas_set_threads_callback_function")


def _share_blas_pool(mod) -> str:
    """Hand NumPy's OpenBLAS the native pool's threads callback (once a process), so products
    and our kernels run on the same threads (csrc/kernels/parallel.cpp). Returns what was done:
    ``"registered"``, or why not (no threadpoolctl, no OpenBLAS, an OpenMP or older build,
    ``TB_BLAS_POOL=0``)."""
    if _state.get("blas_pool"):
        return _state["blas_pool"]
    why = _blas_pool_reason(mod)
    _state["blas_pool"] = why
    return why


def _blas_pool_reason(mod) -> str:
    import ctypes

    from . import _config
    if not _config.get("TB_BLAS_POOL"):
        return "off: TB_BLAS_POOL=0"
    if not hasattr(mod, "_blas_callback_address"):
        return "off: the native module predates the pool"
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "off: threadpoolctl is not installed"
    for info in threadpool_info():
        if info.get("internal_api") != "openblas":
            continue
        version = tuple(int(p) for p in str(info.get("version", "0")).split(".")[:3] if p.isdigit())
        if info.get("threading_layer") != "pthreads" or version < (0, 3, 31):
            return (f"off: OpenBLAS {info.get('version')} ({info.get('threading_layer')}) at "
                    f"{info.get('filepath')}; the callback is checked on 0.3.31+ pthreads builds")
        lib = ctypes.CDLL(info["filepath"])
        for name in _CALLBACK_SYMBOLS:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.argtypes, fn.restype = [ctypes.c_void_p], None
                fn(mod._blas_callback_address())
                # batches of products, one item per pool thread (_gemm.mm_each/mm_sum/bmm)
                _state["blas_items"] = hasattr(mod, "_openblas_items_load") and \
                    mod._openblas_items_load(info["filepath"])
                return "registered"
        return f"off: {info['filepath']} has no threads callback"
    return "off: NumPy's BLAS is not OpenBLAS"


def set_num_threads(num: int) -> None:
    """Use ``num`` threads for CPU matrix products (NumPy's BLAS/OpenMP pools) and the large
    fused native kernels.

    Args:
        num: a positive number of threads.

    Raises:
        ValueError: ``num`` < 1.

    Example:
        >>> import tensorbrain as tb
        >>> n = tb.get_num_threads()
        >>> tb.set_num_threads(1); tb.get_num_threads()
        1
        >>> tb.set_num_threads(n)
    """
    num = int(num)
    if num < 1:
        raise ValueError(f"set_num_threads expects a positive integer, got {num}")
    _limit(num)
    _state["threads"] = num
    mod = _native.loaded()
    if mod is not None and hasattr(mod, "_set_kernel_threads"):   # an older build may lack it
        mod._set_kernel_threads(num)
        if num > 1:
            _share_blas_pool(mod)


def get_num_threads() -> int:
    """The threads CPU matrix products use (the last :func:`set_num_threads`, else
    ``OMP_NUM_THREADS``, else the pools' own size, else the CPU count)."""
    if _state["threads"] is not None:
        return _state["threads"]
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return int(os.environ["OMP_NUM_THREADS"])
    try:
        from threadpoolctl import threadpool_info
        sizes = [p["num_threads"] for p in threadpool_info()]
        if sizes:
            return max(sizes)
    except ImportError:
        pass
    return os.cpu_count() or 1


def set_num_interop_threads(num: int) -> None:
    """Recorded for torch compatibility: TensorBrain runs ops one at a time per Python thread.

    Args:
        num: a positive number of threads.

    Raises:
        ValueError: ``num`` < 1.
    """
    if int(num) < 1:
        raise ValueError(f"set_num_interop_threads expects a positive integer, got {num}")
    _state["interop"] = int(num)


def get_num_interop_threads() -> int:
    """The number :func:`set_num_interop_threads` recorded (default 1)."""
    return _state["interop"] or 1
