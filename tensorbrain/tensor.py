"""``tensorbrain.tensor``: the ``Tensor`` class, and the factory functions.

``Tensor`` is made of ordinary definitions, found by grep and an editor:

* ``TensorBase`` (``tensorbrain/_tensor_base.py``): storage, properties, conversion, autograd
  bookkeeping; it imports no op, so the ops can build tensors without an import cycle;
* the class body below: the methods that call ops by hand (operators, ``to``, ``backward``, the
  in-place arithmetic, ``uniform_``/``normal_``, NumPy and DLPack interop);
* ``TableMethods`` (``tensorbrain/_ops/generated.py``, generated from the op table
  ``tensorbrain/_ops/table.py`` by ``python tensorbrain/_ops/generate.py``): the table's methods
  and in-place forms;
* ``Adapters`` (``tensorbrain/_tensor_adapters.py``): methods whose form differs from their
  op's (``view_as``, ``where``, ``new_zeros``, ...); ``LegacyMethods``
  (``tensorbrain/_tensor_legacy.py``): torch's older ones (``new``, ``resize_``);
  ``HookMethods`` (``tensorbrain/_tensor_hooks.py``): the autograd hooks.

The factories (:func:`zeros`, :func:`randn`, ...) live in ``tensorbrain/_factories.py`` and are
re-exported here. ``Tensor._data`` is the array itself; ``Tensor.data`` is torch's history-free
view of it.
"""
from __future__ import annotations

import numpy as np

from . import _dtype, _interop, _legacy_types, _random, _sampling, _xp
from ._device import CPU, as_device, device
from ._factories import (arange, as_tensor, device_of, empty, empty_like, eye,  # noqa: F401
                         from_numpy, full, full_like, linspace, ones, ones_like, rand, rand_like,
                         randint, randn, randn_like, randperm, tensor, zeros, zeros_like)
from ._ops import elementwise as E
from ._ops import pointwise as P
from ._ops.complex import ComplexAttributes
from ._ops import shape as S
from ._ops.core import make, unbroadcast
from ._ops.generated import TableMethods
from ._tensor_adapters import Adapters
from ._tensor_base import Size, TensorBase, _req  # noqa: F401  (Size: its public home is here)
from ._tensor_hooks import HookMethods
from ._tensor_legacy import LegacyMethods
from ._tensor_info import InfoMethods
from ._tensor_more import MoreMethods
from ._tensor_random import RandomFills
from ._tensor_sparse import SparseMethods
from ._tensor_views_inplace import InplaceViews
from .storage import StorageMethods
from .autograd import engine, grad_mode
from .autograd import backward as _backward

# What ``from tensorbrain.tensor import *`` and the API reference (docs/api/tensor.md) give: the
# class and the factories (device, make, unbroadcast are imported for this module's own use).
__all__ = ["Tensor", "Size", "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty",
           "full", "zeros_like", "ones_like", "empty_like", "full_like", "arange", "linspace",
           "eye", "rand", "randn", "randint", "randperm", "rand_like", "randn_like"]


def _conversion(name: str, dtype):
    """The method ``Tensor.<name>()`` (``float``, ``long``...): ``self`` converted to ``dtype``."""
    def convert(self):
        return S.to_dtype(self, dtype)
    convert.__name__, convert.__qualname__ = name, f"Tensor.{name}"
    convert.__doc__ = (f"A copy of this tensor converted to ``{np.dtype(dtype).name}`` (self when "
                       "it already is).\n\nReturns:\n    Tensor: the converted tensor; it stays in "
                       "the autograd graph.\n")
    return convert


