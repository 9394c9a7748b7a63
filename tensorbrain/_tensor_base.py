"""``TensorBase``: the Tensor's storage, properties, conversion and autograd bookkeeping.

This is the lowest layer of the tensor: it imports no op. The op implementations
(``tensorbrain/_ops``) and the autograd engine build and read tensors through this module, and
``tensorbrain/tensor.py`` defines the class users see, ``class Tensor(TensorBase, ...)``, whose
methods call ops: its own (operators, ``to``, ``backward``, the in-place arithmetic), the op
table's (``TableMethods``, generated from ``tensorbrain/_ops/table.py`` into
``tensorbrain/_ops/generated.py``), ``Adapters``, ``LegacyMethods`` and ``HookMethods``. Every method is an
ordinary definition in one of these classes: grep and an editor find it.

The ops sit below ``tensorbrain.tensor`` and cannot import its class, so they make tensors
through this one: ``TensorBase._wrap`` and ``_ops.core.make`` build instances of the class that
declared itself with ``made=True`` (``tensorbrain.tensor.Tensor``), as torch's C++ makes
``torch.Tensor`` instances from the class it registered at start-up; ``dense.to_sparse()`` makes
the sparse class that declared ``made_sparse=True`` (``tensorbrain.sparse.SparseTensor``, a
subclass of Tensor) in the same way. ``isinstance(x, TensorBase)``
is true of every tensor. Arrays from user data (``tb.tensor``'s dtype and device rules) are made
in ``_array_data.py``.

``Tensor._data`` is the array itself: code inside TensorBrain that needs raw speed (optimizers,
collectives) works on it directly and in place. ``Tensor.data`` is torch's: a Tensor sharing the
storage, without history.
"""
from __future__ import annotations

import os as _os
from typing import Any

import numpy as np

from . import _dtype, _tensor_str, _xp
from ._array_data import _array_from, device_of
from ._device import device
from .autograd import grad_mode


