"""Backend registry: names -> factories, imported lazily (mpi4py, NCCL are never imported until a
group asks for them).

>>> from tensorbrain.distributed import backends
>>> backends.canonical_name("gloo")
'tcp'
>>> "tcp" in backends.available_backends()
True
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

#: aliases accepted so PyTorch-style code runs unchanged
ALIASES = {"gloo": "tcp"}


@dataclass
class _Entry:
    factory: object            # a callable, or "module:attr" imported on first use
    available: object = None   # None (always), a callable, or "module:attr" -> bool


_REGISTRY: dict[str, _Entry] = {}


def register_backend(name: str, factory, devices=("cpu",), available=None) -> None:
    """Register ``factory(store, rank, size, timeout, group_name) -> Backend`` under ``name``.

    Args:
        name: the backend's name (lower-cased); it may not be an alias such as ``"gloo"``.
        factory: the callable, or a string ``"module:attr"`` so the module is imported only
            when a group uses it.
        devices: the device types the backend takes (``"cpu"``, ``"cuda"``), as torch's
            ``register_backend`` has it; not used (a group names its backend).
        available: None (always available), or a callable / ``"module:attr"`` returning bool.

    Raises:
        ValueError: ``name`` is an alias of a built-in backend.
    """
    name = name.lower()
    if name in ALIASES:
        raise ValueError(f"{name!r} is an alias of {ALIASES[name]!r}; register another name")
    _REGISTRY[name] = _Entry(factory, available)


def canonical_name(name: str) -> str:
    """The registry name of a backend: ``'gloo'`` -> ``'tcp'``, lower-cased.

    Args:
        name: a backend name or alias; ValueError, listing the known ones, when it is unknown.
    """
    key = str(name).lower()
    key = ALIASES.get(key, key)
    if key not in _REGISTRY:
        from ..._config import did_you_mean
        known = sorted(list(_REGISTRY) + list(ALIASES))
        raise ValueError(f"unknown backend {name!r}:{did_you_mean(key, known)} choose one of {known} "
                         f"(or register one with tb.distributed.Backend.register_backend)")
    return key


def _resolve(ref):
    if isinstance(ref, str):
        module, _, attr = ref.partition(":")
        return getattr(importlib.import_module(module), attr)
    return ref


def get_factory(name: str) -> Callable:
    """The factory registered for backend ``name`` (its module imported if needed).

    Args:
        name: a backend name or alias (ValueError when unknown).
    """
    return _resolve(_REGISTRY[canonical_name(name)].factory)


def is_backend_available(name: str) -> bool:
    """Whether ``name`` can be used here (its optional dependencies import).

    Args:
        name: a backend name or alias; unknown names give False.
    """
    try:
        entry = _REGISTRY[canonical_name(name)]
    except ValueError:
        return False
    if entry.available is None:
        return True
    try:
        return bool(_resolve(entry.available)())
    except Exception:  # noqa: BLE001 - a broken optional dependency means "not available"
        return False


def available_backends() -> list:
    """The names of the registered backends that can be used here."""
    return [n for n in _REGISTRY if is_backend_available(n)]


def default_backend(device_type: str = "cpu") -> str:
    """The backend used for ``backend=None``: nccl for CUDA tensors (when available), tcp
    for CPU (or the backend named by ``TB_DEFAULT_BACKEND``, e.g. ``mpi``, which lets jobs
    started with mpiexec leave the backend out: docs/mpi.md).

    Args:
        device_type: ``"cpu"`` or ``"cuda"``.
    """
    if device_type == "cuda" and "nccl" in _REGISTRY and is_backend_available("nccl"):
        return "nccl"
    from ... import _config
    chosen = _config.get("TB_DEFAULT_BACKEND")
    return canonical_name(chosen) if chosen else "tcp"


# ***** built-in backends, imported lazily: `is_mpi_available()` answers without mpi4py *****
register_backend("tcp", "tensorbrain.distributed.backends.tcp:TCPBackend", devices=("cpu", "cuda"))
register_backend("mpi", "tensorbrain.distributed.backends.mpi:MPIBackend",
                 available="tensorbrain.distributed.backends.mpi:is_available")
register_backend("nccl", "tensorbrain.distributed.backends.nccl:NCCLBackend", devices=("cuda",),
                 available="tensorbrain.distributed.backends.nccl:is_available")


# ***** hooks for backends that bring their own launcher (mpi: rank and size from mpiexec, no
# store needed; new_group over the group's global ranks, passed by create_backend) *****
_LAUNCHER_WORLD = {"mpi": "tensorbrain.distributed.backends.mpi:world_rank_size"}


def launcher_world(name: str):
    """``(rank, world_size)`` from the backend's own launcher, or None for store-based ones.

    Args:
        name: a backend name or alias.
    """
    ref = _LAUNCHER_WORLD.get(canonical_name(name))
    return None if ref is None else _resolve(ref)()


def create_backend(name: str, store, rank: int, size: int, timeout: float, group_name: str,
                   global_ranks=None, deadline=None):
    """Build backend ``name`` (collective: every rank of the group calls it).

    Args:
        name: a backend name or alias.
        store, rank, size, timeout, group_name: as for ``base.Backend``.
        global_ranks: the group's ranks in the world, for factories that take them (mpi).
        deadline: a monotonic deadline bounding the set-up, for factories that take one.
    """
    import inspect
    factory = get_factory(name)
    try:
        params = set(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        params = set()  # a callable without a signature: no keywords passed
    extra: dict = {}
    if deadline is not None and "deadline" in params:  # bounded by init_process_group's deadline
        extra["deadline"] = deadline
    if global_ranks is not None and "global_ranks" in params:
        extra["global_ranks"] = list(global_ranks)
    return factory(store, rank, size, timeout, group_name, **extra)
