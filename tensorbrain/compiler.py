"""``tb.compiler`` (``torch.compiler``): the compiler's public switches, for a framework that
runs eagerly. ``compile`` is :func:`tensorbrain.compile`; ``disable``, ``allow_in_graph``,
``assume_constant_result``, ``wrap_numpy`` and ``nested_compile_region`` give their function
back; ``is_compiling()`` and friends are False; the rest are accepted and do nothing, since
nothing is compiled (see ``tensorbrain/_dynamo/__init__.py``).

>>> import tensorbrain as tb
>>> @tb.compiler.disable
... def f(x):
...     return x + 1
>>> f(1), tb.compiler.is_compiling()
(2, False)
"""
from __future__ import annotations

from ._dynamo import allow_in_graph, compile, disable, list_backends, reset  # noqa: F401
from ._dynamo import config  # noqa: F401


def _identity(fn=None, *args, **kwargs):
    return (lambda f: f) if fn is None else fn


assume_constant_result = substitute_in_graph = wrap_numpy = nested_compile_region = _identity


def is_compiling() -> bool:
    """False: nothing is being compiled or exported."""
    return False


is_dynamo_compiling = is_exporting = is_compiling

_default_backend = ["inductor"]


def set_default_backend(backend: str) -> None:
    """Store the backend name (every backend runs eagerly here).

    Args:
        backend: the name.
    """
    _default_backend[0] = backend


def get_default_backend() -> str:
    """The backend name last set (``"inductor"`` at start)."""
    return _default_backend[0]


def _no_op(*args, **kwargs) -> None:
    """Accepted and does nothing: there are no compiled graphs, caches or guards."""


cudagraph_mark_step_begin = set_stance = set_enable_guard_collectives = _no_op
keep_tensor_guards_unsafe = skip_guard_on_inbuilt_nn_modules_unsafe = _no_op
skip_guard_on_all_nn_modules_unsafe = skip_guard_on_globals_unsafe = _no_op
skip_all_guards_unsafe = keep_portable_guards_unsafe = _no_op


def save_cache_artifacts():
    """None: there is no compile cache to save."""
    return None


def load_cache_artifacts(serialized_artifacts):
    """None: there is no compile cache to load.

    Args:
        serialized_artifacts: what :func:`save_cache_artifacts` gave.
    """
    return None


__all__ = ["allow_in_graph", "assume_constant_result", "compile", "config",
           "cudagraph_mark_step_begin", "disable", "get_default_backend", "is_compiling",
           "is_dynamo_compiling", "is_exporting", "list_backends", "load_cache_artifacts",
           "nested_compile_region", "reset", "save_cache_artifacts", "set_default_backend",
           "set_stance", "substitute_in_graph", "wrap_numpy"]
