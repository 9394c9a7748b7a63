"""The Tensor: an array (NumPy on 'cpu', CuPy on 'cuda') plus autograd bookkeeping.

``Tensor._data`` is the array itself: code inside TensorBrain that needs raw speed (optimizers,
collectives) works on it directly and in place. Everything else goes through the ops in
``tensorbrain/_ops``. ``Tensor.data`` is torch's: a Tensor sharing the storage, without history.
"""
from __future__ import annotations

import numbers
import os as _os

import numpy as np

from . import _dtype, _xp
from . import _interop
from ._device import CPU, as_device, device
from ._ops import elementwise as E
from ._ops import reduce as R
from ._ops import shape as S
from ._ops import core as _core
from ._ops.core import make
from .autograd import engine, grad_mode


class Tensor:
    """A multi-dimensional array with autograd, on CPU (NumPy) or CUDA (CuPy), as ``torch.Tensor``.

    ``Tensor(data)`` behaves as :func:`tensor`; the factory functions (:func:`zeros`,
    :func:`randn`, ...) are the usual way to make one.

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
    __slots__ = ("_data", "requires_grad", "grad", "grad_fn", "_version", "_hooks",
                 "_post_acc_hooks", "_base", "__weakref__", "__dict__")

    def __init__(self, data, dtype=None, device=None, requires_grad=False):
        t = tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
        self._init_from(t._data, requires_grad)

    def _init_from(self, array, requires_grad=False):
        if isinstance(array, np.generic):  # a NumPy scalar from a reduction: keep ._data an array
            array = np.asarray(array)
        self._data = array
        self.requires_grad = bool(requires_grad)
        self.grad = None
        self.grad_fn = None
        self._version = [0]
        self._hooks = None
        self._post_acc_hooks = None
        self._base = None

    @classmethod
    def _wrap(cls, array, requires_grad=False):
        """A tensor around ``array`` without copying (internal fast path)."""
        t = cls.__new__(cls)
        t._init_from(array, requires_grad)
        return t

    # ***** properties *****
    @property
    def data(self):
        """A Tensor sharing this tensor's storage, with no autograd history (torch's ``.data``).

        In-place changes through it (``p.data.add_(g, alpha=-lr)``, ``.fill_``, ``.copy_``) change
        this tensor and are not recorded by autograd. Assigning ``t.data = other`` makes ``t``
        use ``other``'s storage (an array is accepted too).

        Example:
            >>> import tensorbrain as tb
            >>> w = tb.ones(2, requires_grad=True)
            >>> _ = w.data.mul_(3)
            >>> w.tolist(), w.data.requires_grad
            ([3.0, 3.0], False)
        """
        return Tensor._wrap(self._data)

    @data.setter
    def data(self, value):
        """``t.data = other``: make ``t`` use ``other``'s storage (a Tensor or an array).

        Raises:
            TypeError: ``value`` is neither a Tensor nor a NumPy/CuPy array.
        """
        array = value._data if isinstance(value, Tensor) else value
        if not (isinstance(array, np.ndarray) or _xp.is_cupy_array(array)):
            raise TypeError(f"Tensor.data must be set to a Tensor, got {type(value).__name__}")
        self._data = array

    @property
    def shape(self):
        """The shape of the tensor, as a :class:`Size`."""
        return Size(self._data.shape)

    def size(self, dim=None):
        """The shape of the tensor, or the length of one dimension.

        Args:
            dim: a dimension index (negative counts from the end); None for the whole shape.

        Returns:
            Size | int: the shape, or the size of dimension ``dim``.
        """
        return Size(self._data.shape) if dim is None else self._data.shape[dim]

    @property
    def dtype(self):
        """The element dtype (a NumPy dtype, e.g. ``tb.float32``)."""
        return self._data.dtype

    @property
    def device(self) -> device:
        """The :class:`device` the data lives on (``cpu`` or ``cuda:N``)."""
        if _xp.is_cupy_array(self._data):
            return device("cuda", self._data.device.id)
        return CPU

    @property
    def is_cuda(self) -> bool:
        """True when the data lives on a CUDA device."""
        return _xp.is_cupy_array(self._data)

    @property
    def ndim(self):
        """The number of dimensions (same as :meth:`dim`)."""
        return self._data.ndim

    def dim(self):
        """The number of dimensions."""
        return self._data.ndim

    def numel(self):
        """The number of elements (the product of the shape); ``nelement`` is an alias."""
        return int(self._data.size)

    nelement = numel

    def element_size(self):
        """The size of one element in bytes."""
        return self._data.itemsize

    @property
    def is_leaf(self):
        """True when the tensor was not produced by a recorded operation (no ``grad_fn``)."""
        return self.grad_fn is None

    @property
    def T(self):
        """The tensor with all its dimensions reversed (a transpose for 2-D tensors)."""
        return S.permute(self, *reversed(range(self._data.ndim)))

    @property
    def mT(self):
        """The tensor with its last two dimensions swapped (batched matrix transpose)."""
        return S.transpose(self, -2, -1)

    def data_ptr(self) -> int:
        """The address of the first element in memory (host or device), as an int."""
        if _xp.is_cupy_array(self._data):
            return int(self._data.data.ptr)
        return int(self._data.__array_interface__["data"][0])

    def share_memory_(self):
        """Move this CPU tensor's storage into shared memory (no-op if already there or on CUDA).

        Child processes started by ``tensorbrain.multiprocessing`` that receive the tensor map
        the same memory: writes on either side are seen by both (hogwild training).

        Returns:
            self
        """
        from . import _shared_memory
        if not self.is_cuda and not _shared_memory.is_shared(self._data):
            self._data = _shared_memory.share_array(self._data)
        return self

    def is_shared(self) -> bool:
        """True when the storage is in shared memory (see :meth:`share_memory_`)."""
        from . import _shared_memory
        return _shared_memory.is_shared(self._data)

    def pin_memory(self, device=None):
        """Page-locked memory only matters for CUDA copies; here it returns self, as a no-op.

        Args:
            device: ignored (accepted for torch compatibility).

        Returns:
            Tensor: self.
        """
        return self

    def is_pinned(self, device=None) -> bool:
        """Always False: page-locked host memory is not used (see :meth:`pin_memory`).

        Args:
            device: ignored (accepted for torch compatibility).
        """
        return False

    @property
    def is_xpu(self) -> bool:
        """Always False: XPU devices are not supported."""
        return False

    @property
    def is_mps(self) -> bool:
        """Always False: MPS devices are not supported."""
        return False

    def is_contiguous(self):
        """True when the elements are laid out in row-major (C) order without gaps."""
        return bool(self._data.flags.c_contiguous)

    def is_floating_point(self):
        """True when the dtype is a floating-point type."""
        return _dtype.is_floating_point(self._data.dtype)

    def stride(self, dim=None):
        """The strides in elements (not bytes), as ``torch.Tensor.stride``.

        Args:
            dim: a dimension index; None for all of them.

        Returns:
            tuple[int, ...] | int: the strides, or the stride of dimension ``dim``.
        """
        st = tuple(s // self._data.itemsize for s in self._data.strides)
        return st if dim is None else st[dim]

    # ***** conversion *****
    def numpy(self, force=False):
        """The data as a NumPy array that shares memory with the tensor (CPU only).

        Args:
            force: when True, also works on tensors that require grad and on CUDA tensors (a host
                copy is made for those).

        Returns:
            numpy.ndarray: the array.

        Raises:
            RuntimeError: the tensor requires grad and ``force`` is False.
            TypeError: the tensor is on CUDA and ``force`` is False.
        """
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on a Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        if _xp.is_cupy_array(self._data):
            if not force:
                raise TypeError("can't convert cuda tensor to numpy. Use Tensor.cpu() to copy the "
                                "tensor to host memory first.")
            return _xp.to_numpy(self._data)
        return self._data

    def item(self):
        """The value of a one-element tensor as a Python number.

        Raises:
            RuntimeError: the tensor does not have exactly one element.

        Example:
            >>> import tensorbrain as tb
            >>> tb.tensor([2.5]).item()
            2.5
        """
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to "
                               f"a Python number (item() needs exactly one element; shape "
                               f"{tuple(self._data.shape)})")
        return self._data.reshape(()).item() if not _xp.is_cupy_array(self._data) else \
            _xp.to_numpy(self._data).reshape(()).item()

    def tolist(self):
        """The data as (nested) Python lists of Python numbers; a scalar for 0-d tensors."""
        return _xp.to_numpy(self._data).tolist()

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
            if isinstance(arg, Tensor):
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

    def float(self):
        """A copy of this tensor converted to ``float32`` (self when it already is).

        Returns:
            Tensor: the converted tensor; it stays in the autograd graph.
        """
        return S.to_dtype(self, _dtype.float32)
    def double(self):
        """A copy of this tensor converted to ``float64`` (self when it already is).

        Returns:
            Tensor: the converted tensor; it stays in the autograd graph.
        """
        return S.to_dtype(self, _dtype.float64)
    def half(self):
        """A copy of this tensor converted to ``float16`` (self when it already is).

        Returns:
            Tensor: the converted tensor; it stays in the autograd graph.
        """
        return S.to_dtype(self, _dtype.float16)
    def bfloat16(self):
        """A copy of this tensor converted to ``bfloat16`` (self when it already is).

        Returns:
            Tensor: the converted tensor; it stays in the autograd graph.
        """
        return S.to_dtype(self, _dtype.bfloat16)
    def long(self):
        """A copy of this tensor converted to ``int64`` (self when it already is).

        Returns:
            Tensor: the converted tensor; it stays in the autograd graph.
        """
        return S.to_dtype(self, _dtype.int64)
    def int(self):
        """A copy of this tensor converted to ``int32`` (self when it already is).

        Returns:
            Tensor: the converted tensor; it stays in the autograd graph.
        """
        return S.to_dtype(self, _dtype.int32)
    def bool(self):
        """A copy of this tensor converted to ``bool`` (self when it already is).

        Returns:
            Tensor: the converted tensor; it stays in the autograd graph.
        """
        return S.to_dtype(self, _dtype.bool_)
    def type(self, dtype):
        """A copy of this tensor converted to ``dtype``.

        Args:
            dtype: the target dtype (a dtype or a name such as ``"float32"``).

        Returns:
            Tensor: the converted tensor.
        """
        return S.to_dtype(self, _dtype.as_dtype(dtype))

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
            from .autograd import backward as _backward
            _backward([self], [Tensor._wrap(g)], retain_graph, inputs)
            return
        engine.run_backward([self], [g], retain_graph=bool(retain_graph))

    def detach(self):
        """A new tensor sharing this tensor's data, cut from the autograd graph."""
        t = Tensor._wrap(self._data)
        t._version = self._version
        return t

    def detach_(self):
        """Detach this tensor from the graph in place (it becomes a leaf without grad)."""
        if self._base is not None and self._base.requires_grad:
            raise RuntimeError("detach_() on a view of a tensor that requires grad is not "
                               "allowed (as in torch); use detach() for an out-of-place copy")
        self.grad_fn = None
        self.requires_grad = False
        return self

    def requires_grad_(self, requires_grad=True):
        """Set whether autograd records operations on this tensor, in place.

        Args:
            requires_grad: the new flag.

        Returns:
            Tensor: self.

        Raises:
            RuntimeError: turning it off on a non-leaf tensor, or turning it on for a
                non-floating-point dtype.
        """
        if self.grad_fn is not None and not requires_grad:
            raise RuntimeError("you can only change requires_grad flags of leaf variables.")
        if requires_grad and not _dtype.is_float_or_complex(self._data.dtype):
            raise RuntimeError(f"only Tensors of floating point dtype can require gradients "
                               f"(got {self._data.dtype})")
        self.requires_grad = bool(requires_grad)
        return self

    def register_hook(self, hook):
        """Register ``hook(grad) -> Tensor | None``, run when this tensor's gradient is
        computed; a returned tensor replaces the gradient.

        Args:
            hook: the callable.

        Returns:
            A handle whose ``remove()`` unregisters the hook.

        Raises:
            RuntimeError: the tensor does not require grad.
        """
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is None:
            if self._hooks is None:
                self._hooks = []
            return _Handle(self._hooks, hook)
        node = self.grad_fn
        if node.pre_hooks is None:
            node.pre_hooks = []

        def array_hook(g, hook=hook):
            new = hook(Tensor._wrap(g))
            return g if new is None else new._data
        return _Handle(node.pre_hooks, array_hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Register ``hook(tensor)``, run right after a leaf's ``.grad`` has been written in backward.

        Args:
            hook: the callable; it receives this tensor.

        Returns:
            A handle whose ``remove()`` unregisters the hook.

        Raises:
            RuntimeError: the tensor is not a leaf.
        """
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._post_acc_hooks is None:
            self._post_acc_hooks = []
        return _Handle(self._post_acc_hooks, hook)

    def retain_grad(self):
        """Keep ``.grad`` for this non-leaf tensor in backward (a no-op on leaves)."""
        if self.grad_fn is None:
            return
        me = self

        def keep(g):
            me.grad = Tensor._wrap(g.copy()) if me.grad is None else Tensor._wrap(me.grad._data + g)
            return g
        if self.grad_fn.pre_hooks is None:
            self.grad_fn.pre_hooks = []
        self.grad_fn.pre_hooks.append(keep)

    # ***** in-place ops *****
    def _check_inplace(self, what):
        if not grad_mode.is_grad_enabled():
            return
        if self.requires_grad and self.grad_fn is None:
            raise RuntimeError(f"a leaf Variable that requires grad is being used in an in-place "
                               f"operation ({what}); wrap it in `with tb.no_grad():` (as an "
                               f"optimizer does) or use the out-of-place op")
        base = self._base
        if base is not None and base.requires_grad:
            if base.grad_fn is None:
                raise RuntimeError(f"a view of a leaf Variable that requires grad is being used in "
                                   f"an in-place operation ({what})")
            # A view made by basic indexing (``y[0]``, ``y[:, 1:]``, ``y[0][1:]``) writes its
            # new value back into its parent afterwards (see _write_back), PyTorch's
            # CopySlices. Other views (reshape, permute, expand) are not tracked that far:
            # refuse rather than give the base a wrong gradient.
            vo = self.__dict__.get("_view_of")
            while vo is not None and vo[0]._base is not None:   # up to the base, all indexing
                vo = vo[0].__dict__.get("_view_of")
            if vo is None:
                raise RuntimeError(f"{what} on this view of a tensor that requires grad is not "
                                   f"supported (only views made by indexing are): modify the "
                                   f"base (base[index] = ...) or a .clone()")

    def _write_back(self):
        """After an in-place op on an indexing view of a non-leaf, rebase the view's base onto
        ``base[index] = view``, so the base's gradient flows through the view's new value."""
        vo = self.__dict__.get("_view_of")
        if vo is None or not grad_mode.is_grad_enabled():
            return
        parent, index = vo
        if parent.requires_grad and parent.grad_fn is not None:
            parent.__setitem__(index, self)   # a view's parent writes back into its own parent

    def _inplace(self, what, result_fn, *others, reads_input=True):
        """Run an in-place op: compute out of place, write back, bump the version counter.

        When the op must be recorded (grad mode, a graph involved) the tensor is rebased onto the
        new node, its old value kept in a private copy so saved values stay correct. Ops whose
        backward reads only their output or nothing (``reads_input=False``: relu_, add_, exp_...)
        skip that copy: ``relu_`` in a network then costs what ``relu`` costs plus the write-back.
        """
        self._check_inplace(what)
        record = grad_mode.is_grad_enabled() and (self.requires_grad or any(map(_req, others)))
        if record:
            old = Tensor._wrap(self._data.copy() if reads_input else self._data, self.requires_grad)
            old.grad_fn = self.grad_fn
            res = result_fn(old)
        else:
            with grad_mode.no_grad():
                res = result_fn(self)
        rd = res._data
        if rd.shape != self._data.shape:
            raise RuntimeError(f"{what}: output with shape {tuple(self._data.shape)} doesn't match "
                               f"the broadcast shape {tuple(rd.shape)}")
        if rd is not self._data:
            self._data[...] = rd
        self._version[0] += 1
        if record:
            self.grad_fn = res.grad_fn
            self.requires_grad = res.requires_grad
            if self._base is not None:
                self._write_back()
        return self

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

    def zero_(self):
        """Fill the tensor with zeros in place; returns self."""
        self._check_inplace("zero_")
        self._data.fill(0)
        self._version[0] += 1
        if grad_mode.is_grad_enabled() and self.grad_fn is not None:
            self.grad_fn = None  # the value no longer depends on anything
            self.requires_grad = False
            self._write_back()
        return self

    def fill_(self, value):
        """Fill the tensor with one value in place.

        Args:
            value: a number, or a one-element tensor.

        Returns:
            Tensor: self.
        """
        self._check_inplace("fill_")
        self._data.fill(value.item() if isinstance(value, Tensor) else value)
        self._version[0] += 1
        if grad_mode.is_grad_enabled() and self.grad_fn is not None:
            self.grad_fn = None
            self.requires_grad = False
            self._write_back()
        return self

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
                        from ._ops.core import unbroadcast
                        gv = unbroadcast(g[idx], v._data.shape) if g[idx].shape != v._data.shape else g[idx]
                    return gs, gv
                return make(out, (s, v), backward, "IndexPutBackward")
            self._inplace("__setitem__", result, value)
            return
        self._check_inplace("__setitem__")
        self._data[idx] = value._data if isinstance(value, Tensor) else value
        self._version[0] += 1

    # ***** Python protocol *****
    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self._data.size} elements is "
                               f"ambiguous")
        return bool(self.item())

    def __float__(self): return float(self.item())
    def __int__(self): return int(self.item())
    def __index__(self): return int(self.item())

    def __hash__(self):
        return id(self)

    def __getattr__(self, name):
        # Only reached when normal lookup fails. Code written when .data was the raw array
        # (x.data.flags, x.data.astype) lands here: say what changed.
        if name in _ARRAY_ONLY:
            raise AttributeError(f"'Tensor' object has no attribute {name!r}. Tensor.data is a "
                                 f"Tensor (torch's semantics); the NumPy/CuPy array is "
                                 f"t.numpy() for users and t._data inside TensorBrain")
        if not name.startswith("_") and _os.environ.get("TENSORBRAIN_AS_TORCH") == "1":
            raise AttributeError(f"'Tensor' object has no attribute {name!r}: TensorBrain's Tensor "
                                 f"does not provide it yet. This is a gap in TensorBrain's PyTorch "
                                 f"compatibility, not an error in your program (see docs/compat.md)")
        raise AttributeError(f"'Tensor' object has no attribute {name!r}")

    def __format__(self, format_spec):
        """``f"{loss:.4f}"``: a 0-d tensor formats as its Python number, as in torch."""
        if self._data.ndim == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __repr__(self):
        arr = _xp.to_numpy(self._data)
        if arr.dtype == _dtype.bfloat16:  # NumPy prints ml_dtypes' bfloat16 as integers
            arr = arr.astype(np.float32)
        body = np.array2string(arr, separator=", ", precision=4,
                               prefix="tensor(")
        extras = []
        if self.is_cuda:
            extras.append(f"device='{self.device}'")
        if self._data.dtype not in (_dtype.float32, _dtype.int64, _dtype.bool_):
            extras.append(f"dtype={self._data.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    def __getitem__(self, index):
        return S.getitem(self, index)

    __add__ = E.add
    __sub__ = E.sub
    __mul__ = E.mul
    __truediv__ = E.div
    __pow__ = E.pow
    __matmul__ = S.matmul
    __neg__ = E.neg
    __lt__ = E.lt_
    __gt__ = E.gt_
    __le__ = E.le_
    __ge__ = E.ge_
    __eq__ = E.eq_
    __ne__ = E.ne_

    def __radd__(self, other): return E.add(other, self)
    def __rsub__(self, other): return E.sub(other, self)
    def __rmul__(self, other): return E.mul(other, self)
    def __rtruediv__(self, other): return E.div(other, self)
    def __rpow__(self, other): return E.pow(other, self)
    def __rmatmul__(self, other): return S.matmul(_as_tensor(other, self), self)
    def __pos__(self): return self
    def __abs__(self): return E.abs(self)

    def __invert__(self):
        return Tensor._wrap(~self._data)

    def __and__(self, other): return Tensor._wrap(self._data & _raw(other))
    def __or__(self, other): return Tensor._wrap(self._data | _raw(other))
    def __xor__(self, other): return Tensor._wrap(self._data ^ _raw(other))
    def __floordiv__(self, other): return Tensor._wrap(self._data // _raw(other))
    def __mod__(self, other): return Tensor._wrap(self._data % _raw(other))

    def __iadd__(self, other): return self.add_(other)
    def __isub__(self, other): return self.sub_(other)
    def __imul__(self, other): return self.mul_(other)
    def __itruediv__(self, other): return self.div_(other)


_core.Tensor = Tensor  # the ops build Tensors through _ops.core (see the note there)


_ARRAY_ONLY = frozenset({"flags", "strides", "itemsize", "nbytes", "astype", "ravel", "ctypes",
                         "copy", "fill", "base", "tobytes"})


class Size(tuple):
    """The shape of a tensor: a tuple, as ``torch.Size``."""

    def numel(self):
        """The number of elements of a tensor of this shape (the product of the sizes)."""
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return f"tb.Size([{', '.join(map(str, self))}])"


class _Handle:
    """Returned by hook registrations; ``remove()`` unregisters the hook."""

    def __init__(self, hooks, hook):
        self._hooks, self._hook = hooks, hook
        hooks.append(hook)

    def remove(self):
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


def _raw(x):
    return x._data if isinstance(x, Tensor) else x


def _req(x):
    return isinstance(x, Tensor) and x.requires_grad


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
        raise TypeError("bfloat16 tensors cannot move to CUDA: CuPy has no bfloat16 dtype; use "
                        "float16 on the GPU (autocast's default there)")
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


# ***** creation *****
from . import _random  # noqa: E402  (needs Tensor defined)


def _infer_dtype(data):
    if isinstance(data, bool):
        return _dtype.bool_
    if isinstance(data, numbers.Integral):
        return _dtype.int64
    if isinstance(data, numbers.Real):
        return _dtype.get_default_dtype()
    return None


def _array_on(data, dtype, dev: device):
    if dev.type == "cuda":
        cp = _xp.cupy()
        with cp.cuda.Device(dev.index if dev.index is not None else cp.cuda.runtime.getDevice()):
            return cp.asarray(data, dtype=dtype)
    return np.asarray(data, dtype=dtype)


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (nested lists, scalars, arrays, tensors).

    Args:
        data: the values.
        dtype: the dtype; None infers it (Python floats give the default dtype, Python ints
            int64).
        device: the device; None keeps a CuPy array's device, else CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the new tensor.

    Raises:
        TypeError: no dtype can be inferred for ``data``.

    >>> import tensorbrain as tb
    >>> tb.tensor([[1.0, 2.0]]).dtype, tb.tensor([1, 2]).dtype
    (dtype('float32'), dtype('int64'))
    """
    dtype = _dtype.as_dtype(dtype)
    if isinstance(data, Tensor):
        data = data._data
    dev = as_device(device) if device is not None else (
        device_of(data) if _xp.is_cupy_array(data) else CPU)
    if dtype is None and not hasattr(data, "dtype"):
        arr = np.asarray(_xp.to_numpy(data) if _xp.is_cupy_array(data) else data)
        if arr.dtype == np.float64:
            dtype = _dtype.get_default_dtype()  # Python floats -> float32, as in PyTorch
        elif arr.dtype.kind == "i":
            dtype = _dtype.int64
        elif arr.dtype == object:
            raise TypeError(f"tb.tensor: could not infer a dtype for {type(data).__name__} data")
        data = arr
    arr = _array_on(data, dtype, dev)
    if arr is data:
        arr = arr.copy()
    t = Tensor._wrap(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def device_of(array) -> device:
    """The :class:`device` of a NumPy or CuPy array.

    Args:
        array: the array.

    Returns:
        device: ``cuda:N`` for a CuPy array, else ``cpu``.
    """
    if _xp.is_cupy_array(array):
        return device("cuda", array.device.id)
    return CPU


def as_tensor(data, dtype=None, device=None):
    """``data`` as a tensor, without a copy where possible (as ``torch.as_tensor``).

    A tensor is returned as is, a CPU NumPy array of the right dtype is wrapped (memory shared);
    anything else is copied as by :func:`tensor`.

    Args:
        data: a tensor, array or array-like data.
        dtype: the dtype wanted; None keeps or infers it.
        device: the device wanted; None keeps it.

    Returns:
        Tensor: the tensor.
    """
    if isinstance(data, Tensor) and dtype is None and device is None:
        return data
    if isinstance(data, np.ndarray) and device in (None, "cpu") and (dtype is None or np.dtype(dtype) == data.dtype):
        return Tensor._wrap(data)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``array`` (changes to one show in the other).

    Args:
        array: a NumPy array.

    Returns:
        Tensor: the tensor.

    Raises:
        TypeError: ``array`` is not a ``numpy.ndarray``.
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    return Tensor._wrap(array)


def _full(shape, value, dtype, device, requires_grad):
    shape = S._shape_arg(shape)
    dev = as_device(device)
    dtype = _dtype.as_dtype(dtype)
    if dtype is None:
        dtype = _infer_dtype(value) if not isinstance(value, float) else _dtype.get_default_dtype()
    xp = _xp.cupy() if dev.type == "cuda" else np
    if dev.type == "cuda":
        with xp.cuda.Device(dev.index if dev.index is not None else xp.cuda.runtime.getDevice()):
            arr = xp.full(shape, value, dtype=dtype)
    else:
        arr = np.full(shape, value, dtype=dtype)
    t = Tensor._wrap(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def zeros(*size, dtype=None, device=None, requires_grad=False):
    """A tensor filled with zeros.

    Args:
        *size: the shape, as ints or one sequence of ints.
        dtype: the dtype; None for the default dtype (float32).
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the new tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.zeros(2, 3).shape
        tb.Size([2, 3])
    """
    return _full(size, 0.0, dtype or _dtype.get_default_dtype(), device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    """A tensor filled with ones.

    Args:
        *size: the shape, as ints or one sequence of ints.
        dtype: the dtype; None for the default dtype (float32).
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the new tensor.
    """
    return _full(size, 1.0, dtype or _dtype.get_default_dtype(), device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    """A tensor whose values are not initialised.

    Args:
        *size: the shape, as ints or one sequence of ints.
        dtype: the dtype; None for the default dtype (float32).
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the new tensor.
    """
    shape = S._shape_arg(size)
    dev = as_device(device)
    dtype = _dtype.as_dtype(dtype) or _dtype.get_default_dtype()
    xp = _xp.cupy() if dev.type == "cuda" else np
    t = Tensor._wrap(xp.empty(shape, dtype=dtype))
    if requires_grad:
        t.requires_grad_(True)
    return t


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor filled with ``fill_value``.

    Args:
        size: the shape (a sequence of ints).
        fill_value: the value.
        dtype: the dtype; None infers it from ``fill_value`` (floats give the default dtype).
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the new tensor.
    """
    return _full(size, fill_value, dtype, device, requires_grad)


def _like(fn):
    def like(t, dtype=None, device=None, requires_grad=False, **kw):
        return fn(*t.shape, **kw, dtype=dtype or t.dtype, device=device or t.device,
                  requires_grad=requires_grad)
    like.__name__ = fn.__name__ + "_like"
    return like


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)


def full_like(t, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor of ``t``'s shape filled with ``fill_value``.

    Args:
        t: the tensor whose shape (and, by default, dtype and device) is used.
        fill_value: the value.
        dtype: the dtype; None for ``t``'s.
        device: the device; None for ``t``'s.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the new tensor.
    """
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=device or t.device,
                requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """The values ``start, start + step, ...`` below ``end``, as ``torch.arange``.

    ``arange(end)`` counts from 0.

    Args:
        start: the first value (or ``end`` when ``end`` is None).
        end: the bound, not included.
        step: the difference between neighbours.
        dtype: the dtype; None gives int64 for integer arguments, else the default dtype.
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: a 1-D tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.arange(0, 1, 0.25).tolist()
        [0.0, 0.25, 0.5, 0.75]
    """
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = _dtype.int64 if all(isinstance(v, numbers.Integral) for v in (start, end, step)) \
            else _dtype.get_default_dtype()
    t = tensor(np.arange(start, end, step, dtype=np.float64 if np.dtype(dtype).kind == "f" else None)
               .astype(dtype), device=device)
    return t.requires_grad_(True) if requires_grad else t


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end``, both included.

    Args:
        start: the first value.
        end: the last value.
        steps: the number of values.
        dtype: the dtype; None for the default dtype.
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: a 1-D tensor.
    """
    t = tensor(np.linspace(start, end, steps).astype(dtype or _dtype.get_default_dtype()), device=device)
    return t.requires_grad_(True) if requires_grad else t


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    """A 2-D tensor with ones on the diagonal and zeros elsewhere.

    Args:
        n: the number of rows.
        m: the number of columns; None for ``n``.
        dtype: the dtype; None for the default dtype.
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the ``n x m`` tensor.
    """
    t = tensor(np.eye(n, m, dtype=dtype or _dtype.get_default_dtype()), device=device)
    return t.requires_grad_(True) if requires_grad else t


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """A tensor of samples of the uniform distribution on ``[0, 1)``.

    Args:
        *size: the shape, as ints or one sequence of ints.
        dtype: the dtype; None for the default dtype.
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.
        generator: a :class:`Generator`; None for the default one (see :func:`manual_seed`).

    Returns:
        Tensor: the new tensor.
    """
    t = empty(*size, dtype=dtype, device=device)
    t.uniform_(0.0, 1.0, generator=generator)
    return t.requires_grad_(True) if requires_grad else t


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """A tensor of samples of the standard normal distribution.

    Args:
        *size: the shape, as ints or one sequence of ints.
        dtype: the dtype; None for the default dtype.
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.
        generator: a :class:`Generator`; None for the default one (see :func:`manual_seed`).

    Returns:
        Tensor: the new tensor.
    """
    t = empty(*size, dtype=dtype, device=device)
    t.normal_(0.0, 1.0, generator=generator)
    return t.requires_grad_(True) if requires_grad else t


def randint(low, high=None, size=(), dtype=None, device=None, generator=None, requires_grad=False):
    """Integers drawn uniformly from ``[low, high)``: ``randint(high, size)`` or
    ``randint(low, high, size)``, as torch.

    Args:
        low: the lowest value (or ``high`` when ``high`` is None or a shape).
        high: one above the highest value.
        size: the shape.
        dtype: the dtype; None for int64.
        device: the device; default CPU.
        generator: a :class:`Generator`; None for the default one.
        requires_grad: accepted for torch compatibility (integer tensors cannot require grad).

    Returns:
        Tensor: the new tensor.
    """
    if isinstance(high, (tuple, list)) and size == ():
        low, high, size = 0, low, high  # randint(high, size)
    if high is None:
        low, high = 0, low
    arr = _random.integers(low, high, tuple(size), generator)
    return tensor(arr.astype(dtype or _dtype.int64), device=device)


def randperm(n, dtype=None, device=None, generator=None):
    """A random permutation of ``0 .. n-1``.

    Args:
        n: the number of values.
        dtype: the dtype; None for int64.
        device: the device; default CPU.
        generator: a :class:`Generator`; None for the default one.

    Returns:
        Tensor: a 1-D tensor.
    """
    return tensor(_random.permutation(n, generator).astype(dtype or _dtype.int64), device=device)


def rand_like(t, **kw):
    """A tensor of ``t``'s shape with samples of the uniform distribution on ``[0, 1)``.

    Args:
        t: the tensor whose shape (and, by default, dtype and device) is used.
        **kw: ``dtype=`` and ``device=`` override ``t``'s.

    Returns:
        Tensor: the new tensor.
    """
    return rand(*t.shape, dtype=kw.get("dtype", t.dtype), device=kw.get("device", t.device))


def randn_like(t, **kw):
    """A tensor of ``t``'s shape with samples of the standard normal distribution.

    Args:
        t: the tensor whose shape (and, by default, dtype and device) is used.
        **kw: ``dtype=`` and ``device=`` override ``t``'s.

    Returns:
        Tensor: the new tensor.
    """
    return randn(*t.shape, dtype=kw.get("dtype", t.dtype), device=kw.get("device", t.device))


# ***** ops as methods *****
def _method(fn):
    def m(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    m.__name__ = fn.__name__
    m.__doc__ = fn.__doc__
    return m


for _name, _fn in {
    "add": E.add, "sub": E.sub, "mul": E.mul, "div": E.div, "pow": E.pow, "neg": E.neg,
    "maximum": E.maximum, "minimum": E.minimum, "exp": E.exp, "log": E.log, "sqrt": E.sqrt,
    "rsqrt": E.rsqrt, "abs": E.abs, "sign": E.sign, "sin": E.sin, "cos": E.cos, "clamp": E.clamp,
    "clip": E.clamp, "relu": E.relu, "sigmoid": E.sigmoid, "tanh": E.tanh,
    "lt": E.lt_, "gt": E.gt_, "le": E.le_, "ge": E.ge_, "eq": E.eq_, "ne": E.ne_,
    "sum": R.sum, "mean": R.mean, "max": R.max, "min": R.min, "amax": R.amax,
    "argmax": R.argmax, "argmin": R.argmin, "var": R.var, "std": R.std,
    "logsumexp": R.logsumexp, "prod": R.prod,
    "reshape": S.reshape, "view": S.view, "flatten": S.flatten, "unflatten": S.unflatten,
    "permute": S.permute, "transpose": S.transpose, "t": S.t, "squeeze": S.squeeze,
    "unsqueeze": S.unsqueeze, "expand": S.expand, "expand_as": S.expand_as,
    "contiguous": S.contiguous, "clone": S.clone, "split": S.split, "chunk": S.chunk,
    "narrow": S.narrow, "matmul": S.matmul, "mm": S.matmul, "bmm": S.matmul,
    "gelu": E.gelu, "silu": E.silu, "log1p": E.log1p, "expm1": E.expm1, "erf": E.erf,
    "square": E.square, "reciprocal": E.reciprocal, "floor": E.floor, "ceil": E.ceil,
    "trunc": E.trunc, "round": E.round, "isnan": E.isnan, "isinf": E.isinf,
    "isfinite": E.isfinite, "logical_not": E.logical_not, "masked_fill": E.masked_fill,
    "cumsum": R.cumsum, "all": R.all, "any": R.any, "norm": R.norm,
    "gather": S.gather, "index_select": S.index_select, "tril": S.tril, "triu": S.triu,
    "repeat": S.repeat, "flip": S.flip, "sort": S.sort, "argsort": S.argsort, "topk": S.topk,
    "dot": S.dot, "outer": S.outer,
}.items():
    setattr(Tensor, _name, _method(_fn))


def _view_as(self, other):
    return S.reshape(self, *other.shape)


def _reshape_as(self, other):
    return S.reshape(self, *other.shape)


Tensor.view_as = _view_as
Tensor.reshape_as = _reshape_as
Tensor.swapaxes = Tensor.transpose
Tensor.swapdims = Tensor.transpose
Tensor.multiply = Tensor.mul
Tensor.divide = Tensor.div
Tensor.subtract = Tensor.sub
Tensor.true_divide = Tensor.div


def _where_method(self, condition, other):
    return E.where(condition, self, other)


def _softmax_method(self, dim, dtype=None):
    from .nn.functional import softmax
    return softmax(self, dim, dtype)


def _log_softmax_method(self, dim, dtype=None):
    from .nn.functional import log_softmax
    return log_softmax(self, dim, dtype)


def _new(fill):
    def new(self, size, *more, dtype=None, device=None, requires_grad=False, **kw):
        shape = S._shape_arg((size,) + more) if more or isinstance(size, int) else tuple(size)
        return fill(shape, dtype=dtype or self.dtype, device=device or self.device,
                    requires_grad=requires_grad, **kw)
    return new


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    return tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                  requires_grad=requires_grad)


def _new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    return full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device,
                requires_grad=requires_grad)


Tensor.where = _where_method
Tensor.softmax = _softmax_method
Tensor.log_softmax = _log_softmax_method
Tensor.new_zeros = _new(zeros)
Tensor.new_ones = _new(ones)
Tensor.new_empty = _new(empty)
Tensor.new_full = _new_full
Tensor.new_tensor = _new_tensor


def _inplace_method(name, fn):
    def m(self, *args, **kwargs):
        return self._inplace(name, lambda s: fn(s, *args, **kwargs))
    m.__name__ = name
    return m


for _name, _fn in {"abs_": E.abs, "sigmoid_": E.sigmoid, "tanh_": E.tanh, "log_": E.log,
                   "masked_fill_": E.masked_fill, "floor_": E.floor, "ceil_": E.ceil}.items():
    setattr(Tensor, _name, _inplace_method(_name, _fn))
