"""Sampling from a tensor of parameters: ``tb.multinomial``, ``tb.bernoulli``, ``tb.normal``
(torch's names, arguments and results).

The draws come from the same NumPy generator as ``tb.rand`` (``tb.manual_seed``, or the
``generator=`` passed), on the host, and are copied to the input's device, as ``_random.py`` does
for the factories. The same seed gives the same draws on CPU and GPU; it does not give torch's
draws (torch's generator is a different algorithm).
"""
from __future__ import annotations

import numpy as np

from . import _dtype, _random, _xp
from ._tensor_base import TensorBase as Tensor


def _host(t):
    return _xp.to_numpy(t._data) if isinstance(t, Tensor) else np.asarray(t)


def _like(arr, t):
    return Tensor._wrap(_random._place(arr, t._data if isinstance(t, Tensor) else None))


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Indices drawn from the categorical distribution(s) whose weights are the rows of ``input``.

    As ``torch.multinomial``: ``input`` is 1-D (one distribution) or 2-D (one per row); the
    weights need not sum to one but must be finite, non-negative and not all zero. Without
    replacement each index is drawn at most once per row, so ``num_samples`` may not exceed the
    number of categories (torch's rule).

    Args:
        input: a 1-D or 2-D floating-point tensor of weights.
        num_samples: how many indices to draw per distribution.
        replacement: draw with replacement.
        generator: a :class:`~tensorbrain.Generator`; None for the default one.
        out: not supported (must be None).

    Returns:
        Tensor: int64 indices, shape ``(num_samples,)`` or ``(rows, num_samples)``, on ``input``'s
        device.

    Raises:
        RuntimeError: ``input`` is not 1-D or 2-D, has a negative, infinite or NaN weight or a row
            summing to zero, ``num_samples`` < 1, or more samples than categories without
            replacement. (Fewer non-zero weights than samples is allowed, as torch on the CPU:
            the zero-weight categories follow.)

    Example:
        >>> import tensorbrain as tb
        >>> tb.multinomial(tb.tensor([0.0, 1.0, 0.0]), 2, replacement=True).tolist()
        [1, 1]
    """
    if out is not None:
        raise RuntimeError("multinomial(out=...) is not supported by TensorBrain; use the result")
    w = _host(input).astype(np.float64)
    if w.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got shape {tuple(w.shape)}")
    if int(num_samples) < 1:
        raise RuntimeError(f"multinomial: cannot sample num_samples={num_samples} <= 0 samples")
    rows = w.reshape(-1, w.shape[-1])
    if not np.all(np.isfinite(rows)) or np.any(rows < 0):
        raise RuntimeError("multinomial: probability tensor contains either `inf`, `nan` or "
                           "element < 0")
    totals = rows.sum(axis=1)
    if np.any(totals <= 0):
        raise RuntimeError("multinomial: invalid multinomial distribution (sum of probabilities "
                           "<= 0)")
    n = int(num_samples)
    if not replacement and n > rows.shape[1]:
        raise RuntimeError(f"multinomial: cannot sample n_sample={n} > prob_dist.size(-1)="
                           f"{rows.shape[1]} samples without replacement")
    rng = _random._rng(generator)
    result = np.empty((rows.shape[0], n), dtype=np.int64)
    for r, (p, total) in enumerate(zip(rows, totals)):
        if replacement:
            # inverse CDF: the first index whose cumulative weight exceeds u * total
            cdf = np.cumsum(p)
            idx = np.searchsorted(cdf, rng.random(n) * total, side="right")
            result[r] = np.minimum(idx, len(p) - 1)
        else:
            # exponential race (Efraimidis-Spirakis): the n largest u**(1/w); as torch on the CPU,
            # zero-weight categories come last, once the others are used up
            with np.errstate(divide="ignore"):
                keys = np.where(p > 0, np.log(rng.random(len(p))) / np.where(p > 0, p, 1), -np.inf)
            result[r] = np.argsort(-keys, kind="stable")[:n]
    return _like(result.reshape(w.shape[:-1] + (n,)), input)


def bernoulli(input, p=None, *, generator=None):
    """Zeros and ones drawn independently, each one with probability ``input`` (or ``p``).

    Args:
        input: a floating-point tensor of probabilities in [0, 1]; with ``p`` given, only its
            shape, dtype and device are used (``Tensor.bernoulli(p)``).
        p: a probability (a number) for every element; None uses ``input``'s values.
        generator: a :class:`~tensorbrain.Generator`; None for the default one.

    Returns:
        Tensor: a tensor of ``input``'s shape, dtype and device.

    Raises:
        RuntimeError: a probability outside [0, 1].

    Example:
        >>> import tensorbrain as tb
        >>> tb.bernoulli(tb.tensor([0.0, 1.0])).tolist()
        [0.0, 1.0]
    """
    probs = np.full(tuple(input.shape), float(p)) if p is not None else _host(input)
    if np.any((probs < 0) | (probs > 1)) or np.any(np.isnan(probs)):
        raise RuntimeError("bernoulli: all probabilities must be in [0, 1]")
    draws = _random._rng(generator).random(probs.shape) < probs
    return _like(draws.astype(np.dtype(input.dtype)), input)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False, out=None):
    """Samples of normal distributions, as ``torch.normal``'s forms.

    ``normal(mean_tensor, std_tensor)`` (broadcast), ``normal(mean_tensor, std=1.0)``,
    ``normal(mean=0.0, std_tensor)``, and ``normal(mean_float, std_float, size)``.

    Args:
        mean: a tensor of means or a number.
        std: a tensor of standard deviations or a number (>= 0).
        size: the shape, for the form with two numbers.
        generator: a :class:`~tensorbrain.Generator`; None for the default one.
        dtype: the dtype for the form with two numbers; None for the default dtype.
        device: the device for the form with two numbers.
        requires_grad: whether the result requires grad.
        out: not supported (must be None).

    Returns:
        Tensor: the samples (no gradient flows to ``mean`` or ``std``, as in torch).

    Raises:
        RuntimeError: a negative standard deviation, ``out=``, or two numbers and no ``size``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.normal(2.0, 0.0, size=(2,)).tolist()
        [2.0, 2.0]
    """
    if out is not None:
        raise RuntimeError("normal(out=...) is not supported by TensorBrain; use the result")
    like = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None
    if like is None:
        if size is None:
            raise RuntimeError("normal(mean, std) with two numbers needs size=")
        shape = tuple(size)
        out_dtype = np.dtype(dtype or _dtype.get_default_dtype())
    else:
        shape = np.broadcast_shapes(tuple(getattr(mean, "shape", ())), tuple(getattr(std, "shape", ())))
        out_dtype = np.dtype(like.dtype)
    m, s = _host(mean).astype(np.float64), _host(std).astype(np.float64)
    if np.any(s < 0):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    arr = (_random._rng(generator).standard_normal(shape) * s + m).astype(out_dtype)
    if like is None:
        from ._factories import tensor
        t = tensor(arr, device=device)
    else:
        t = _like(arr, like)
    return t.requires_grad_(True) if requires_grad else t
