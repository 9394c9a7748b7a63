"""Datasets: ``Dataset``, ``IterableDataset``, ``TensorDataset``, ``Subset``, ``ConcatDataset``
and ``random_split``, with ``torch.utils.data``'s semantics.

>>> import tensorbrain as tb
>>> from tensorbrain.utils.data import TensorDataset, random_split
>>> ds = TensorDataset(tb.arange(10), tb.arange(10) * 2)
>>> ds[3]
(tensor(3), tensor(6))
>>> train, test = random_split(ds, [0.8, 0.2], generator=tb.Generator().manual_seed(0))
>>> len(train), len(test)
(8, 2)
"""
from __future__ import annotations

import bisect
import math

import numpy as np

from ... import _random
from ...tensor import Tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
           "random_split"]


class Dataset:
    """A map-style data set: subclasses implement ``__getitem__(index)`` and ``__len__``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream: subclasses implement ``__iter__``. With ``num_workers > 0`` every worker runs
    its own copy of the iterator; use ``get_worker_info()`` inside ``__iter__`` to split work."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other):
        raise TypeError("IterableDatasets cannot be concatenated with +")


class TensorDataset(Dataset):
    """Samples are ``tuple(t[i] for t in tensors)``; all tensors share their first dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset takes tb.Tensors, got {type(t).__name__}; wrap "
                                f"NumPy arrays with tb.from_numpy")
        n = tensors[0].shape[0] if tensors[0].dim() else None
        for t in tensors:
            if t.dim() == 0 or t.shape[0] != n:
                raise ValueError(f"Size mismatch between tensors: shapes "
                                 f"{[tuple(x.shape) for x in tensors]} do not share a first "
                                 f"dimension")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(Tensor._wrap(t._data[index]) for t in self.tensors)

    def _fetch_batch(self, indices):
        # What default_collate would build from the samples (a stack of rows), made by one
        # fancy-index per tensor instead of len(indices) row views and a stack.
        idx = np.asarray(indices, dtype=np.int64)
        return [Tensor._wrap(t._data[_on_device(idx, t._data)]) for t in self.tensors]

    def __len__(self):
        return self.tensors[0].shape[0]


def _on_device(idx, like):
    if type(like) is np.ndarray:
        return idx
    from ... import _xp
    return _xp.get_array_module(like).asarray(idx)


class Subset(Dataset):
    """The items of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = list(indices) if not isinstance(indices, list) else indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems is not None:
            return getitems([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several map-style data sets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))

    def __len__(self):
        return int(self.cumulative_sizes[-1])

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        start = 0 if d == 0 else int(self.cumulative_sizes[d - 1])
        return self.datasets[d][idx - start]


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping random ``Subset``s of the given lengths.

    ``lengths`` are counts summing to ``len(dataset)``, or fractions summing to 1 (the
    remainder of the floors is handed out round-robin, as in PyTorch). Pass a seeded
    ``tb.Generator`` for a reproducible split.
    """
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for frac in lengths:
            if not 0 <= frac <= 1:
                raise ValueError(f"Fraction {frac} is not between 0 and 1")
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError(f"Sum of input lengths ({sum(lengths)}) does not equal the length of "
                         f"the input dataset ({n})!")
    perm = _random.permutation(n, generator).tolist()
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[offset:offset + length]))
        offset += length
    return out
