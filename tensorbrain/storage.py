"""``tb.storage`` (``torch.storage``): the memory behind a tensor, as ``Tensor.storage()`` and
``Tensor.untyped_storage()`` give it.

TensorBrain's storage is the NumPy/CuPy array a tensor views (its ``base`` when the tensor is a
view): :class:`UntypedStorage` reports its bytes (``nbytes()``, ``size()``, ``data_ptr()``,
``device``) and :class:`TypedStorage` its elements (``size()``, ``dtype``, ``tolist()``,
indexing). Programs use them to ask whether two tensors share memory
(``a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()``) and how large a tensor's
memory is. Resizing a storage (``resize_``, FSDP-style freeing) is refused: arrays own their
memory here.

>>> import tensorbrain as tb
>>> x = tb.zeros(4)
>>> x[1:].untyped_storage().data_ptr() == x.untyped_storage().data_ptr(), x.storage().size()
(True, 4)
"""
from __future__ import annotations

from typing import Any

from . import _xp
from ._unsupported import NotSupportedError


def _root(array):
    while getattr(array, "base", None) is not None and hasattr(array.base, "dtype"):
        array = array.base
    return array


def _ptr(array) -> int:
    if _xp.is_cupy_array(array):
        return int(array.data.ptr)
    return int(array.__array_interface__["data"][0])


class UntypedStorage:
    """A tensor's memory, in bytes (``torch.UntypedStorage``).

    Args:
        array: the array (its root is the storage).
    """

    def __init__(self, array):
        self._array = _root(array)

    def nbytes(self) -> int:
        """The size in bytes."""
        return int(self._array.nbytes)

    def size(self) -> int:
        """The size in bytes (an untyped storage counts bytes)."""
        return self.nbytes()

    __len__ = size

    def element_size(self) -> int:
        """1 (bytes)."""
        return 1

    def data_ptr(self) -> int:
        """The address of the first byte."""
        return _ptr(self._array)

    @property
    def device(self):
        """Where the memory is."""
        from ._device import CPU, device
        return device("cuda", self._array.device.id) if _xp.is_cupy_array(self._array) else CPU

    @property
    def is_cuda(self) -> bool:
        """Whether the memory is on a GPU."""
        return _xp.is_cupy_array(self._array)

    def resize_(self, size):
        """Refused: an array's memory cannot be resized in place here.

        Args:
            size: the new size in bytes.

        Raises:
            NotImplementedError: always.
        """
        raise NotSupportedError("torch.UntypedStorage.resize_ is not supported by TensorBrain: "
                                "a tensor's memory is its NumPy/CuPy array. Drop the tensor (or "
                                "assign tensor.data = an empty tensor) to free it instead")

    def __repr__(self):
        return f"<UntypedStorage nbytes={self.nbytes()} device={self.device}>"


class TypedStorage(UntypedStorage):
    """A tensor's memory, in elements of its dtype (``torch.TypedStorage``).

    Args:
        array: the array (its root is the storage).
    """

    @property
    def dtype(self):
        """The element dtype."""
        return self._array.dtype

    def size(self) -> int:
        """The number of elements."""
        return int(self._array.size)

    __len__ = size

    def element_size(self) -> int:
        """The size of one element in bytes."""
        return int(self._array.itemsize)

    def tolist(self) -> list:
        """The elements, in memory order."""
        return _xp.to_numpy(self._array).reshape(-1).tolist()

    def __getitem__(self, i):
        return self._array.reshape(-1)[i].item()

    def untyped(self) -> UntypedStorage:
        """The same memory, in bytes."""
        return UntypedStorage(self._array)

    def __repr__(self):
        return f"<TypedStorage dtype={self.dtype} size={self.size()} device={self.device}>"


def _legacy_storage(name, dtype):
    def from_buffer(cls, buffer, byte_order="native", count=-1, offset=0):
        import numpy as np
        arr = np.frombuffer(buffer, dtype=np.dtype(dtype).newbyteorder(
            {"native": "=", "little": "<", "big": ">"}[byte_order]), count=count, offset=offset)
        return cls(arr.astype(np.dtype(dtype)))

    def new(cls, size=0):
        import numpy as np
        return cls(np.zeros(int(size), dtype=dtype))
    return type(name, (TypedStorage,), {
        "__doc__": f"``torch.{name}``: a :class:`TypedStorage` of {dtype} (legacy); "
                   f"``{name}.from_buffer(bytes)`` reads one from raw bytes.",
        "__module__": "tensorbrain.storage", "from_buffer": classmethod(from_buffer),
        "__new__": lambda cls, *a: object.__new__(cls), "_legacy_dtype": dtype,
        "__init__": lambda self, data=0: TypedStorage.__init__(
            self, data if hasattr(data, "dtype") else new(type(self), data)._array)})


#: torch's legacy storage classes: name -> dtype.
LEGACY = {"ByteStorage": "uint8", "CharStorage": "int8", "ShortStorage": "int16",
          "IntStorage": "int32", "LongStorage": "int64", "FloatStorage": "float32",
          "DoubleStorage": "float64", "HalfStorage": "float16", "BoolStorage": "bool"}
for _name, _dt in LEGACY.items():
    globals()[_name] = _legacy_storage(_name, _dt)
del _name, _dt


def is_storage(obj) -> bool:
    """Whether ``obj`` is a storage (``torch.is_storage``).

    Args:
        obj: any object.
    """
    return isinstance(obj, UntypedStorage)


class StorageMethods:
    """``Tensor.storage()``, ``untyped_storage()``, ``storage_type()`` (a base class of
    ``tensorbrain.tensor.Tensor``)."""

    _data: Any   # the Tensor's array (TensorBase defines it)

    def storage(self) -> TypedStorage:
        """The tensor's memory in elements (see the module docstring)."""
        return TypedStorage(self._data)

    def untyped_storage(self) -> UntypedStorage:
        """The tensor's memory in bytes."""
        return UntypedStorage(self._data)

    def storage_type(self) -> type:
        """:class:`TypedStorage`."""
        return TypedStorage


__all__ = ["StorageMethods", "TypedStorage", "UntypedStorage", "is_storage"]
