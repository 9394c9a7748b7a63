"""Where the profiler listens, installed only while it records (nothing is there otherwise).

- **Ops** (forward): the op table's functions (``tensorbrain/_ops/table.py``: what ``tb.add``,
  ``Tensor.add`` and ``a + b`` call), ``tb.nn.functional``'s functions and the factories
  (``tb.ones``, ``tb.randn``, ...) are replaced, where
  they are looked up (the ``tensorbrain`` and ``tensorbrain.nn.functional`` modules, the
  ``Tensor`` class), by timing wrappers; :func:`uninstall` puts the originals back. A module's
  ``forward`` calls ``F.linear`` through the module attribute, so it is seen; an op that calls
  another op by a direct reference inside TensorBrain is one span (``linear``, not the matmul in
  it), as torch shows ``aten::linear`` for ``F.linear``.
- **Backward**: the autograd engine's one slot (``autograd/engine.py``, ``PROFILE_HOOK``), read
  once per ``backward()``: each graph node's backward is one span, named by the node
  (``AddmmBackward``, as torch's ``AddmmBackward0``).
- **Optimizers**: ``step`` and ``zero_grad`` of every ``tb.optim.Optimizer`` class, as torch's
  ``Optimizer.step#SGD.step``.
- **Collectives and DDP buckets**: the process groups that exist when recording starts are
  observed through ``tensorbrain/distributed/_observe.py``'s proxy (as ``TB_TIMELINE`` does),
  so they land on the same timeline.

With nothing installed, profiling costs nothing: no op, method or engine path changes.
"""
from __future__ import annotations

import sys
import threading
import types

from .. import _xp


def _op_names() -> dict:
    """``{function: name}`` for every op the profiler times."""
    from .._ops import table
    from ..nn import functional as F
    names: dict = {}
    for name, (fn, _where) in table.OPS.items():
        names.setdefault(fn, name)
    for name in F.__all__:
        fn = getattr(F, name, None)
        if callable(fn) and not isinstance(fn, type):
            names.setdefault(fn, name)
    import tensorbrain
    for name in _FACTORIES:  # torch records aten::ones, aten::randn, ... too
        names.setdefault(getattr(tensorbrain, name), name)
    return names


_FACTORIES = ("tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange",
              "linspace", "eye", "rand", "randn", "randint", "randperm", "zeros_like",
              "ones_like", "empty_like", "full_like", "rand_like", "randn_like")


def _owners():
    """The namespaces ops are looked up in: ``tb``, ``tb.nn.functional``, the Tensor class."""
    import tensorbrain
    from ..nn import functional as F
    from ..tensor import Tensor
    return [tensorbrain, F, *[c for c in Tensor.__mro__ if c.__module__.startswith("tensorbrain")]]


class Installed:
    """What :func:`install` replaced, to put back."""

    def __init__(self):
        self.replaced: list = []   # (owner, attribute, original)
        self.undo: list = []       # callables


def install(rec) -> Installed:
    """Put the recorder ``rec`` (``profile``) in every place listed in the module docstring."""
    done = Installed()
    names = _op_names()
    wrappers: dict = {}
    for owner in _owners():
        for attr, value in list(vars(owner).items()):
            try:
                name = names.get(value)
            except TypeError:  # an unhashable attribute
                continue
            if name is None:
                continue
            if value not in wrappers:
                wrappers[value] = _timed(value, name, rec)
            setattr(owner, attr, wrappers[value])
            done.replaced.append((owner, attr, value))
    _install_optimizers(rec, done)
    from ..autograd import engine
    previous = engine.PROFILE_HOOK[0]
    engine.PROFILE_HOOK[0] = _backward(rec)
    done.undo.append(lambda: engine.PROFILE_HOOK.__setitem__(0, previous))
    if "tensorbrain.distributed._groups" in sys.modules:  # tb.distributed is in use
        done.undo.append(_observe_groups(rec))
    return done


def _observe_groups(sink):
    """Record every existing process group's collectives, and DDP buckets, into ``sink``;
    returns the function that undoes it.

    Each group's backend gets ``_observe``'s proxy feeding ``sink`` (over a ``TB_TIMELINE`` proxy,
    if any: both record), and each group's all_reduce fast path (``ProcessGroup.fast``) is off
    meanwhile (it would bypass the proxy); both are put back by the returned function, unless
    the group was changed in between.
    """
    from ..distributed import _groups, _observe
    groups = [g for g in _groups._WORLD.groups.values() if isinstance(g, _groups.ProcessGroup)]
    saved = [(g, g.backend, g.fast) for g in groups]
    for g in groups:
        g.backend = _observe._Observed(g.backend, g.group_name, sink, None)
        g.fast = None
    _observe._SINKS.append(sink)

    def undo() -> None:
        if sink in _observe._SINKS:
            _observe._SINKS.remove(sink)
        for g, backend, fast in saved:
            if isinstance(g.backend, _observe._Observed) and g.backend._tl is sink:
                g.backend, g.fast = backend, fast
    return undo


def uninstall(done: Installed) -> None:
    """Put back everything :func:`install` replaced (in reverse order)."""
    for owner, attr, value in reversed(done.replaced):
        setattr(owner, attr, value)
    for undo in reversed(done.undo):
        undo()
    done.replaced.clear()
    done.undo.clear()


def _timed(fn, name, rec):
    clock = rec.clock
    ident = threading.get_ident

    def op(*args, **kwargs):
        if not rec.recording:
            return fn(*args, **kwargs)
        cuda = rec.cuda_start(args) if rec.cuda else None
        start = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            rec.add(name, "cpu_op", ident(), start, clock(), args if rec.record_shapes else None,
                    cuda)
    op.__wrapped__ = fn  # type: ignore[attr-defined]
    op.__name__, op.__qualname__, op.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    op.__module__ = fn.__module__
    return op


def _backward(rec):
    clock = rec.clock
    ident = threading.get_ident

    def run(node, grad):
        if not rec.recording:
            return node.backward(grad)
        start = clock()
        try:
            return node.backward(grad)
        finally:
            rec.add(node.name, "backward", ident(), start, clock(), None, None)
    return run


def _install_optimizers(rec, done: Installed) -> None:
    from ..optim.optimizer import Optimizer
    stack, seen = [Optimizer], set()
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        stack.extend(cls.__subclasses__())
        for method in ("step", "zero_grad"):
            fn = cls.__dict__.get(method)
            if isinstance(fn, types.FunctionType):
                setattr(cls, method, _timed_method(fn, method, rec))
                done.replaced.append((cls, method, fn))


def _timed_method(fn, method, rec):
    clock, ident = rec.clock, threading.get_ident

    def timed(self, *args, **kwargs):
        if not rec.recording:
            return fn(self, *args, **kwargs)
        start = clock()
        try:
            return fn(self, *args, **kwargs)
        finally:  # torch's label: Optimizer.step#SGD.step
            rec.add(f"Optimizer.{method}#{type(self).__name__}.{method}", "user_annotation",
                    ident(), start, clock(), None, None)
    timed.__wrapped__ = fn  # type: ignore[attr-defined]
    timed.__name__, timed.__qualname__, timed.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return timed


# ***** CUDA events (CuPy) *****
def cuda_available() -> bool:
    return _xp.cuda_available()


def cuda_pair(args):
    """A started ``(start, end)`` CuPy event pair when an argument is a CUDA tensor, else None."""
    for a in args:
        data = getattr(a, "_data", None)
        if data is not None and _xp.is_cupy_array(data):
            cp = _xp.cupy()
            start = cp.cuda.Event()
            start.record()
            return start
    return None
