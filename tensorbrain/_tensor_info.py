"""Tensor attributes that describe a tensor rather than compute with it: ``is_cpu``, ``nbytes``,
``itemsize``, ``layout``, ``get_device()``, ``storage_offset()``, ``is_signed()``..., and
torch's device and kind flags that are False for a dense tensor (``is_quantized``,
``is_mkldnn``, ``is_xla``...: TensorBrain has no such tensors; ``is_nested`` and
``is_sparse_csr``, which the nested and CSR subclasses set), from the table :data:`FALSE`.
A base class of ``tensorbrain.tensor.Tensor``.

Requires of the class it is installed on: ``_data`` (the NumPy/CuPy array), ``is_cuda``,
``grad_fn``, ``requires_grad``, ``data_ptr()``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _layout

def _false(name: str, is_property: bool):
    def flag(self) -> bool:
        return False
    flag.__name__ = flag.__qualname__ = name
    flag.__doc__ = f"Always False: TensorBrain has no such tensors (torch's ``Tensor.{name}``)."
    return property(flag, doc=flag.__doc__) if is_property else flag


class InfoMethods:
    """The attributes (a base class of Tensor)."""

    # the Tensor attributes these methods use (TensorBase defines them)
    _data: Any
    data_ptr: Any

    if TYPE_CHECKING:
        @property
        def is_cuda(self) -> bool: ...

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

    # torch's device and kind flags, always False here
    is_quantized = _false("is_quantized", is_property=True)
    is_nested = _false("is_nested", is_property=True)
    is_mkldnn = _false("is_mkldnn", is_property=True)
    is_vulkan = _false("is_vulkan", is_property=True)
    is_xla = _false("is_xla", is_property=True)
    is_ipu = _false("is_ipu", is_property=True)
    is_maia = _false("is_maia", is_property=True)
    is_mtia = _false("is_mtia", is_property=True)
    is_sparse_csr = _false("is_sparse_csr", is_property=True)
    volatile = _false("volatile", is_property=True)
    is_distributed = _false("is_distributed", is_property=False)
    is_conj = _false("is_conj", is_property=False)
    is_neg = _false("is_neg", is_property=False)
    is_inference = _false("is_inference", is_property=False)


__all__ = ["InfoMethods"]
