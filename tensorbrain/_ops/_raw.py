"""``raw(t)``: the array behind a Tensor.

The array is ``Tensor.data`` today; the torch-compatibility work moves it to ``Tensor._data``
(``Tensor.data`` becoming torch's history-free Tensor). The sequence layers read through this
one function so they work on either side of that change.
"""
from __future__ import annotations


def raw(t):
    """The NumPy/CuPy array of Tensor ``t``."""
    try:
        return t._data
    except AttributeError:
        return t.data
