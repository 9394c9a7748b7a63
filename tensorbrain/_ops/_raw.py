"""``raw(t)``: the array behind a Tensor (``Tensor._data``; ``Tensor.data`` is torch's
history-free Tensor). The sequence layers read arrays through this one function."""
from __future__ import annotations


def raw(t):
    """The NumPy/CuPy array of Tensor ``t``."""
    return t._data
