"""``nn.functional``'s activations, each as torch's: ``relu``, ``relu6``, ``sigmoid``,
``tanh``, ``gelu``, ``silu``, ``leaky_relu``, ``elu``, ``softplus``, ``logsigmoid``,
``hardtanh``, ``glu``, ``selu``, ``celu``, ``softsign``, ``softshrink``, ``tanhshrink``,
``threshold``, ``gumbel_softmax``, and the in-place forms (``F.relu_``, ``elu_``,
``leaky_relu_``, ``hardtanh_``, ``threshold_``, ``selu_``, ``celu_``). The common ones are single
ops with their backward beside them; the rest are written from other ops, so their gradients come
with them.
"""
from __future__ import annotations

from .._tensor_base import TensorBase as Tensor
from .._xp import get_array_module
from . import elementwise as E
from . import shape as S
from ..amp.autocast_mode import autocast_op  # PyTorch's autocast lists: tensorbrain/amp/_lists.py
from .core import make


# ***** activations *****
def glu(input, dim=-1):
    """``a * sigmoid(b)`` for the two halves ``a, b`` of ``input`` along ``dim``, as
    ``F.glu``.

    Args:
        input: the input (even size along ``dim``).
        dim: the dimension to split.

    Returns:
        Tensor: half as large along ``dim``.

    Raises:
        RuntimeError: an odd size along ``dim``.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.glu(tb.tensor([2.0, 0.0])).tolist()
        [1.0]
    """
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {dim} is size "
                           f"{n}")
    a, b = S.split(input, n // 2, dim)
    return E.mul(a, E.sigmoid(b))


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """``scale * (max(0, x) + min(0, alpha * (exp(x) - 1)))``, as ``F.selu``.

    Args:
        input: the input.
        inplace: accepted (the result is a new tensor).

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.selu(tb.tensor([0.0])).tolist()
        [0.0]
    """
    neg = E.mul(E.expm1(E.clamp(input, max=0.0)), _SELU_ALPHA)
    return E.mul(E.add(E.relu(input), neg), _SELU_SCALE)


def celu(input, alpha=1.0, inplace=False):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``, as ``F.celu``.

    Args:
        input: the input.
        alpha: the scale of the negative part.
        inplace: accepted.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.celu(tb.tensor([1.0])).tolist()
        [1.0]
    """
    neg = E.mul(E.expm1(E.div(E.clamp(input, max=0.0), alpha)), alpha)
    return E.add(E.relu(input), neg)


def softsign(input):
    """``x / (1 + |x|)``, as ``F.softsign``.

    Args:
        input: the input.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.softsign(tb.tensor([1.0])).tolist()
        [0.5]
    """
    return E.div(input, E.add(E.abs(input), 1.0))


def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0, as
    ``F.softshrink``.

    Args:
        input: the input.
        lambd: the threshold.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.softshrink(tb.tensor([1.0, 0.2, -1.0])).tolist()
        [0.5, 0.0, -0.5]
    """
    return E.sub(input, E.clamp(input, -lambd, lambd))


def tanhshrink(input):
    """``x - tanh(x)``, as ``F.tanhshrink``.

    Args:
        input: the input.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.tanhshrink(tb.tensor([0.0])).tolist()
        [0.0]
    """
    return E.sub(input, E.tanh(input))


def threshold(input, threshold, value, inplace=False):  # noqa: A002  (torch's names)
    """``x`` where ``x > threshold``, else ``value``, as ``F.threshold``.

    Args:
        input: the input.
        threshold: the threshold.
        value: the replacement.
        inplace: accepted.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.threshold(tb.tensor([0.5, 2.0]), 1.0, -1.0).tolist()
        [-1.0, 2.0]
    """
    return E.where(E.gt_(input, threshold), input, value)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """A sample of the Gumbel-softmax distribution over ``dim``, as ``F.gumbel_softmax``;
    ``hard`` returns one-hot samples whose gradient is the soft sample's (straight-through).

    Args:
        logits: unnormalised log-probabilities.
        tau: the temperature.
        hard: one-hot samples.
        eps: accepted (torch's deprecated argument).
        dim: the dimension of the categories.

    Returns:
        Tensor: ``logits``' shape, summing to 1 over ``dim``.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.gumbel_softmax(tb.zeros(2, 3), hard=True).sum(-1).tolist()
        [1.0, 1.0]
    """
    from .._factories import empty_like
    from .softmax import softmax
    gumbels = E.neg(E.log(empty_like(logits).exponential_()))
    y = softmax(E.div(E.add(logits, gumbels), tau), dim)
    if not hard:
        return y
    xp = get_array_module(y._data)
    hot = xp.zeros(y.shape, dtype=y._data.dtype)
    xp.put_along_axis(hot, xp.expand_dims(y._data.argmax(axis=dim), dim), 1, axis=dim)
    return E.add(E.sub(Tensor._wrap(hot), y.detach()), y)


# ***** in-place activations (F.relu_ ...): the tensor takes the activation's value *****
def _inplace_activation(name, fn):
    def op(input, *args, **kwargs):
        return input._inplace(name, lambda t: fn(t, *args, **kwargs))
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"In-place ``F.{name[:-1]}``: ``input`` becomes ``F.{name[:-1]}(input, ...)``, "
                  f"as ``torch.nn.functional.{name}``.\n\nArgs:\n    input: the tensor.\n"
                  f"    *args: the activation's arguments.\n    **kwargs: its keyword "
                  f"arguments.\n\nReturns:\n    Tensor: ``input``.\n")
    return op


def _elu(t, alpha=1.0):
    return celu(t, alpha) if alpha == 1.0 else E.add(E.relu(t), E.mul(E.expm1(
        E.clamp(t, max=0.0)), alpha))