class Tensor(TensorBase, TableMethods, Adapters, LegacyMethods, HookMethods, RandomFills,
             InfoMethods, ComplexAttributes, SparseMethods, InplaceViews, MoreMethods,
             StorageMethods, made=True):
    """A multi-dimensional array with autograd, on CPU (NumPy) or CUDA (CuPy), as ``torch.Tensor``.

    ``Tensor(data)`` behaves as :func:`tensor`; the factory functions (:func:`zeros`,
    :func:`randn`, ...) are the usual way to make one. Where each method is defined: see the
    module docstring.

    Args:
        data: nested lists, scalars, NumPy/CuPy arrays or tensors (copied).
        dtype: the dtype; inferred from ``data`` when None (Python floats give the default dtype).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a :class:`device`; default CPU.
        requires_grad: whether autograd records operations on this tensor.

    Example:
        >>> import tensorbrain as tb
        >>> t = tb.Tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> t.shape, t.sum().item()
        (tb.Size([2, 2]), 10.0)
    """

    __slots__ = ()

    @property
    def T(self):
        """The tensor with all its dimensions reversed (a transpose for 2-D tensors)."""
        return S.permute(self, *reversed(range(self._data.ndim)))

    @property
    def mT(self):
        """The tensor with its last two dimensions swapped (batched matrix transpose)."""
        return S.transpose(self, -2, -1)

    def to(self, *args, **kwargs):
        """A tensor with another device and/or dtype: ``to(device)``, ``to(dtype)``,
        ``to(device, dtype)`` or ``to(other)`` (other's device and dtype).

        Args:
            *args: a device (str, int or :class:`device`), a dtype, or a tensor to match.
            **kwargs: ``device=``, ``dtype=``; ``non_blocking=`` and ``copy=`` are accepted and ignored.

        Returns:
            Tensor: self when nothing changes, else the converted tensor.

        Raises:
            TypeError: an unknown keyword argument.
        """
        dev, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("copy", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, TensorBase):
                dev, dtype = arg.device, arg.dtype
            elif isinstance(arg, (str, device, int)) and not _looks_like_dtype(arg):
                dev = arg
            else:
                dtype = arg
        out = self
        if dev is not None:
            out = _to_device(out, as_device(dev))
        if dtype is not None:
            out = S.to_dtype(out, _dtype.as_dtype(dtype))
        return out

    def cpu(self):
        """A copy of the tensor in host memory (self when it already is on the CPU)."""
        return _to_device(self, CPU)

    def cuda(self, device=None):
        """A copy of the tensor on a CUDA device (needs CuPy and a GPU).

        Args:
            device: a device index, ``"cuda:N"`` or :class:`device`; None for the current device.

        Returns:
            Tensor: the tensor on the device.
        """
        return _to_device(self, as_device("cuda" if device is None else
                                          (f"cuda:{device}" if isinstance(device, int) else device)))

    float = _conversion("float", _dtype.float32)
    double = _conversion("double", _dtype.float64)
    half = _conversion("half", _dtype.float16)
    bfloat16 = _conversion("bfloat16", _dtype.bfloat16)
    long = _conversion("long", _dtype.int64)
    int = _conversion("int", _dtype.int32)
    bool = _conversion("bool", _dtype.bool_)

    def type(self, dtype=None, non_blocking=False, **kwargs):
        """This tensor converted to ``dtype``, or, with no argument, torch's name of its type.

        Args:
            dtype: a dtype, a legacy class (``tb.FloatTensor``, ``tb.cuda.LongTensor``) or its
                name (``"torch.cuda.FloatTensor"``, which also moves the tensor); None to ask.
            non_blocking: accepted for torch compatibility.
            **kwargs: torch's ``async`` alias of ``non_blocking``.

        Returns:
            Tensor | str: the converted tensor (self when nothing changes), or the name, e.g.
            ``'torch.FloatTensor'``.
        """
        if dtype is None:
            return _legacy_types.type_name(self)
        dt, dev = _legacy_types.resolve(dtype)
        out = S.to_dtype(self, dt)
        return out if dev is None else _to_device(out, as_device(dev))

    def type_as(self, other):
        """This tensor converted to ``other``'s dtype (``torch.Tensor.type_as``).

        Args:
            other: the tensor whose dtype is used.

        Returns:
            Tensor: self when the dtype already matches, else the converted tensor.
        """
        return S.to_dtype(self, other.dtype)

    # ***** sampling (tensorbrain/_sampling.py) *****
    def multinomial(self, num_samples, replacement=False, *, generator=None):
        """Indices drawn from the distribution(s) in this tensor's rows; see :func:`tb.multinomial`.

        Args:
            num_samples: how many indices per row.
            replacement: draw with replacement.
            generator: a :class:`Generator`; None for the default one.

        Returns:
            Tensor: int64 indices.
        """
        return _sampling.multinomial(self, num_samples, replacement, generator=generator)

    def bernoulli(self, p=None, *, generator=None):
        """Zeros and ones, each one with the probability in this tensor (or ``p``).

        Args:
            p: one probability for all elements; None uses this tensor's values.
            generator: a :class:`Generator`; None for the default one.

        Returns:
            Tensor: a new tensor of this tensor's shape and dtype.
        """
        return _sampling.bernoulli(self, p, generator=generator)

    def bernoulli_(self, p=0.5, *, generator=None):
        """Fill this tensor in place with zeros and ones, each one with probability ``p``.

        Args:
            p: a number, or a tensor of probabilities broadcastable to this tensor.
            generator: a :class:`Generator`; None for the default one.

        Returns:
            Tensor: self.
        """
        probs = p if isinstance(p, Tensor) else None
        draws = _sampling.bernoulli(probs.expand(self.shape) if probs is not None else self,
                                    None if probs is not None else p, generator=generator)
        return self.copy_(draws)

    def uniform_(self, a=0.0, b=1.0, generator=None):
        """Fill the tensor in place with samples of the uniform distribution on ``[a, b)``.

        Args:
            a: the lower bound.
            b: the upper bound.
            generator: a :class:`Generator`; None for the default one.

        Returns:
            Tensor: self.
        """
        with grad_mode.no_grad():
            self._data[...] = _random.uniform(a, b, self._data.shape, self._data.dtype, self._data, generator)
        self._version[0] += 1
        return self

    def normal_(self, mean=0.0, std=1.0, generator=None):
        """Fill the tensor in place with samples of the normal distribution.

        Args:
            mean: the mean.
            std: the standard deviation.
            generator: a :class:`Generator`; None for the default one.

        Returns:
            Tensor: self.
        """
        with grad_mode.no_grad():
            self._data[...] = _random.normal(mean, std, self._data.shape, self._data.dtype, self._data, generator)
        self._version[0] += 1
        return self

    # ***** autograd *****
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradient of this tensor into the leaves' ``.grad``.

        Args:
            gradient: the gradient of the output with respect to this tensor (same shape); may be
                None only for a tensor with one element.
            retain_graph: keep the graph so that backward can run through it again.
            create_graph: higher-order gradients; only False is supported.
            inputs: when given, only these tensors' ``.grad`` is accumulated.

        Raises:
            RuntimeError: the tensor does not require grad, ``gradient`` is missing for a
                non-scalar tensor or has the wrong shape.
            NotImplementedError: ``create_graph=True``.
        """
        if create_graph:
            raise NotImplementedError("create_graph=True (higher-order gradients) is not supported")
        if not self.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a "
                               "grad_fn: nothing to backpropagate")
        if gradient is None:
            if self._data.size != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs "
                                   f"(this tensor has shape {tuple(self._data.shape)}); pass "
                                   f"gradient=")
            g = _xp.get_array_module(self._data).ones(self._data.shape, dtype=self._data.dtype)
        else:
            g = gradient._data if isinstance(gradient, Tensor) else np.asarray(gradient)
            if g.shape != self._data.shape:
                raise RuntimeError(f"backward: gradient has shape {tuple(g.shape)} but the tensor "
                                   f"has shape {tuple(self._data.shape)}")
        if inputs is not None:
            _backward([self], [Tensor._wrap(g)], retain_graph, inputs)
            return
        engine.run_backward([self], [g], retain_graph=bool(retain_graph))

    def add_(self, other, alpha=1):
        """In-place ``self += alpha * other``.

        Args:
            other: a tensor (broadcast to self's shape) or a number.
            alpha: the multiplier of ``other``.

        Returns:
            Tensor: self.

        Raises:
            RuntimeError: the shapes do not broadcast to self's shape, or the in-place write is not
                allowed (a leaf that requires grad).
        """
        if not grad_mode.is_grad_enabled() or not (self.requires_grad or _req(other)):
            self._check_inplace("add_")
            o = other._data if isinstance(other, Tensor) else other
            if alpha != 1:
                o = o * alpha
            try:
                self._data += o
            except ValueError as exc:
                raise RuntimeError(f"add_: shapes {tuple(self._data.shape)} and "
                                   f"{tuple(np.shape(o))} do not match ({exc})") from None
            self._version[0] += 1
            return self
        return self._inplace("add_", lambda s: E.add(s, other, alpha), other, reads_input=False)

    def sub_(self, other, alpha=1):
        """In-place ``self -= alpha * other``.

        Args:
            other: a tensor (broadcast to self's shape) or a number.
            alpha: the multiplier of ``other``.

        Returns:
            Tensor: self.
        """
        return self._inplace("sub_", lambda s: E.sub(s, other, alpha), other, reads_input=False)

    def mul_(self, other):
        """In-place ``self *= other``.

        Args:
            other: a tensor (broadcast to self's shape) or a number.

        Returns:
            Tensor: self.
        """
        if not grad_mode.is_grad_enabled() or not (self.requires_grad or _req(other)):
            self._check_inplace("mul_")
            self._data *= other._data if isinstance(other, Tensor) else other
            self._version[0] += 1
            return self
        return self._inplace("mul_", lambda s: E.mul(s, other), other)

    def div_(self, other):
        """In-place ``self /= other``.

        Args:
            other: a tensor (broadcast to self's shape) or a number.

        Returns:
            Tensor: self.
        """
        return self._inplace("div_", lambda s: E.div(s, other), other)

    def pow_(self, other):
        """In-place ``self = self ** other``.

        Args:
            other: the exponent, a tensor or a number.

        Returns:
            Tensor: self.
        """
        return self._inplace("pow_", lambda s: E.pow(s, other), other)

    def clamp_(self, min=None, max=None):
        """In-place clamp of every element into ``[min, max]``.

        Args:
            min: the lower bound, or None for none.
            max: the upper bound, or None for none.

        Returns:
            Tensor: self.
        """
        return self._inplace("clamp_", lambda s: E.clamp(s, min, max))

    def neg_(self):
        """In-place ``self = -self``; returns self."""
        return self._inplace("neg_", E.neg, reads_input=False)

    def exp_(self):
        """In-place ``self = exp(self)``; returns self."""
        return self._inplace("exp_", E.exp, reads_input=False)

    def sqrt_(self):
        """In-place ``self = sqrt(self)``; returns self."""
        return self._inplace("sqrt_", E.sqrt, reads_input=False)

    def relu_(self):
        """In-place ``self = max(self, 0)``; returns self."""
        return self._inplace("relu_", E.relu, reads_input=False)

    def copy_(self, src, non_blocking=False):
        """Copy ``src`` into this tensor in place (broadcast, dtype and device converted).

        Args:
            src: a tensor or array-like data.
            non_blocking: ignored (accepted for torch compatibility).

        Returns:
            Tensor: self.

        Raises:
            RuntimeError: ``src``'s shape does not broadcast to this tensor's shape.

        Example:
            >>> import tensorbrain as tb
            >>> tb.zeros(2, 2).copy_(tb.tensor([1.0, 2.0])).tolist()
            [[1.0, 2.0], [1.0, 2.0]]
        """
        if not isinstance(src, Tensor):
            src = tensor(src)
        if grad_mode.is_grad_enabled() and (self.requires_grad or src.requires_grad):
            xp = _xp.get_array_module(self._data)
            shape, dt = self._data.shape, self._data.dtype

            def result(s):
                moved = _to_device(src, self.device)
                b = S.expand(S.to_dtype(moved, dt), *shape)
                return make(xp.array(b._data, copy=True), (b,), lambda g: (g,), "CopyBackward")
            return self._inplace("copy_", result, src)
        self._check_inplace("copy_")
        data = src._data
        if type(data) is not type(self._data):
            data = _xp.to_numpy(data) if not self.is_cuda else _xp.cupy().asarray(data)
        try:
            self._data[...] = data
        except ValueError as exc:
            raise RuntimeError(f"copy_: source of shape {tuple(src.shape)} cannot be copied into "
                               f"a tensor of shape {tuple(self.shape)} ({exc})") from None
        self._version[0] += 1
        return self

    def __setitem__(self, index, value):
        idx = S._index_data(index)
        if grad_mode.is_grad_enabled() and (self.requires_grad or _req(value)):
            def result(s):
                xp = _xp.get_array_module(s._data)
                v = value if isinstance(value, Tensor) else Tensor._wrap(xp.asarray(value, dtype=s._data.dtype))
                out = s._data.copy()
                out[idx] = v._data

                def backward(g):
                    gs = g.copy()
                    gs[idx] = 0
                    gv = None
                    if v.requires_grad:
                        gv = unbroadcast(g[idx], v._data.shape) if g[idx].shape != v._data.shape else g[idx]
                    return gs, gv
                return make(out, (s, v), backward, "IndexPutBackward")
            self._inplace("__setitem__", result, value)
            return
        self._check_inplace("__setitem__")
        self._data[idx] = value._data if isinstance(value, Tensor) else value
        self._version[0] += 1

    def __getitem__(self, index):
        return S.getitem(self, index)

    __add__ = E.add
    __sub__ = E.sub
    __mul__ = E.mul
    __truediv__ = E.div
    __floordiv__ = P.floor_divide
    __mod__ = P.remainder
    __pow__ = E.pow
    __matmul__ = S.matmul
    __and__ = P.bitwise_and
    __or__ = P.bitwise_or
    __xor__ = P.bitwise_xor
    __invert__ = P.bitwise_not
    __neg__ = E.neg
    __lt__ = E.lt_
    __gt__ = E.gt_
    __le__ = E.le_
    __ge__ = E.ge_
    __eq__ = E.eq_
    __ne__ = E.ne_
    __hash__ = TensorBase.__hash__   # kept: defining __eq__ would set it to None

    def __radd__(self, other): return E.add(other, self)
    def __rsub__(self, other): return E.sub(other, self)
    def __rmul__(self, other): return E.mul(other, self)
    def __rtruediv__(self, other): return E.div(other, self)
    def __rfloordiv__(self, other): return P.floor_divide(other, self)
    def __rmod__(self, other): return P.remainder(other, self)
    def __rpow__(self, other): return E.pow(other, self)
    def __rmatmul__(self, other): return S.matmul(_as_tensor(other, self), self)
    def __rand__(self, other): return P.bitwise_and(other, self)
    def __ror__(self, other): return P.bitwise_or(other, self)
    def __rxor__(self, other): return P.bitwise_xor(other, self)
    def __abs__(self): return E.abs(self)
    def __pos__(self): return self

    def __iadd__(self, other): return self.add_(other)  # type: ignore[misc]  # __add__ is tb.add(a, b, alpha)
    def __isub__(self, other): return self.sub_(other)  # type: ignore[misc]
    def __imul__(self, other): return self.mul_(other)
    def __itruediv__(self, other): return self.div_(other)  # type: ignore[misc]

    # ***** NumPy and DLPack (tensorbrain/_interop.py) *****
    def __array__(self, dtype=None, copy=None):
        arr = _xp.to_numpy(self._data)
        return arr if dtype is None else arr.astype(dtype)

    # NumPy interop (tensorbrain/_interop.py): ufuncs return Tensors, DLPack shares memory.
    __array_priority__ = 1000

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """``np.exp(t)``, ``np.ones(3) + t``: a Tensor, through tb's op where one exists."""
        return _interop.array_ufunc(self, ufunc, method, *inputs, **kwargs)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule sharing this tensor's memory (``torch.from_dlpack(t)``)."""
        return _interop.dlpack(self, stream=stream, max_version=max_version,
                               dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        """``(device_type, device_id)`` as DLPack: (1, 0) for CPU, (2, i) for cuda:i."""
        return _interop.dlpack_device(self)


def _looks_like_dtype(x):
    if isinstance(x, device) or isinstance(x, int) and not isinstance(x, bool):
        return False  # an int is a CUDA device index, as in torch: t.to(rank)
    if isinstance(x, str):
        return x.split(":")[0] not in ("cpu", "cuda")
    return True


def _as_tensor(x, like):
    if isinstance(x, Tensor):
        return x
    return Tensor._wrap(_xp.get_array_module(like._data).asarray(x))


def _to_device(t, dev: device):
    src_cuda = t.is_cuda
    if dev.type == "cpu":
        if not src_cuda:
            return t
        out = _xp.to_numpy(t._data)
        return make(out, (t,), lambda g, d=t._data.device.id: (_on_gpu(g, d),), "ToCopyBackward")
    cp = _xp.cupy()
    if t._data.dtype == _dtype.bfloat16:
        why = _xp.cupy_bfloat16_unsupported()
        if why is not None:
            raise TypeError(f"bfloat16 tensors cannot move to CUDA: {why}; use float16 on this "
                            "GPU (autocast's default there)")
    idx = dev.index if dev.index is not None else cp.cuda.runtime.getDevice()
    if src_cuda and t._data.device.id == idx:
        return t
    with cp.cuda.Device(idx):
        out = cp.asarray(t._data) if not src_cuda else t._data.copy()
    if src_cuda:   # the gradient goes back to the source GPU (copy() copies to the current one)
        return make(out, (t,), lambda g, d=t._data.device.id: (_on_gpu(g, d),), "ToCopyBackward")
    return make(out, (t,), lambda g: (_xp.to_numpy(g),), "ToCopyBackward")


def _on_gpu(arr, dev_id: int):
    """``arr`` (host or any GPU) as a CuPy array on GPU ``dev_id``."""
    cp = _xp.cupy()
    with cp.cuda.Device(dev_id):
        return arr.copy() if _xp.is_cupy_array(arr) else cp.asarray(arr)