class TensorBase:
    """The storage and autograd state of every tensor; see the module docstring.

    Users make tensors with ``tb.Tensor(data)`` (``tensorbrain.tensor.Tensor``) or the factory
    functions; this class is never instantiated itself.

    Args:
        data: nested lists, scalars, NumPy/CuPy arrays or tensors (copied).
        dtype: the dtype; inferred from ``data`` when None (Python floats give the default dtype).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a :class:`device`; default CPU.
        requires_grad: whether autograd records operations on this tensor.
    """
    __slots__ = ("_data", "requires_grad", "grad", "grad_fn", "_version", "_hooks",
                 "_post_acc_hooks", "_base", "__weakref__", "__dict__")

    #: The class tensors are made as: the subclass that declared ``made=True``
    #: (``tensorbrain.tensor.Tensor``); see the module docstring.
    _made: type
    #: The class sparse COO tensors are made as, for ``dense.to_sparse()``: the subclass of
    #: Tensor that declared ``made_sparse=True`` (``tensorbrain.sparse.SparseTensor``).
    _made_sparse: type
    #: The CSR/CSC class (``declared made_compressed=True``: ``_sparse_compressed.py``'s).
    _made_compressed: Any

    #: Torch's ``__torch_dispatch__`` shape: an op whose input's class sets this hands its result
    #: to it, ``handler(result, inputs, name, along)`` (``_ops.core.make``). DTensor sets it;
    #: None for every other tensor.
    __tb_dispatch__: Any = None

    def __init_subclass__(cls, made: bool = False, made_sparse: bool = False,
                          made_compressed: bool = False, **kwargs):
        super().__init_subclass__(**kwargs)
        if made:
            TensorBase._made = cls
        if made_sparse:
            TensorBase._made_sparse = cls
        if made_compressed:
            TensorBase._made_compressed = cls

    def __init__(self, data, dtype=None, device=None, requires_grad=False):
        self._init_from(_array_from(data._data if isinstance(data, TensorBase) else data,
                                    dtype, device))
        if requires_grad:
            self.requires_grad_(True)

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

    def _fresh_graph_fields(self) -> None:
        """No graph node, hooks or view base yet: for subclasses that do not hold one array
        (sparse, nested) and so skip ``_init_from`` (which sets the same fields inline)."""
        self.grad_fn = None
        self._version = [0]
        self._hooks = None
        self._post_acc_hooks = None
        self._base = None

    @staticmethod
    def _wrap(array, requires_grad=False):
        """A tensor around ``array`` without copying (internal fast path)."""
        t = _new(TensorBase._made)
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
        return TensorBase._wrap(self._data)

    @data.setter
    def data(self, value):
        """``t.data = other``: make ``t`` use ``other``'s storage (a Tensor or an array).

        Raises:
            TypeError: ``value`` is neither a Tensor nor a NumPy/CuPy array.
        """
        array = value._data if isinstance(value, TensorBase) else value
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
        return device_of(self._data)

    @property
    def is_cuda(self) -> bool:
        """True when the data lives on a CUDA device."""
        return _xp.is_cupy_array(self._data)

    @property
    def is_meta(self) -> bool:
        """True on the meta device: a shape and a dtype, no values (``Module.to_empty`` gives
        storage)."""
        return _xp.is_meta(self._data)

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
        """A copy in page-locked host memory, which CUDA copies read at the link's full speed.

        With CUDA (CuPy) the copy lives in ``cupyx.empty_pinned`` memory, so ``.to("cuda")``
        of it runs at the pinned-memory rate (benchmarks/gpu/copy_bandwidth.py). Without CUDA
        there is nothing to pin for and this returns ``self`` (torch's CPU build raises here;
        returning self keeps ``DataLoader(pin_memory=True)`` scripts running, as torch's
        DataLoader does with a warning). The copy is not recorded by autograd.

        Args:
            device: ignored (accepted for torch compatibility).

        Returns:
            Tensor: the pinned copy (``self`` when it is pinned already, or without CUDA).

        Raises:
            RuntimeError: for a CUDA tensor (only host tensors can be pinned).
        """
        if self.is_cuda:
            raise RuntimeError(f"cannot pin a CUDA tensor (device {self.device}): only CPU "
                               "tensors can be pinned")
        if not _xp.cuda_available() or self.is_pinned():
            return self
        import cupyx
        buf = cupyx.empty_pinned(self._data.shape, self._data.dtype)
        buf[...] = self._data
        return type(self)._wrap(buf)

    def is_pinned(self, device=None) -> bool:
        """True when the tensor's host memory is page-locked (made by :meth:`pin_memory`).

        Args:
            device: ignored (accepted for torch compatibility).
        """
        if self.is_cuda or not _xp.cuda_available() or self._data.size == 0:
            return False
        rt = _xp.cupy().cuda.runtime
        return rt.pointerGetAttributes(self._data.ctypes.data).type == rt.memoryTypeHost

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

    def detach(self):
        """A new tensor sharing this tensor's data, cut from the autograd graph."""
        t = TensorBase._wrap(self._data)
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
            old = TensorBase._wrap(self._data.copy() if reads_input else self._data, self.requires_grad)
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
        self._data.fill(value.item() if isinstance(value, TensorBase) else value)
        self._version[0] += 1
        if grad_mode.is_grad_enabled() and self.grad_fn is not None:
            self.grad_fn = None
            self.requires_grad = False
            self._write_back()
        return self

    def fill_diagonal_(self, fill_value, wrap=False):
        """Fill the main diagonal in place, as ``torch.Tensor.fill_diagonal_`` (and NumPy's
        ``fill_diagonal``): positions ``(i, i, ..., i)``; differentiable (the filled positions
        get no gradient).

        >>> import tensorbrain as tb
        >>> tb.zeros(2, 3).fill_diagonal_(5).tolist()
        [[5.0, 0.0, 0.0], [0.0, 5.0, 0.0]]

        Args:
            fill_value: the value to write.
            wrap: for a 2-D tensor taller than wide, start the diagonal again every
                ``columns + 1`` rows (False: stop after the first square block).

        Returns:
            Tensor: self.

        Raises:
            RuntimeError: the tensor has fewer than 2 dimensions, or more than 2 of unequal
                length.
        """
        shape = tuple(self._data.shape)
        if len(shape) < 2:
            raise RuntimeError("dimensions must larger than 1")
        if len(shape) > 2 and len(set(shape)) != 1:
            raise RuntimeError("all dimensions of input must be of equal length")
        mask = np.zeros(shape, dtype=bool)
        np.fill_diagonal(mask, True, wrap=bool(wrap))
        mask_t = TensorBase._wrap(_xp.get_array_module(self._data).asarray(mask))
        value = fill_value.item() if isinstance(fill_value, TensorBase) else fill_value
        return self._inplace("fill_diagonal_", lambda t: t.masked_fill(mask_t, value),
                             reads_input=False)

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
        return _tensor_str.tensor_repr(self)   # how tensors print (tb.set_printoptions)





_ARRAY_ONLY = frozenset({"flags", "strides", "itemsize", "nbytes", "astype", "ravel", "ctypes",
                         "copy", "fill", "base", "tobytes"})


_new = object.__new__


class Size(tuple):
    """The shape of a tensor: a tuple, as ``torch.Size``."""

    __module__ = "tensorbrain.tensor"   # its public home; checkpoints name it so

    def numel(self):
        """The number of elements of a tensor of this shape (the product of the sizes)."""
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return f"tb.Size([{', '.join(map(str, self))}])"


def _req(x):
    return isinstance(x, TensorBase) and x.requires_grad
