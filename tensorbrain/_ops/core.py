"""The helpers every op uses: wrapping outputs into the graph and undoing broadcasting."""
from __future__ import annotations

import numbers

import numpy as np

from .._dtype import bfloat16 as _BF16
from .._xp import get_array_module
from ..autograd.grad_mode import _state as _grad_state
from ..autograd.graph import Node
from .._tensor_base import TensorBase as Tensor


def make(out, inputs, backward, name, saved=(), along=None):
    """Wrap ``out`` as a Tensor; record a graph node when grad mode is on and an input needs it.

    ``along``: for an op that keeps its input's shape but mixes values along some dims
    (softmax), those dims; a DTensor input keeps its layout when none of them is sharded."""
    if isinstance(out, np.generic):  # NumPy reductions return scalars; ._data is always an array
        out = np.asarray(out)
    made = Tensor._made   # tensorbrain.tensor.Tensor (see TensorBase)
    t = _new(made)
    t._data = out
    t.grad = None
    t._version = [0]
    t._hooks = None
    t._post_acc_hooks = None
    t._base = None
    t.grad_fn = None
    t.requires_grad = False
    if _grad_state.__dict__.get("enabled", True):
        for x in inputs:
            if x is not None and x.requires_grad:
                t.requires_grad = True
                t.grad_fn = Node(name, inputs, backward, saved)
                break
    # torch's __torch_dispatch__ shape: an input whose class has a handler gets the result
    # (DTensor: ``distributed/tensor/_rules.on_op`` keeps the layout of pointwise ops and refuses
    # ops that would compute on the local shard of a sharded DTensor); None on other tensors.
    for x in inputs:
        if x is not None and type(x) is not made:   # a plain tensor has none: skip the lookup
            handler = type(x).__tb_dispatch__
            if handler is not None:
                return handler(t, inputs, name, along)
    return t


_new = object.__new__


def make_view(out, base, backward, name):
    """Like ``make`` for ops whose output shares memory with ``base`` (shares its version)."""
    t = make(out, (base,), backward, name)
    if _shares_memory(out, base._data):
        t._version = base._version
        t._base = base if base._base is None else base._base
    return t


def _shares_memory(a, b):
    xp = get_array_module(a)
    if xp is np:
        return a.base is not None and np.may_share_memory(a, b)  # bounds check only: cheap
    return b.data.ptr <= a.data.ptr < b.data.ptr + max(b.nbytes, 1)


_GEMV_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def sum_axes(a, axes, out=None):
    """``a.sum(axis=axes)`` for the sums gradients need (bias gradients, undone broadcasts).

    A float32/float64 C-contiguous NumPy array summed over leading and/or trailing axes goes
    through BLAS matrix-vector products with a vector of ones (``ones @ rows``, ``cols @
    ones``): 1.4-7x faster than NumPy's reduction on one thread, threaded where BLAS is, and
    closer to the exact sum (each output's values in vector accumulators rather than one running
    row sum; docs/training.md has the figures). Anything else is NumPy's or CuPy's ``sum``.

    Args:
        a (ndarray): the array.
        axes (tuple[int, ...]): the axes to sum over, non-negative.
        out (ndarray | None): a C-contiguous array of the sum's shape and dtype to write it
            into (a gradient destination offered by DDP, ``autograd.engine.take_grad_dest``);
            the bits are those of the sum without it.

    Returns:
        ndarray: the sum, with the shape and dtype of ``a.sum(axis=axes)`` (``out`` if given).
    """
    nd, axes = a.ndim, tuple(sorted(axes))
    lead = 0
    while lead in axes:
        lead += 1
    trail = len(axes) - lead
    if (type(a) is not np.ndarray or a.dtype not in _GEMV_DTYPES or not a.flags.c_contiguous
            or a.size == 0 or any(ax < nd - trail for ax in axes[lead:])):
        return a.sum(axis=axes) if out is None else a.sum(axis=axes, out=out)
    if trail:
        n = int(np.prod(a.shape[nd - trail:], dtype=np.int64))
        a = (a.reshape(-1, n) @ np.ones(n, a.dtype)).reshape(a.shape[:nd - trail])
    if lead:
        rows = int(np.prod(a.shape[:lead], dtype=np.int64))
        if out is not None and a.ndim - lead >= 1:
            np.matmul(np.ones(rows, a.dtype), a.reshape(rows, -1), out=out.reshape(-1))
            return out
        a = (np.ones(rows, a.dtype) @ a.reshape(rows, -1)).reshape(a.shape[lead:])
    if out is not None:
        out[...] = a
        return out
    return a


def unbroadcast(grad, shape):
    """Sum ``grad`` down to ``shape`` (the inverse of NumPy broadcasting)."""
    if grad.shape == shape:
        return grad
    # bfloat16 sums in float32 (ml_dtypes would add in bfloat16 and lose all but 8 bits)
    acc = np.float32 if grad.dtype.char == "E" else None   # E: bfloat16
    ndim_extra = grad.ndim - len(shape)
    if ndim_extra:
        lead = tuple(range(ndim_extra))
        grad = grad.sum(axis=lead, dtype=acc) if acc is not None else sum_axes(grad, lead)
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True, dtype=acc)
    return grad if acc is None else grad.astype(_BF16)


def as_operand(x, like):
    """A Tensor, or a Python/NumPy scalar left bare (weak, NEP 50 promotion) for ``like``'s op."""
    if isinstance(x, Tensor):
        if type(x._data) is not type(like._data):
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, "
                f"{like.device} and {x.device}: move one with .to(device)")
        return x
    if isinstance(x, (numbers.Number, np.generic)):
        return x
    xp = get_array_module(like._data)
    return Tensor._wrap(xp.asarray(x))


def shape_error(op, a, b, exc):
    return RuntimeError(
        f"{op}: shapes {tuple(np.shape(a))} and {tuple(np.shape(b))} cannot be broadcast together "
        f"({exc})")
