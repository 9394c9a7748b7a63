"""``default_collate`` and ``default_convert``: turn a list of samples into a batch.

PyTorch's rules: tensors and NumPy arrays are stacked into a new leading dimension; Python
floats become a float64 tensor, ints an int64 tensor, bools a bool tensor; strings and bytes
stay a list; dicts are collated per key; namedtuples per field; other sequences are transposed
and collated element-wise (tuples come back as lists, as in PyTorch).

>>> import numpy as np
>>> from tensorbrain.utils.data import default_collate
>>> b = default_collate([(np.zeros(2), 1), (np.ones(2), 0)])
>>> b[0].shape, b[1].tolist()
(tb.Size([2, 2]), [1, 0])
"""
from __future__ import annotations

import collections.abc
import numbers

import numpy as np

from ... import _xp
from ...tensor import Tensor

__all__ = ["default_collate", "default_convert"]


def _stack(arrays):
    xp = _xp.get_array_module(arrays[0])
    try:
        return xp.stack(arrays)
    except ValueError:
        raise RuntimeError(f"default_collate: stack expects each tensor to be equal size, but "
                           f"got shapes {sorted({tuple(a.shape) for a in arrays})}; pad the "
                           f"samples or pass a collate_fn") from None


def default_collate(batch):
    """Collate a list of samples into a batch (see the module docstring for the rules)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return Tensor._wrap(_stack([b._data for b in batch]))
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "OSUV":
            raise TypeError(f"default_collate: NumPy arrays of dtype {elem.dtype} cannot be "
                            f"turned into tensors; convert them in the dataset or pass a "
                            f"collate_fn")
        return Tensor._wrap(_stack(batch))
    if isinstance(elem, np.generic):
        if elem.dtype.kind in "OSUV":
            return list(batch)
        return Tensor._wrap(np.array(batch, dtype=elem.dtype))
    if isinstance(elem, bool):
        return Tensor._wrap(np.array(batch, dtype=np.bool_))
    if isinstance(elem, numbers.Integral):
        return Tensor._wrap(np.array(batch, dtype=np.int64))
    if isinstance(elem, numbers.Real):
        return Tensor._wrap(np.array(batch, dtype=np.float64))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        try:
            return type(elem)({k: default_collate([d[k] for d in batch]) for k in elem})
        except TypeError:
            return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(b) != size for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(s)) for s in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, NumPy arrays, numbers, dicts "
                    f"or lists; found {type(elem).__name__}")


def default_convert(data):
    """What the DataLoader does to each sample when automatic batching is off
    (``batch_size=None``): NumPy arrays become tensors, containers are converted recursively."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "OSUV":
        return Tensor._wrap(data)
    if isinstance(data, collections.abc.Mapping):
        return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return [default_convert(d) for d in data]
    return data
