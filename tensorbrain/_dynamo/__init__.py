"""``tb.compile`` and ``tb._dynamo``: torch's compiler entry points, running eagerly.

TensorBrain has no graph compiler: ``tb.compile(model)`` gives a callable with the same
semantics that runs the model's ops as they are (NumPy/CuPy kernels, one by one), and says so
once with an INFO record (``TB_LOG_LEVEL=INFO``). It accepts torch's keyword arguments
(``fullgraph``, ``dynamic``, ``backend``, ``mode``, ``options``, ``disable``) so programs that
compile unconditionally run unchanged. As torch's, compiling a module gives an
:class:`OptimizedModule` that holds it as ``_orig_mod`` (its ``state_dict`` keys carry the
``_orig_mod.`` prefix, which programs strip when they save), and compiling a function gives a
wrapper of it.

``tb._dynamo`` has the names programs reach for: ``config`` (``suppress_errors``,
``cache_size_limit``, ... stored, no effect; an unknown name is an AttributeError, as torch's),
``reset()``, ``is_compiling()`` (False), ``disable``, ``allow_in_graph``, ``mark_dynamic``,
``mark_static``, ``maybe_mark_dynamic`` (all no-ops) and ``OptimizedModule``.

>>> import tensorbrain as tb
>>> f = tb.compile(lambda x: x * 2, mode="max-autotune", fullgraph=True)
>>> f(tb.ones(2)).tolist()
[2.0, 2.0]
"""
from __future__ import annotations

import contextlib
import functools

from .. import _logging
from ..nn.modules.module import Module
from . import eval_frame
from .config import config
from .eval_frame import OptimizedModule

_BACKENDS = ("inductor", "eager", "aot_eager", "cudagraphs")
_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_said = [False]


def _say_once() -> None:
    if not _said[0]:
        _said[0] = True
        _logging.get_logger("tensorbrain").info(
            "tb.compile: TensorBrain has no graph compiler; the model runs eagerly, op by op, "
            "with the same results (see docs/compat.md)")


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="inductor",  # noqa: A001
            mode=None, options=None, disable: bool = False):
    """``torch.compile``: the same callable, run eagerly (see the module docstring).

    Args:
        model: an ``nn.Module`` or a function; None gives a decorator.
        fullgraph: accepted (there is no graph to break).
        dynamic: accepted.
        backend: torch's backend name or a callable; accepted, not used.
        mode: one of torch's modes (``"default"``, ``"reduce-overhead"``, ``"max-autotune"``,
            ``"max-autotune-no-cudagraphs"``) or None.
        options: a dict of backend options; accepted.
        disable: return ``model`` itself.

    Returns:
        An :class:`OptimizedModule` for a module, a wrapper for a function, or a decorator.

    Raises:
        RuntimeError: ``mode`` and ``options`` both given, or an unknown ``mode`` (torch's
            errors).
        TypeError: ``model`` is not callable.
    """
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode!r}, should be one of: "
                           f"{', '.join(m for m in _MODES if m)}")
    if isinstance(backend, str) and backend not in _BACKENDS and not config.suppress_errors:
        raise RuntimeError(f"invalid backend {backend!r}: torch's are {', '.join(_BACKENDS)} "
                           f"(TensorBrain runs every one eagerly)")
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic,
                                 backend=backend, mode=mode, options=options, disable=disable)
    if not callable(model):
        raise TypeError(f"torch.compile expects a callable (a function or an nn.Module), got "
                        f"{type(model).__name__}")
    if disable:
        return model
    _say_once()
    if isinstance(model, Module):
        return OptimizedModule(model)
    return eval_frame.wrap_function(model)


def reset() -> None:
    """Forget compiled code (``torch._dynamo.reset``): there is none; a no-op."""


def is_compiling() -> bool:
    """False: nothing is ever being compiled (``torch._dynamo.is_compiling``)."""
    return False


def disable(fn=None, recursive: bool = True, *, reason=None):
    """``torch._dynamo.disable``: run ``fn`` without compiling it, which is how everything runs.

    Args:
        fn: the function; None gives a decorator.
        recursive: accepted.
        reason: accepted.

    Returns:
        ``fn`` itself, or a decorator.
    """
    return (lambda f: f) if fn is None else fn


def allow_in_graph(fn):
    """``torch._dynamo.allow_in_graph``: ``fn`` itself (there is no graph).

    Args:
        fn: the function.
    """
    return fn


def _no_op_marker(t, *args, **kwargs) -> None:
    """Shape hints for the compiler: accepted and ignored."""


mark_dynamic = maybe_mark_dynamic = mark_static = mark_unbacked = _no_op_marker


def list_backends(exclude_tags=()) -> list[str]:
    """torch's backend names (all run eagerly here).

    Args:
        exclude_tags: accepted.
    """
    return list(_BACKENDS)


def lookup_backend(name):
    """``name`` itself when it is one of :func:`list_backends`.

    Args:
        name: a backend name.

    Raises:
        RuntimeError: an unknown name.
    """
    if name not in _BACKENDS:
        raise RuntimeError(f"invalid backend {name!r}")
    return name


def explain(fn, *args, **kwargs):
    """No graphs, no breaks: returns a short explanation.

    Args:
        fn: the function.
        *args: its arguments (not run).
        **kwargs: its keyword arguments.
    """
    return "TensorBrain runs eagerly: no graphs, no graph breaks"


@contextlib.contextmanager
def optimize_assert(*args, **kwargs):
    """Accepted and does nothing."""
    yield


__all__ = ["OptimizedModule", "allow_in_graph", "compile", "config", "disable", "explain",
           "is_compiling", "list_backends", "lookup_backend", "mark_dynamic", "mark_static",
           "maybe_mark_dynamic", "reset"]
