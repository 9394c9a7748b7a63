"""The softmax family: softmax, softmin, log_softmax (``tb.nn.functional`` re-exports them).

They live with the ops rather than in ``nn.functional`` so that ``Tensor.softmax`` and
``tb.softmax`` reach them without importing ``tensorbrain.nn``.
"""
from __future__ import annotations

from .._xp import get_array_module
from ..amp.autocast_mode import autocast_op  # PyTorch's autocast lists: tensorbrain/amp/_lists.py
from . import elementwise as _E
from .core import make
from .loss import _log_softmax_array


def _softmax_dim(ndim, dim):
    if dim is None:  # PyTorch's legacy implicit choice
        return 0 if ndim in (0, 1, 3) else 1
    return dim


@autocast_op("softmax")
def softmax(input, dim=None, dtype=None):
    """Exp(x) / sum(exp(x)) along ``dim`` (as ``torch.nn.functional.softmax``).

    Args:
        input: the tensor.
        dim: the dimension to normalise over (None: torch's legacy choice, 0 for 0-, 1- and
            3-D inputs, else 1).
        dtype: if given, ``input`` is cast to it first.

    Returns:
        A tensor of ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.softmax(tb.tensor([[0.0, 0.0], [0.0, 2.0 ** 0.5]]), dim=1).sum(dim=1).tolist()
        [1.0, 1.0]
    """
    x = input._data if dtype is None else input._data.astype(dtype)
    xp = get_array_module(x)
    d = _softmax_dim(x.ndim, dim)
    e = xp.exp(x - x.max(axis=d, keepdims=True))
    e /= e.sum(axis=d, keepdims=True)
    src = input._data.dtype

    def backward(g):
        gx = e * (g - (g * e).sum(axis=d, keepdims=True))
        return (gx.astype(src, copy=False),)
    return make(e, (input,), backward, "SoftmaxBackward", along=(d,))


@autocast_op("softmin")
def softmin(input, dim=None, dtype=None):
    """Softmax(-x) along ``dim`` (as ``torch.nn.functional.softmin``).

    Args:
        input: the tensor.
        dim: the dimension to normalise over (None: torch's legacy choice, 0 for 0-, 1- and
            3-D inputs, else 1).
        dtype: if given, ``input`` is cast to it first.

    Returns:
        A tensor of ``input``'s shape.
    """
    return softmax(_E.neg(input), dim, dtype)

@autocast_op("log_softmax")
def log_softmax(input, dim=None, dtype=None):
    """Log(softmax(x)) along ``dim``, computed stably (as ``torch.nn.functional.log_softmax``).

    Args:
        input: the tensor.
        dim: the dimension to normalise over (None: torch's legacy choice, 0 for 0-, 1- and
            3-D inputs, else 1).
        dtype: if given, ``input`` is cast to it first.

    Returns:
        A tensor of ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.log_softmax(tb.zeros(2), 0).exp().tolist()
        [0.5, 0.5]
    """
    x = input._data if dtype is None else input._data.astype(dtype)
    xp = get_array_module(x)
    d = _softmax_dim(x.ndim, dim)
    out = _log_softmax_array(xp, x, d)
    src = input._data.dtype

    def backward(g):
        gx = g - xp.exp(out) * g.sum(axis=d, keepdims=True)
        return (gx.astype(src, copy=False),)
    return make(out, (input,), backward, "LogSoftmaxBackward", along=(d,))
