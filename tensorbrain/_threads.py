"""``tb.set_num_threads`` / ``tb.get_num_threads`` (and the inter-op pair), as torch's.

TensorBrain's CPU math runs in NumPy's BLAS (and ``tensorbrain._C``, built without OpenMP), so
the intra-op thread count is the BLAS pool's. ``set_num_threads(n)`` limits it through
``threadpoolctl`` when that package is installed (it is with scikit-learn); without it the
value is stored and the BLAS keeps the count it started with (``OMP_NUM_THREADS`` /
``OPENBLAS_NUM_THREADS`` read at start-up). A3C and hogwild programs call
``torch.set_num_threads(1)`` in each worker; that works either way.
"""
from __future__ import annotations

import os

_state: dict = {"intra": None, "inter": None, "limiter": None}


def _blas_threads():
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    counts = [i.get("num_threads") for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(counts) if counts else None


def set_num_threads(n: int) -> None:
    """Set the number of threads CPU math uses (the BLAS pool, via threadpoolctl when present).

    Args:
        n: a positive thread count.

    Raises:
        ValueError: ``n`` < 1.
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"set_num_threads: the number of threads must be positive, got {n}")
    _state["intra"] = n
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    _state["limiter"] = threadpool_limits(limits=n, user_api="blas")


def get_num_threads() -> int:
    """The number of threads CPU math uses.

    Returns:
        The value last set, else the BLAS pool's size (threadpoolctl), else ``OMP_NUM_THREADS``
        or the CPU count.
    """
    if _state["intra"] is not None:
        return _state["intra"]
    blas = _blas_threads()
    if blas:
        return blas
    env = os.environ.get("OMP_NUM_THREADS", "")
    return int(env) if env.isdigit() and int(env) > 0 else (os.cpu_count() or 1)


def set_num_interop_threads(n: int) -> None:
    """Stored only: TensorBrain runs no inter-op thread pool (ops run one after another).

    Args:
        n: a positive thread count.

    Raises:
        ValueError: ``n`` < 1.
    """
    if int(n) < 1:
        raise ValueError(f"set_num_interop_threads: the number of threads must be positive, got {n}")
    _state["inter"] = int(n)


def get_num_interop_threads() -> int:
    """The value last given to :func:`set_num_interop_threads` (1 before: there is no pool).

    Returns:
        An int.
    """
    return _state["inter"] or 1
