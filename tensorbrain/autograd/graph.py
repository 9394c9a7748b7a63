"""Graph nodes. Each differentiable op's output owns one :class:`Node` (its ``grad_fn``).

A node holds the op's input tensors and a ``backward`` closure written next to the op's forward
(see ``tensorbrain/_ops``). The closure maps the output's gradient to one gradient per input
(None where an input needs none). Tensors the closure reads are listed in ``saved`` with their
version at save time, so an in-place change before backward is detected instead of silently
giving a wrong gradient.
"""
from __future__ import annotations

import itertools
import threading
import weakref

import numpy as np

from .._xp import get_array_module

_seq = itertools.count()
# the backward passes running in this thread: their end-of-pass callbacks (engine.py runs them)
_local = threading.local()


def queue_callback(fn) -> None:
    """Run ``fn()`` once when the backward pass now running in this thread ends.

    Callbacks queued while a callback runs are run too. Outside backward it is an error, as in
    PyTorch (``Variable._execution_engine.queue_callback``).

    Args:
        fn: a callable without arguments.
    """
    stack = getattr(_local, "callbacks", None)
    if not stack:
        raise RuntimeError("queue_callback() can only be called while a backward pass is running")
    stack[-1].append(fn)


class Node:
    """One recorded op in the graph: the ``grad_fn`` of its output.

    Args:
        name: the op's name (shown in ``grad_fn`` reprs, e.g. ``MulBackward``).
        inputs: the op's differentiable inputs (Tensor or None each).
        backward: a function from the output's gradient to one gradient per input.
        saved: tensors the backward reads; their versions are checked before it runs.
    """
    __slots__ = ("name", "inputs", "edges", "backward", "saved", "seq", "pre_hooks", "__weakref__")

    def __init__(self, name, inputs, backward, saved=()):
        self.name = name
        self.inputs = inputs            # tuple of Tensor | None, one per differentiable input
        # Where each input's gradient goes, fixed now: the input's node, the input itself when
        # it is a leaf, or None. Reading ``t.grad_fn`` at backward time instead would follow an
        # in-place op done later (``y.mul_(2)`` rebases y onto a new node) and send this node's
        # gradient through an op that happened after it: wrong gradients, or a cycle.
        self.edges = tuple(None if t is None or not t.requires_grad else
                           (t if t.grad_fn is None else t.grad_fn) for t in inputs)
        self.backward = backward        # fn(grad_array) -> tuple of grad arrays | None
        self.saved = tuple((t, t._version[0]) for t in saved) if saved else ()
        self.seq = next(_seq)           # later nodes run first, as in PyTorch's engine
        self.pre_hooks = None           # hooks registered on the output tensor (register_hook)

    def __repr__(self):
        return f"<{self.name} object>"

    def next_functions(self):
        """(node or leaf tensor, index) pairs, for graph walks (DDP's unused-parameter search)."""
        return tuple((e, 0) for e in self.edges)


def reachable_leaves(roots):
    """Leaf tensors requiring grad that the graph of ``roots`` reaches (iteratively).

    Args:
        roots: the tensors whose graphs are walked.
    """
    seen, leaves, stack = set(), {}, []
    for r in roots:
        if r.grad_fn is not None:
            stack.append(r.grad_fn)
        elif r.requires_grad:
            leaves[id(r)] = r
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for e in node.edges:
            if e is None:
                continue
            if type(e) is Node:
                stack.append(e)
            else:
                leaves[id(e)] = e
    return list(leaves.values())


