"""Tensor attributes that describe a tensor rather than compute with it: ``is_cpu``, ``nbytes``,
``itemsize``, ``layout``, ``get_device()``, ``storage_offset()``, ``is_signed()``..., and
torch's device and kind flags that are always False here (``is_quantized``, ``is_nested``,
``is_mkldnn``, ``is_xla``...: TensorBrain has no such tensors), from the table :data:`FALSE`.
Installed on Tensor by ``tensorbrain/tensor.py``.

Requires of the class it is installed on: ``_data`` (the NumPy/CuPy array), ``is_cuda``,
``grad_fn``, ``requires_grad``, ``data_ptr()``.
"""
from __future__ import annotations

from typing import Any

from . import _layout, _xp

#: name -> True when torch has it as a property, False when a method; always False here.
FALSE = {"is_quantized": True, "is_nested": True, "is_mkldnn": True, "is_vulkan": True,
         "is_xla": True, "is_ipu": True, "is_maia": True, "is_mtia": True,
         "is_sparse_csr": True, "volatile": True, "is_distributed": False, "is_conj": False,
         "is_neg": False, "is_inference": False}


class InfoMethods:
    """The attributes (copied onto Tensor)."""

    # the Tensor attributes these methods use (the class they are copied onto defines them)
    _data: Any
    is_cuda: bool
    data_ptr: Any

    @property
    def is_cpu(self) -> bool:
        """True when the data lives in host memory."""
        return not self.is_cuda

    @property
    def nbytes(self) -> int:
        """The size of the elements in bytes (``numel() * element_size()``)."""
        return int(self._data.nbytes)

    @property
    def itemsize(self) -> int:
        """The size of one element in bytes."""
        return int(self._data.itemsize)

    @property
    def layout(self):
        """``tb.strided`` (``tb.sparse_coo`` for a sparse tensor)."""
        return _layout.strided

    @property
    def grad_dtype(self):
        """The dtype ``.grad`` has: the tensor's own."""
        return self._data.dtype

    def ndimension(self) -> int:
        """The number of dimensions (torch's old name of ``dim()``)."""
        return self._data.ndim

    def get_device(self) -> int:
        """The GPU index of a CUDA tensor, -1 for a CPU tensor (``torch.Tensor.get_device``)."""
        return int(self._data.device.id) if self.is_cuda else -1

    def is_signed(self) -> bool:
        """Whether the dtype holds negative numbers (every dtype but bool and uint8)."""
        return self._data.dtype.kind not in "bu"

    def is_complex(self) -> bool:
        """Whether the dtype is complex (complex64, complex128)."""
        return self._data.dtype.kind == "c"

    def is_nonzero(self) -> bool:
        """The truth of a one-element tensor.

        Raises:
            RuntimeError: the tensor does not have exactly one element.
        """
        if self._data.size != 1:
            many = "no values" if self._data.size == 0 else "more than one value"
            raise RuntimeError(f"Boolean value of Tensor with {many} is ambiguous")
        return bool(_xp.to_numpy(self._data).reshape(()))

    def is_same_size(self, other) -> bool:
        """Whether ``other`` has the same shape.

        Args:
            other: a tensor.
        """
        return tuple(self._data.shape) == tuple(other._data.shape)

    def is_set_to(self, other) -> bool:
        """Whether both tensors view the same memory with the same shape and strides.

        Args:
            other: a tensor.
        """
        a, b = self._data, other._data
        return (self.data_ptr() == other.data_ptr() and a.shape == b.shape
                and a.strides == b.strides and a.dtype == b.dtype)

    def storage_offset(self) -> int:
        """Where this tensor's first element sits in its storage, in elements.

        Returns:
            int: 0 for a tensor that owns its memory; a view's offset into its base's.
        """
        base = self._data
        while getattr(base, "base", None) is not None and hasattr(base.base, "dtype"):
            base = base.base
        start = self.data_ptr()
        origin = (int(base.data.ptr) if self.is_cuda
                  else int(base.__array_interface__["data"][0]))
        return (start - origin) // self._data.itemsize

    def dim_order(self) -> tuple:
        """The dimensions from outermost to innermost in memory (``(0, 1, ...)`` when
        contiguous), as ``torch.Tensor.dim_order``."""
        strides = self._data.strides
        return tuple(sorted(range(len(strides)), key=lambda d: (-abs(strides[d]), d)))

    def const_data_ptr(self) -> int:
        """``data_ptr()`` (torch's read-only form)."""
        return self.data_ptr()

    def record_stream(self, stream) -> None:
        """Accepted and does nothing: see ``tensorbrain/_cuda_streams.py`` on streams.

        Args:
            stream: a ``tb.cuda.Stream``.
        """


def _false(name: str, is_property: bool):
    def flag(self) -> bool:
        return False
    flag.__name__ = flag.__qualname__ = name
    flag.__doc__ = f"Always False: TensorBrain has no such tensors (torch's ``Tensor.{name}``)."
    return property(flag, doc=flag.__doc__) if is_property else flag


for _name, _is_property in FALSE.items():
    setattr(InfoMethods, _name, _false(_name, _is_property))
del _name, _is_property

__all__ = ["FALSE", "InfoMethods"]
