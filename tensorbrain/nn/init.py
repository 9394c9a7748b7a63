"""``tb.nn.init``: fill parameters in place with PyTorch's initialisation schemes.

Every function draws from TensorBrain's global generator (or the ``generator=`` you pass), so
``tb.manual_seed(s)`` before building a model makes its initial weights reproducible. Formulas
follow ``torch/nn/init.py`` (gains, fan computation, bounds) so the distributions match PyTorch's;
the bits differ because the underlying generator is NumPy's PCG64, not PyTorch's Philox/MT.

>>> import tensorbrain as tb
>>> w = tb.empty(3, 5)
>>> _ = tb.nn.init.kaiming_uniform_(w, a=5 ** 0.5)
>>> bool((w.abs() <= 1 / 5 ** 0.5).all())
True
"""
from __future__ import annotations

import math

import numpy as np

from .. import _random, _xp
from ..autograd import grad_mode

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "ones_", "zeros_", "eye_",
           "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "trunc_normal_", "orthogonal_"]


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table).

    >>> round(calculate_gain("relu"), 4), calculate_gain("tanh")
    (1.4142, 1.6666666666666667)

    Args:
        nonlinearity: ``'linear'``, ``'conv2d'``, ``'sigmoid'``, ``'tanh'``, ``'relu'``,
            ``'leaky_relu'``, ``'selu'``...
        param: the negative slope for ``'leaky_relu'`` (default 0.01).
    """
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """``(fan_in, fan_out)``: ``shape[1] * receptive field`` and ``shape[0] * receptive field``."""
    if tensor.dim() < 2:
        raise ValueError(f"Fan in and fan out can not be computed for tensor with fewer than 2 "
                         f"dimensions (shape {tuple(tensor.shape)})")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _fill(tensor, array):
    """Write a host array into ``tensor`` in place (moved to the GPU when the tensor lives there)."""
    with grad_mode.no_grad():
        data = tensor._data
        data[...] = _xp.cupy().asarray(array) if _xp.is_cupy_array(data) else array
    tensor._version[0] += 1
    return tensor


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    """Fill with values drawn from U(a, b).

    Args:
        tensor: the tensor to fill in place.
        a: the lower bound.
        b: the upper bound.
        generator: the ``tb.Generator`` to draw from (default: the global one).
    """
    with grad_mode.no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    """Fill with values drawn from N(mean, std^2).

    Args:
        tensor: the tensor to fill in place.
        mean: the mean.
        std: the standard deviation.
        generator: the ``tb.Generator`` to draw from (default: the global one).
    """
    with grad_mode.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def constant_(tensor, val: float):
    """Fill ``tensor`` with ``val`` in place (no gradient recorded).

    Args:
        tensor: the tensor (usually a parameter).
        val: the value.

    Returns:
        ``tensor``.
    """
    with grad_mode.no_grad():
        tensor._data.fill(val)
    tensor._version[0] += 1
    return tensor


def ones_(tensor):
    """Fill ``tensor`` with ones in place.

    Args:
        tensor: the tensor.

    Returns:
        ``tensor``.
    """
    return constant_(tensor, 1.0)


def zeros_(tensor):
    """Fill ``tensor`` with zeros in place.

    Args:
        tensor: the tensor.

    Returns:
        ``tensor``.
    """
    return constant_(tensor, 0.0)


def eye_(tensor):
    """Fill a 2-D tensor with the identity matrix.

    Args:
        tensor: a 2-D tensor, filled in place.
    """
    if tensor.dim() != 2:
        raise ValueError(f"Only tensors with 2 dimensions are supported (got shape "
                         f"{tuple(tensor.shape)})")
    return _fill(tensor, np.eye(*tensor.shape, dtype=tensor.dtype))


def dirac_(tensor, groups: int = 1):
    """Fill a 3/4/5-D conv weight so the convolution is the identity (per group).

    Args:
        tensor: a 3-, 4- or 5-D convolution weight, filled in place.
        groups: the convolution's groups (the identity per group).
    """
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    arr = np.zeros(sizes, dtype=tensor.dtype)
    for g in range(groups):
        for d in range(min(out_per_group, sizes[1])):
            idx = (g * out_per_group + d, d) + tuple(s // 2 for s in sizes[2:])
            arr[idx] = 1
    return _fill(tensor, arr)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    """Glorot uniform: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``.

    Args:
        tensor: a tensor with at least 2 dimensions, filled in place.
        gain: the scale (see ``calculate_gain``).
        generator: the ``tb.Generator`` to draw from (default: the global one).
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    """Glorot normal: N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``.

    Args:
        tensor: a tensor with at least 2 dimensions, filled in place.
        gain: the scale (see ``calculate_gain``).
        generator: the ``tb.Generator`` to draw from (default: the global one).
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None):
    """He uniform: U(-b, b) with ``b = gain * sqrt(3 / fan)``. ``Linear``/``Conv2d`` use it with
    ``a=sqrt(5)``, which gives ``b = 1/sqrt(fan_in)``.

    Args:
        tensor: a tensor with at least 2 dimensions, filled in place.
        a: the negative slope of the rectifier after this layer (``'leaky_relu'``).
        mode: ``'fan_in'`` (keeps the forward variance) or ``'fan_out'`` (the backward's).
        nonlinearity: the nonlinearity after this layer (see ``calculate_gain``).
        generator: the ``tb.Generator`` to draw from (default: the global one).
    """
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    bound = math.sqrt(3.0) * gain / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None):
    """He normal: N(0, std^2) with ``std = gain / sqrt(fan)`` (torchvision's ResNet uses
    ``mode="fan_out", nonlinearity="relu"``).

    Args:
        tensor: a tensor with at least 2 dimensions, filled in place.
        a: the negative slope of the rectifier after this layer (``'leaky_relu'``).
        mode: ``'fan_in'`` (keeps the forward variance) or ``'fan_out'`` (the backward's).
        nonlinearity: the nonlinearity after this layer (see ``calculate_gain``).
        generator: the ``tb.Generator`` to draw from (default: the global one).
    """
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None):
    """N(mean, std^2) truncated to [a, b] (absolute bounds, as in PyTorch).

    Drawn by rejection (redraw what falls outside), which samples the truncated distribution
    exactly; PyTorch uses the inverse CDF, same distribution, different bits.

    Args:
        tensor: the tensor to fill in place.
        mean: the mean.
        std: the standard deviation.
        a: the lowest value (absolute, not in standard deviations).
        b: the highest value.
        generator: the ``tb.Generator`` to draw from (default: the global one).
    """
    if not a < b:
        raise ValueError(f"trunc_normal_: need a < b, got a={a}, b={b}")
    rng = _random._rng(generator)
    n = tensor.numel()
    out = np.empty(n, dtype=np.float64)
    filled = 0
    for _ in range(1000):
        draw = rng.standard_normal(max(2 * (n - filled), 16)) * std + mean
        draw = draw[(draw >= a) & (draw <= b)][: n - filled]
        out[filled:filled + draw.size] = draw
        filled += draw.size
        if filled == n:
            break
    else:  # bounds far in a tail: fall back to uniform in [a, b] for the rest
        out[filled:] = rng.uniform(a, b, n - filled)
    return _fill(tensor, out.reshape(tuple(tensor.shape)).astype(tensor.dtype))


def orthogonal_(tensor, gain: float = 1.0, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a normal draw (PyTorch's method).

    Args:
        tensor: a tensor with at least 2 dimensions (trailing ones flattened), filled in place.
        gain: the scale.
        generator: the ``tb.Generator`` to draw from (default: the global one).
    """
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _random._rng(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(tuple(tensor.shape)).astype(tensor.dtype))


def _deprecated(name, new):
    def old(*args, **kwargs):
        import warnings
        warnings.warn(f"`nn.init.{name}` is now deprecated in favor of `nn.init.{name}_`.",
                      FutureWarning, stacklevel=2)
        return new(*args, **kwargs)
    old.__name__ = old.__qualname__ = name
    old.__doc__ = (f"torch's deprecated name of :func:`{name}_` (warns, then calls it).\n\n"
                   f"Args:\n    *args: :func:`{name}_`'s arguments.\n    **kwargs: its keyword "
                   f"arguments.\n\nReturns:\n    Tensor: the tensor, filled in place.\n")
    return old


#: torch's deprecated names without the trailing underscore.
DEPRECATED = ("uniform", "normal", "constant", "xavier_uniform", "xavier_normal",
              "kaiming_uniform", "kaiming_normal", "orthogonal")
for _name in DEPRECATED:
    globals()[_name] = _deprecated(_name, globals()[_name + "_"])
del _name