class saved_tensors_hooks:
    """``with saved_tensors_hooks(pack, unpack):`` (``torch.autograd.graph``): accepted; the
    hooks are not called. TensorBrain's backward functions keep the arrays they need in their
    closures, so there is no saved-tensor slot to pack and unpack: results are the same, and the
    memory the hooks aim to save (offloading, recomputation) is not saved.

    Args:
        pack_hook: called with each tensor saved for backward, in torch.
        unpack_hook: called with what ``pack_hook`` returned, in torch.
    """

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class save_on_cpu(saved_tensors_hooks):
    """``with save_on_cpu():``: accepted (see :class:`saved_tensors_hooks`).

    Args:
        pin_memory: accepted.
        device_type: accepted.
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        super().__init__(None, None)


def increment_version(tensor) -> None:
    """Bump the version counter of ``tensor`` (or of each tensor of a sequence), as
    ``torch.autograd.graph.increment_version``: tells autograd the data changed in place
    behind its back, so a backward pass that saved the old values raises."""
    for t in (tensor if isinstance(tensor, (list, tuple)) else (tensor,)):
        t._version[0] += 1


#: The stream switches of torch's autograd (process-wide, as torch's): TensorBrain's backward
#: pass runs on one stream, so neither changes what it does; the values are kept and readable.
stream_switches = {"override_stale_capture_stream": False,
                   "warn_on_accumulate_grad_stream_mismatch": True}


def _set_switch(name: str, enabled: bool) -> None:
    if not isinstance(enabled, bool):
        raise RuntimeError(f"enabled must be a bool, but got {type(enabled).__name__}")
    stream_switches[name] = enabled


def set_override_stale_capture_stream(enabled: bool) -> None:
    """Whether autograd replaces a stale non-capturing stream by the capturing one during CUDA
    graph capture, as ``torch.autograd.graph.set_override_stale_capture_stream``
    (process-wide). TensorBrain captures no CUDA graphs, so nothing else changes.

    Args:
        enabled: the switch (a bool).

    Raises:
        RuntimeError: ``enabled`` is not a bool (torch's error).
    """
    _set_switch("override_stale_capture_stream", enabled)


def set_warn_on_accumulate_grad_stream_mismatch(enabled: bool) -> None:
    """Whether to warn when a gradient arrives on another stream than its AccumulateGrad
    node's, as ``torch.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch``
    (process-wide). TensorBrain's backward runs on one stream, so it never warns.

    Args:
        enabled: the switch (a bool).

    Raises:
        RuntimeError: ``enabled`` is not a bool (torch's error).
    """
    _set_switch("warn_on_accumulate_grad_stream_mismatch", enabled)


class _MultiHandle:
    """Removes the per-tensor hooks of :func:`register_multi_grad_hook`."""

    def __init__(self, handles: list) -> None:
        self.handles = handles

    def remove(self) -> None:
        """Remove every hook."""
        for h in self.handles:
            h.remove()

    def __enter__(self) -> _MultiHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode: str = "all"):
    """Call ``fn`` once per backward pass for a group of tensors (torch's
    ``torch.autograd.graph.register_multi_grad_hook``).

    ``mode="all"``: ``fn(grads)`` with one gradient per tensor (None for a tensor the pass did
    not reach), called at the end of the pass (torch calls it as soon as the last expected
    gradient is ready; the values are the same). ``mode="any"``: ``fn(grad)`` with the first
    gradient computed among the tensors, once per pass.

    Args:
        tensors: the tensors (each requiring grad).
        fn: the hook.
        mode: ``"all"`` or ``"any"``.

    Returns:
        A handle whose ``remove()`` removes the hook.

    Raises:
        ValueError: another mode, as torch's.

    Example:
        >>> import tensorbrain as tb
        >>> a, b = tb.ones(2, requires_grad=True), tb.ones(2, requires_grad=True)
        >>> seen = []
        >>> _ = tb.autograd.graph.register_multi_grad_hook(
        ...     (a, b), lambda gs: seen.append([g is None for g in gs]))
        >>> (a * 3).sum().backward()
        >>> seen
        [[False, True]]
    """
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    grads: dict[int, object] = {}
    state = {"queued": False, "fired": False}

    def end_of_pass() -> None:
        if mode == "all":
            fn([grads.get(i) for i in range(len(tensors))])
        grads.clear()
        state["queued"] = state["fired"] = False

    def make(i: int):
        def hook(grad):
            if not state["queued"]:
                state["queued"] = True
                queue_callback(end_of_pass)
            if mode == "any":
                if not state["fired"]:
                    state["fired"] = True
                    fn(grad)
            else:
                grads[i] = grad
        return hook
    return _MultiHandle([t.register_hook(make(i)) for i, t in enumerate(tensors)])

class SliceGrad:
    """A gradient that is zero except ``value`` at the basic index ``index`` of an array of
    ``shape``: what a slicing view's backward returns (``getitem``, hence ``split``, ``chunk``,
    ``narrow``, ``unbind``). The engine collects the slices of sibling views (:meth:`plus`) and
    writes the whole gradient once (:meth:`dense`) instead of adding one zero-filled full-size
    array per slice (a GPT block's q/k/v ``split`` cost 3.3 ms fwd + bwd that way, against 0.2 ms
    for writing the three slices).

    Attributes:
        shape (tuple[int, ...]): the whole gradient's shape.
        index: the first slice's basic index; ``value`` its gradient.
        pieces (list[tuple]): every ``(index, value)`` collected, the first included.
    """

    __slots__ = ("shape", "index", "value", "pieces")

    def __init__(self, shape, index, value, pieces=None):
        self.shape, self.index, self.value = tuple(shape), index, value
        self.pieces = [(index, value)] if pieces is None else pieces

    @property
    def dtype(self):
        """The slice's dtype (the whole gradient's)."""
        return self.value.dtype

    def astype(self, dtype):
        """The same slice gradient cast to ``dtype``.

        Args:
            dtype: the array dtype.
        """
        return SliceGrad(self.shape, self.index, self.value.astype(dtype),
                         [(i, v.astype(dtype)) for i, v in self.pieces])

    def plus(self, other):
        """The sum of this slice gradient and ``other`` (of the same shape), still unwritten.

        Args:
            other (SliceGrad): another slice's gradient of the same array.
        """
        return SliceGrad(self.shape, self.index, self.value, self.pieces + other.pieces)

    def dense(self):
        """The whole gradient: the slices concatenated when they tile the array along one axis
        (``split``, ``chunk``, ``unbind`` with every part used: one pass, as torch's ``cat``),
        else zeros with each slice added in."""
        xp = get_array_module(self.value)
        tiles = _tiles(self.shape, self.pieces)
        if tiles is not None:
            whole = _joint_whole(self.shape, *tiles)
            return whole if whole is not None else xp.concatenate(tiles[1], axis=tiles[0])
        out = xp.zeros(self.shape, dtype=self.value.dtype)
        out[self.index] = self.value
        for index, value in self.pieces[1:]:
            out[index] += value
        return out


# ***** gradients written in place of a concatenation *****
# An op whose inputs are views of one array (attention's q, k, v split out of one projection)
# writes their gradients into one new array shaped as that array, each at its input's offset and
# strides (joint_views). When they come back to the split as slices that tile it, SliceGrad.dense
# hands that array on instead of concatenating them (torch's cat makes that copy). Registered, and
# handed on once, so that dense never gives out an array someone else holds.
_JOINT: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def joint_views(arrays):
    """Gradient arrays laid out as ``arrays`` (views of one C-contiguous NumPy array, pairwise
    disjoint) inside one new registered array, or None when they are not such views.

    Args:
        arrays (Sequence[ndarray]): the inputs whose gradients are wanted.

    Returns:
        tuple[ndarray, ...] | None: uninitialised arrays, one per input, with its shape and strides.
    """
    base = arrays[0].base
    if (type(base) is not np.ndarray or not base.flags.c_contiguous
            or any(a.base is not base or a.dtype != base.dtype for a in arrays)
            or any(np.shares_memory(a, b) for a, b in itertools.combinations(arrays, 2))):
        return None
    buf = np.empty_like(base)
    _JOINT[id(buf)] = buf
    at = base.ctypes.data
    return tuple(np.ndarray(a.shape, a.dtype, buffer=buf, offset=a.ctypes.data - at, strides=a.strides)
                 for a in arrays)


def _joint_whole(shape, axis, values):
    """The registered array of :func:`joint_views` as ``shape`` when ``values`` (slices tiling
    ``shape`` along ``axis``, in order) are exactly its slices, else None."""
    whole = values[0].base
    if type(whole) is not np.ndarray or _JOINT.get(id(whole)) is not whole or whole.size != np.prod(shape):
        return None
    whole = whole.reshape(shape)
    at = 0
    for v in values:
        want = whole[(slice(None),) * axis + (slice(at, at + v.shape[axis]),)]
        if v.base is not whole.base or v.ctypes.data != want.ctypes.data or v.strides != want.strides \
                or v.shape != want.shape:
            return None
        at += v.shape[axis]
    del _JOINT[id(whole.base)]
    return whole


def _band(shape, index):
    """``(axis, start, stop, is_int)`` when the basic ``index`` selects one contiguous band of
    ``shape`` along a single axis (a full slice on every other), else None."""
    items = index if isinstance(index, tuple) else (index,)
    if len(items) > len(shape):
        return None
    found = None
    for axis, (it, n) in enumerate(zip(items, shape)):
        if type(it) is slice:
            start, stop, step = it.indices(n)
            if step != 1 or stop < start:
                return None
            if start == 0 and stop == n:
                continue
            band = (axis, start, stop, False)
        elif type(it) is int and -n <= it < n:
            band = (axis, it % n, it % n + 1, True)
        else:
            return None
        if found is not None:
            return None
        found = band
    return found


def _tiles(shape, pieces):
    """``(axis, values in order)`` when ``pieces`` tile ``shape`` along one axis without gaps or
    overlaps (each value shaped for ``concatenate``), else None."""
    if len(pieces) < 2:
        return None
    bands = []
    for index, value in pieces:
        b = _band(shape, index)
        if b is None or (bands and b[0] != bands[0][0][0]):
            return None
        bands.append((b, value))
    bands.sort(key=lambda bv: bv[0][1])
    axis, at = bands[0][0][0], 0
    values = []
    for (_, start, stop, is_int), value in bands:
        if start != at:
            return None
        at = stop
        values.append(get_array_module(value).expand_dims(value, axis) if is_int else value)
    return (axis, values) if at == shape[axis] else None
