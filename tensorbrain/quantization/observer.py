"""``torch.ao.quantization.observer``: the observers, statistics modules in float.

An observer records the range of the tensors passed through it and computes quantization
parameters (``scale``, ``zero_point``) from it, with torch's formulas: :class:`MinMaxObserver`
(per tensor), :class:`PerChannelMinMaxObserver` (per channel along ``ch_axis``) and
:class:`PlaceholderObserver` (records nothing). They need no quantized kernels, so programs
that emulate quantization in float (fairseq's quant-noise: ``scale, zero_point`` from an
observer, then ``round(x / scale) + zero_point`` clamped) run as under torch.
:class:`HistogramObserver` (its L2 search over histogram bins) is refused by name.

>>> import tensorbrain as tb
>>> from tensorbrain.quantization.observer import MinMaxObserver
>>> obs = MinMaxObserver(dtype=tb.qint8, qscheme=tb.per_tensor_symmetric)
>>> _ = obs(tb.tensor([-1.0, 2.55]))
>>> [round(v, 4) for v in obs.calculate_qparams()[0].tolist()]
[0.02]
"""
from __future__ import annotations

import functools
import warnings

import numpy as np

from .. import _torch_extras as X
from .._unsupported import unsupported_class
from ..nn.modules.module import Module
from ..tensor import tensor as _tensor

_EPS = float(np.finfo(np.float32).eps)


class _PartialWrapper:
    """``Observer.with_args(...)``: a factory of observers with those arguments (torch's)."""

    def __init__(self, p: functools.partial):
        self.p = p

    def __call__(self, *args, **kwargs):
        return self.p(*args, **kwargs)

    def __repr__(self):
        return repr(self.p)

    def with_args(self, **kwargs):
        """A factory with more arguments."""
        return _PartialWrapper(functools.partial(self.p, **kwargs))


def _qrange(dtype, quant_min, quant_max, reduce_range: bool) -> tuple[int, int]:
    """torch's ``calculate_qmin_qmax``."""
    if quant_min is not None and quant_max is not None:
        if not quant_min <= 0 <= quant_max:
            raise AssertionError("Used-specified quantization range must include 0.")
        if quant_min >= quant_max:
            raise AssertionError("qmin must be strictly less than qmax for user-specified "
                                 "quantization range.")
        if reduce_range:
            return quant_min // 2, quant_max // 2
        return quant_min, quant_max
    name = X.dtype_name(dtype)
    if name in ("qint8", "int8"):
        return (-64, 63) if reduce_range else (-128, 127)
    if name in ("quint8", "uint8"):
        return (0, 127) if reduce_range else (0, 255)
    if name in ("qint32", "int32"):
        return -(2 ** 31), 2 ** 31 - 1
    if name == "uint16":
        return 0, 2 ** 16 - 1
    if name == "int16":
        return -(2 ** 15), 2 ** 15 - 1
    return 0, 15


class ObserverBase(Module):
    """The base of observers: ``forward`` records, ``calculate_qparams`` computes.

    Args:
        dtype: the quantized dtype the parameters are for.
        is_dynamic: computed on the fly (dynamic quantization).
    """

    def __init__(self, dtype, is_dynamic: bool = False):
        super().__init__()
        self.dtype = dtype
        self.is_dynamic = is_dynamic

    with_args = classmethod(lambda cls, **kwargs: _PartialWrapper(functools.partial(cls,
                                                                                    **kwargs)))

    def calculate_qparams(self, **kwargs):
        """``(scale, zero_point)``."""
        raise NotImplementedError