def _leaky(t, negative_slope=0.01):
    return E.where(E.gt_(t, 0), t, E.mul(t, negative_slope))


def _hardtanh(t, min_val=-1.0, max_val=1.0):
    return E.clamp(t, min_val, max_val)


relu_ = _inplace_activation("relu_", E.relu)
elu_ = _inplace_activation("elu_", _elu)
leaky_relu_ = _inplace_activation("leaky_relu_", _leaky)
hardtanh_ = _inplace_activation("hardtanh_", _hardtanh)
threshold_ = _inplace_activation("threshold_", threshold)
selu_ = _inplace_activation("selu_", selu)
celu_ = _inplace_activation("celu_", celu)


# ***** the common activations (tb.nn.functional's relu, gelu, ...) *****
def relu(input, inplace=False):
    """max(0, x), elementwise (as ``torch.nn.functional.relu``).

    Args:
        input: the tensor.
        inplace: write the result into ``input`` and return it.

    Returns:
        A tensor of ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.nn.functional.relu(tb.tensor([-1.0, 2.0])).tolist()
        [0.0, 2.0]
    """
    return input.relu_() if inplace else E.relu(input)


def relu6(input, inplace=False):
    """min(max(0, x), 6), elementwise (as ``torch.nn.functional.relu6``).

    Args:
        input: the tensor.
        inplace: write the result into ``input`` and return it.

    Returns:
        A tensor of ``input``'s shape.
    """
    return hardtanh(input, 0.0, 6.0)


def sigmoid(input):
    """1 / (1 + exp(-x)), elementwise (as ``torch.nn.functional.sigmoid``).

    Args:
        input: the tensor.

    Returns:
        A tensor of ``input``'s shape.
    """
    return E.sigmoid(input)


def tanh(input):
    """The hyperbolic tangent, elementwise (as ``torch.nn.functional.tanh``).

    Args:
        input: the tensor.

    Returns:
        A tensor of ``input``'s shape.
    """
    return E.tanh(input)


def gelu(input, approximate="none"):
    """Gaussian error linear unit, x * Phi(x), elementwise (as ``torch.nn.functional.gelu``).

    Args:
        input: the tensor.
        approximate: ``'none'`` (exact, with erf) or ``'tanh'``.

    Returns:
        A tensor of ``input``'s shape.
    """
    return E.gelu(input, approximate)


def silu(input, inplace=False):
    """x * sigmoid(x) (swish), elementwise (as ``torch.nn.functional.silu``).

    Args:
        input: the tensor.
        inplace: write the result into ``input`` and return it.

    Returns:
        A tensor of ``input``'s shape.
    """
    return E.silu(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x for x >= 0, negative_slope * x below, elementwise (as ``torch.nn.functional.leaky_relu``).

    Args:
        input: the tensor.
        negative_slope: the slope for negative inputs.
        inplace: write the result into ``input`` and return it.

    Returns:
        A tensor of ``input``'s shape.
    """
    x = input._data
    factor = get_array_module(x).where(x > 0, 1, negative_slope).astype(x.dtype)
    return make(x * factor, (input,), lambda g: (g * factor,), "LeakyReluBackward")


def elu(input, alpha=1.0, inplace=False):
    """x for x > 0, alpha * (exp(x) - 1) below, elementwise (as ``torch.nn.functional.elu``).

    Args:
        input: the tensor.
        alpha: the negative saturation value.
        inplace: write the result into ``input`` and return it.

    Returns:
        A tensor of ``input``'s shape.
    """
    x = input._data
    xp = get_array_module(x)
    neg = alpha * xp.expm1(xp.minimum(x, 0))
    out = xp.where(x > 0, x, neg).astype(x.dtype, copy=False)
    return make(out, (input,), lambda g: (g * xp.where(x > 0, 1, neg + alpha).astype(g.dtype),),
                "EluBackward", (input,))


@autocast_op("softplus")
def softplus(input, beta=1.0, threshold=20.0):  # noqa: F811  (torch's argument name)
    """log(1 + exp(beta * x)) / beta, linear above ``threshold``, elementwise (as ``torch.nn.functional.softplus``).

    Args:
        input: the tensor.
        beta: the sharpness.
        threshold: above ``beta * x > threshold`` the result is x.

    Returns:
        A tensor of ``input``'s shape.
    """
    x = input._data
    xp = get_array_module(x)
    bx = beta * x
    out = xp.where(bx > threshold, x, xp.logaddexp(0, bx) / beta).astype(x.dtype, copy=False)

    def backward(g):
        s = 1 / (1 + xp.exp(-xp.clip(bx, -threshold, threshold)))
        return ((g * xp.where(bx > threshold, 1, s)).astype(g.dtype, copy=False),)
    return make(out, (input,), backward, "SoftplusBackward", (input,))


def logsigmoid(input):
    """log(sigmoid(x)), computed stably, elementwise (as ``torch.nn.functional.logsigmoid``).

    Args:
        input: the tensor.

    Returns:
        A tensor of ``input``'s shape.
    """
    return E.neg(softplus(E.neg(input)))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clipped to [min_val, max_val], elementwise (as ``torch.nn.functional.hardtanh``).

    Args:
        input: the tensor.
        min_val: the lower bound.
        max_val: the upper bound.
        inplace: write the result into ``input`` and return it.

    Returns:
        A tensor of ``input``'s shape.
    """
    x = input._data
    xp = get_array_module(x)
    out = xp.clip(x, min_val, max_val).astype(x.dtype, copy=False)
    inside = (x > min_val) & (x < max_val)   # PyTorch: zero gradient at the edges
    return make(out, (input,), lambda g: (g * inside,), "HardtanhBackward", (input,))
