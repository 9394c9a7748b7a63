"""``tb.jit`` (``torch.jit``): TorchScript's decorators and checks, running eagerly.

TensorBrain has no TorchScript compiler. ``script`` and ``trace`` give back what they are given
(a function, a module or a class), which computes what the scripted or traced one would;
``ignore``, ``unused``, ``export``, ``interface``, ``freeze``... do the same, and
``is_scripting()`` / ``is_tracing()`` are False, so code written to be scriptable runs its
Python path. What needs the TorchScript format itself is refused by name: ``save`` and ``load``
(use ``tb.save(model.state_dict(), path)`` and load it into the model), ``CompilationUnit``.

>>> import tensorbrain as tb
>>> @tb.jit.script
... def fused(x):
...     return x * tb.sigmoid(x)
>>> fused(tb.zeros(2)).tolist(), tb.jit.is_scripting()
([0.0, 0.0], False)
"""
from __future__ import annotations

import typing

from ._unsupported import unsupported, unsupported_class
from .nn.modules.module import Module

_NO_TS = "TensorBrain has no TorchScript format (script and trace run eagerly)"
_USE = "tb.save(model.state_dict(), path) and load_state_dict"
save = unsupported("torch.jit.save", _NO_TS, _USE)
load = unsupported("torch.jit.load", _NO_TS, _USE)
export_opnames = unsupported("torch.jit.export_opnames", _NO_TS)
CompilationUnit = unsupported_class("torch.jit.CompilationUnit", _NO_TS, "Python functions")

#: ``torch.jit.Final``: the typing marker scriptable modules annotate constants with.
Final = typing.Final


class Error(RuntimeError):
    """``torch.jit.Error``: what a TorchScript program raises (never here)."""


class TracerWarning(Warning):
    """``torch.jit.TracerWarning``: programs filter it (``warnings.filterwarnings``)."""


class ScriptModule(Module):
    """``torch.jit.ScriptModule``: an ``nn.Module`` (modules written against the old
    ``@script_method`` API subclass it and run eagerly)."""


class TracedModule(ScriptModule):
    """``torch.jit.TracedModule``: the type of a traced module in torch; ``trace`` returns the
    module itself here, so nothing is an instance of it unless made so."""


class ScriptFunction:
    """``torch.jit.ScriptFunction``: the type of a scripted function in torch; ``script``
    returns the function itself here, so nothing is an instance of it."""


def script(obj=None, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """``obj`` itself: run eagerly, with the same results as the scripted one.

    Args:
        obj: a function, an ``nn.Module`` or a class.
        optimize: accepted.
        _frames_up: accepted.
        _rcb: accepted.
        example_inputs: accepted.

    Returns:
        ``obj``.
    """
    return obj


def trace(func, example_inputs=None, *args, **kwargs):
    """``func`` itself: a traced function computes what the function does on its inputs.

    Args:
        func: a function or an ``nn.Module``.
        example_inputs: accepted (not run).
        *args: accepted.
        **kwargs: accepted (``check_trace``, ``strict``, ...).

    Returns:
        ``func``.
    """
    return func


def trace_module(mod, inputs=None, *args, **kwargs):
    """``mod`` itself (see :func:`trace`).

    Args:
        mod: the module.
        inputs: accepted.
        *args: accepted.
        **kwargs: accepted.
    """
    return mod


def _decorator(fn=None, *args, **kwargs):
    if fn is None or not callable(fn):
        return lambda f: f   # ignore(drop=True) form
    return fn


ignore = unused = export = interface = script_method = script_if_tracing = _decorator
_overload = _overload_method = _decorator


def is_scripting() -> bool:
    """False: nothing runs as TorchScript."""
    return False


def is_tracing() -> bool:
    """False: nothing is being traced."""
    return False


def annotate(the_type, the_value):
    """``the_value`` (a type hint for the TorchScript compiler).

    Args:
        the_type: the type.
        the_value: the value.
    """
    return the_value


def Attribute(value, type=None):  # noqa: N802,A002  (torch's names)
    """``value`` (a module attribute's type hint for TorchScript).

    Args:
        value: the value.
        type: its type.
    """
    return value


def isinstance(obj, target_type) -> bool:  # noqa: A001
    """Python's ``isinstance`` (TorchScript's refinement form).

    Args:
        obj: the object.
        target_type: the type.
    """
    import builtins
    return builtins.isinstance(obj, typing.get_origin(target_type) or target_type)


def freeze(mod, preserved_attrs=None, optimize_numerics: bool = True):
    """``mod`` itself (freezing inlines a scripted module's parameters; nothing to inline).

    Args:
        mod: the module.
        preserved_attrs: accepted.
        optimize_numerics: accepted.
    """
    return mod


def optimize_for_inference(mod, other_methods=None):
    """``mod`` itself.

    Args:
        mod: the module.
        other_methods: accepted.
    """
    return mod


class Future:
    """The result of :func:`fork`: the call already ran; ``wait()`` gives its value.

    Args:
        value: the result.
    """

    def __init__(self, value):
        self._value = value

    def wait(self):
        """The call's result."""
        return self._value


def fork(func, *args, **kwargs) -> Future:
    """Run ``func(*args, **kwargs)`` now and wrap its result (TorchScript's async fork).

    Args:
        func: the function.
        *args: its arguments.
        **kwargs: its keyword arguments.

    Returns:
        Future: its ``wait()`` gives the result.
    """
    return Future(func(*args, **kwargs))


def wait(future):
    """The result of :func:`fork`'s future.

    Args:
        future: a :class:`Future`.
    """
    return future.wait()


def set_fusion_strategy(strategy):
    """Accepted and does nothing (no fuser); returns the strategy.

    Args:
        strategy: torch's list of (kind, depth) pairs.
    """
    return strategy


def enable_onednn_fusion(enabled: bool) -> None:
    """Accepted and does nothing.

    Args:
        enabled: the flag.
    """


def onednn_fusion_enabled() -> bool:
    """False."""
    return False


class strict_fusion:
    """``with torch.jit.strict_fusion():``: accepted and does nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


__all__ = ["Attribute", "CompilationUnit", "Error", "Final", "Future", "ScriptFunction",
           "ScriptModule", "TracedModule", "TracerWarning", "annotate", "enable_onednn_fusion", "export",
           "export_opnames", "fork", "freeze", "ignore", "interface", "is_scripting",
           "is_tracing", "isinstance", "load", "onednn_fusion_enabled", "optimize_for_inference",
           "save", "script", "script_if_tracing", "script_method", "set_fusion_strategy",
           "strict_fusion", "trace", "trace_module", "unused", "wait"]


# torch.jit.annotations: the typing names old TorchScript code imports from there
import types as _types  # noqa: E402
import typing as _typing  # noqa: E402

_annotations = _types.ModuleType("tensorbrain.jit.annotations", "torch.jit.annotations: "
                                 "typing's names, as TorchScript code imports them.")
for _n in ("Any", "Dict", "List", "Optional", "Tuple", "Union", "Callable"):
    setattr(_annotations, _n, getattr(_typing, _n))
globals()["annotations"] = _annotations   # the name `from __future__ import annotations` took