class _MinMaxBase(ObserverBase):
    _ALLOWED = ("qint8", "quint8", "quint4x2", "qint32", "int8", "uint8", "int16", "int32",
                "float8_e5m2", "float8_e4m3fn", "uint16")
    _SCHEMES = ("per_tensor_affine", "per_tensor_symmetric", "per_channel_affine",
                "per_channel_symmetric", "per_channel_affine_float_qparams")

    def __init__(self, dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic):
        super().__init__(dtype, is_dynamic)
        if qscheme not in [getattr(X, s) for s in self._SCHEMES]:
            raise AssertionError("Default Observer only works for per_tensor_affine, "
                                 "per_tensor_symmetric, per_channel_affine, per_channel_symmetric "
                                 "and per_channel_float_qparams quantization scheme")
        if X.dtype_name(dtype) not in self._ALLOWED:
            raise AssertionError(f"Default Observer only works for {self._ALLOWED} data type")
        if reduce_range:
            warnings.warn("Please use quant_min and quant_max to specify the range for "
                          "observers. reduce_range will be deprecated in a future release of "
                          "PyTorch.", stacklevel=3)
        self.qscheme, self.reduce_range = qscheme, reduce_range
        self.register_buffer("eps", _tensor([eps], dtype=np.float32))
        self.has_customized_qrange = quant_min is not None and quant_max is not None
        self.quant_min, self.quant_max = _qrange(dtype, quant_min, quant_max, reduce_range)

    def _calculate_qparams(self, min_val, max_val):
        """torch's formulas, on the recorded ranges (NumPy, float32)."""
        lo, hi = min_val.numpy().astype(np.float32), max_val.numpy().astype(np.float32)
        if lo.size == 0 or not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            warnings.warn("must run observer before calling calculate_qparams. Returning "
                          "default values.", stacklevel=2)
            return _tensor([1.0]), _tensor([0])
        qmin, qmax = self.quant_min, self.quant_max
        neg, pos = np.minimum(lo, 0), np.maximum(hi, 0)
        eps = np.float32(self.eps.numpy()[0])
        zp_dtype = np.int64
        zero_point = np.zeros(neg.shape, np.int64)
        name = self.qscheme.name
        if name in ("per_tensor_symmetric", "per_channel_symmetric"):
            pos = np.maximum(-neg, pos)
            scale = np.maximum(pos / np.float32((qmax - qmin) / 2), eps)
            dname = X.dtype_name(self.dtype)
            if dname in ("quint8", "uint8"):
                mid = (qmin + qmax) // 2 if self.has_customized_qrange else 128
                zero_point = np.full(neg.shape, mid, np.int64)
            elif dname == "uint16":
                zero_point = np.full(neg.shape, 2 ** 15, np.int64)
        elif name == "per_channel_affine_float_qparams":
            scale = (hi - lo) / np.float32(qmax - qmin)
            scale = np.where(scale > eps, scale, np.float32(1)).astype(np.float32)
            zero_point = (-1 * lo / scale).astype(np.float32)
            zp_dtype = np.float32
        else:
            scale = np.maximum((pos - neg) / np.float32(qmax - qmin), eps)
            zero_point = np.clip(qmin - np.round(neg / scale).astype(np.int32), qmin, qmax)
            zp_dtype = np.int32
        scale = np.asarray(scale, np.float32).reshape(-1) if scale.ndim == 0 else scale
        zero_point = np.asarray(zero_point, zp_dtype).reshape(-1) if np.ndim(zero_point) == 0 \
            else np.asarray(zero_point, zp_dtype)
        return _tensor(scale.astype(np.float32)), _tensor(zero_point)

    def calculate_qparams(self):
        """``(scale, zero_point)`` from the recorded range (torch's formulas): a float32 and an
        integer tensor, one element per tensor or one per channel."""
        return self._calculate_qparams(self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


class MinMaxObserver(_MinMaxBase):
    """Records the running minimum and maximum of the tensors passed through it, as torch's
    ``MinMaxObserver``.

    Args:
        dtype: the quantized dtype (``tb.quint8``, ``tb.qint8``, ...).
        qscheme: ``tb.per_tensor_affine`` or ``tb.per_tensor_symmetric``.
        reduce_range: halve the range (deprecated in torch).
        quant_min: a custom lower bound of the quantized range.
        quant_max: a custom upper bound.
        factory_kwargs: accepted.
        eps: the smallest scale.
        is_dynamic: computed on the fly.
        **kwargs: accepted.

    Raises:
        NotImplementedError: a per-channel ``qscheme`` (use :class:`PerChannelMinMaxObserver`).
        AssertionError: a dtype or qscheme torch's observer refuses.
    """

    def __init__(self, dtype=None, qscheme=None, reduce_range=False, quant_min=None,
                 quant_max=None, factory_kwargs=None, eps=_EPS, is_dynamic=False, **kwargs):
        dtype = X.quint8 if dtype is None else dtype
        qscheme = X.per_tensor_affine if qscheme is None else qscheme
        if qscheme.name.startswith("per_channel"):
            raise NotImplementedError("MinMaxObserver's qscheme only support "
                                      "torch.per_tensor_symmetric and torch.per_tensor_affine.")
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic)
        self.register_buffer("min_val", _tensor(float("inf")))
        self.register_buffer("max_val", _tensor(float("-inf")))

    def forward(self, x_orig):
        """Record ``x_orig``'s range; return it unchanged."""
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().numpy().astype(np.float32)
        self.min_val = _tensor(min(float(x.min()), float(self.min_val.item())), dtype=np.float32)
        self.max_val = _tensor(max(float(x.max()), float(self.max_val.item())), dtype=np.float32)
        return x_orig

    def reset_min_max_vals(self):
        """Forget the recorded range."""
        self.min_val = _tensor(float("inf"))
        self.max_val = _tensor(float("-inf"))


class PerChannelMinMaxObserver(_MinMaxBase):
    """Records the running minimum and maximum of each channel along ``ch_axis``, as torch's
    ``PerChannelMinMaxObserver``.

    Args:
        ch_axis: the channel dimension.
        dtype: the quantized dtype.
        qscheme: ``tb.per_channel_affine``, ``tb.per_channel_symmetric`` or
            ``tb.per_channel_affine_float_qparams``.
        reduce_range: halve the range.
        quant_min: a custom lower bound.
        quant_max: a custom upper bound.
        factory_kwargs: accepted.
        eps: the smallest scale.
        is_dynamic: computed on the fly.
        **kwargs: accepted.
    """

    def __init__(self, ch_axis=0, dtype=None, qscheme=None, reduce_range=False, quant_min=None,
                 quant_max=None, factory_kwargs=None, eps=_EPS, is_dynamic=False, **kwargs):
        dtype = X.quint8 if dtype is None else dtype
        qscheme = X.per_channel_affine if qscheme is None else qscheme
        if not qscheme.name.startswith("per_channel"):
            raise NotImplementedError("PerChannelMinMaxObserver's qscheme only support "
                                      "torch.per_channel_symmetric, torch.per_channel_affine and "
                                      "torch.per_channel_affine_float_qparams.")
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic)
        self.ch_axis = ch_axis
        self.register_buffer("min_val", _tensor(np.zeros(0, np.float32)))
        self.register_buffer("max_val", _tensor(np.zeros(0, np.float32)))

    def forward(self, x_orig):
        """Record each channel's range; return ``x_orig`` unchanged."""
        if x_orig.numel() == 0:
            return x_orig
        x = np.moveaxis(x_orig.detach().numpy().astype(np.float32), self.ch_axis, 0)
        y = x.reshape(x.shape[0], -1)
        lo, hi = y.min(1), y.max(1)
        if self.min_val.numel():
            lo = np.minimum(lo, self.min_val.numpy())
            hi = np.maximum(hi, self.max_val.numpy())
        self.min_val, self.max_val = _tensor(lo), _tensor(hi)
        return x_orig

    def reset_min_max_vals(self):
        """Forget the recorded ranges."""
        self.min_val = _tensor(np.zeros(0, np.float32))
        self.max_val = _tensor(np.zeros(0, np.float32))


class PlaceholderObserver(ObserverBase):
    """Records nothing and computes nothing: it carries a dtype (and for dynamic quantization
    that the parameters are computed on the fly), as torch's ``PlaceholderObserver``.

    Args:
        dtype: the dtype it stands for.
        custom_op_name: accepted.
        compute_dtype: accepted (torch's deprecated name for dynamic quantization).
        quant_min: the quantized range's lower bound.
        quant_max: the upper bound.
        qscheme: the scheme (None: per-tensor affine).
        eps: accepted.
        is_dynamic: computed on the fly.
    """

    def __init__(self, dtype=np.float32, custom_op_name="", compute_dtype=None, quant_min=None,
                 quant_max=None, qscheme=None, eps=None, is_dynamic=False):
        super().__init__(dtype, is_dynamic)
        self.qscheme = X.per_tensor_affine if qscheme is None else qscheme
        self.quant_min, self.quant_max, self.eps = quant_min, quant_max, eps
        self.custom_op = custom_op_name
        if compute_dtype:
            self.is_dynamic = True

    def forward(self, x):
        """``x`` unchanged."""
        return x

    def calculate_qparams(self):
        """Always raises: a placeholder has no parameters (torch's error)."""
        raise Exception("calculate_qparams should not be called for PlaceholderObserver")


HistogramObserver = unsupported_class(
    "torch.ao.quantization.observer.HistogramObserver",
    "its search for the range with the least L2 quantization error over histogram bins is "
    "not implemented", "MinMaxObserver (the plain range) or PerChannelMinMaxObserver")

default_observer = MinMaxObserver.with_args(quant_min=0, quant_max=127)
default_weight_observer = MinMaxObserver.with_args(dtype=X.qint8,
                                                   qscheme=X.per_tensor_symmetric)
default_per_channel_weight_observer = PerChannelMinMaxObserver.with_args(
    dtype=X.qint8, qscheme=X.per_channel_symmetric)
default_dynamic_quant_observer = PlaceholderObserver.with_args(
    dtype=X.quint8, quant_min=0, quant_max=255, is_dynamic=True)
default_placeholder_observer = PlaceholderObserver

__all__ = ["HistogramObserver", "MinMaxObserver", "ObserverBase", "PerChannelMinMaxObserver",
           "PlaceholderObserver", "default_dynamic_quant_observer", "default_observer",
           "default_per_channel_weight_observer", "default_placeholder_observer",
           "default_weight_observer"]
