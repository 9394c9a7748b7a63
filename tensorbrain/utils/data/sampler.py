"""Samplers: which indices a DataLoader reads, and in what order (``torch.utils.data``'s set).

Random samplers draw from the ``generator`` you pass (a ``tb.Generator``), so a seeded generator
gives the same order every run; without one each epoch's order is seeded from TensorBrain's
global generator (``tb.manual_seed`` makes that reproducible too).

>>> import tensorbrain as tb
>>> from tensorbrain.utils.data import BatchSampler, SequentialSampler
>>> list(BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=False))
[[0, 1, 2], [3, 4, 5], [6]]
"""
from __future__ import annotations

import numpy as np

from ... import _random

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]


def _epoch_rng(generator):
    """The NumPy generator to draw one epoch from: the caller's, or a fresh one seeded from the
    global generator (PyTorch does the same: a new seed per epoch when no generator is given)."""
    if generator is not None:
        return generator.rng
    seed = int(_random.integers(0, 2 ** 63 - 1, (), None))
    return np.random.default_rng(seed)


class Sampler:
    """Base class: ``__iter__`` yields indices (or lists of indices for batch samplers)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation per epoch, or ``num_samples`` draws with ``replacement=True``."""

    def __init__(self, data_source, replacement: bool = False, num_samples=None, generator=None):
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        """How many indices one pass yields (``len(data_source)`` unless given)."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        rng = _epoch_rng(self.generator)
        return _random_indices(rng, n, self.num_samples, self.replacement)

    def __len__(self):
        return self.num_samples


def _random_indices(rng, n, num_samples, replacement, chunk=1 << 16):
    """Draw lazily, ``chunk`` at a time: ``num_samples=10**10`` must not allocate 10**10 ints.
    Without replacement, whole permutations follow each other, the last one cut (torch's rule)."""
    left = num_samples
    while left > 0:
        if replacement:
            draw = rng.integers(0, n, min(left, chunk))
        else:
            draw = rng.permutation(n)[:left]
        left -= len(draw)
        yield from draw.tolist()


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order each epoch."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = list(indices), generator

    def __iter__(self):
        perm = _epoch_rng(self.generator).permutation(len(self.indices))
        return (self.indices[i] for i in perm.tolist())

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probability proportional to ``weights``."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        w = np.asarray(weights.tolist() if hasattr(weights, "tolist") else weights,
                       dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        if not isinstance(num_samples, int) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
            raise ValueError("weights must be finite, non-negative and not all zero")
        if not replacement and num_samples > int((w > 0).sum()):
            raise RuntimeError(f"cannot draw {num_samples} samples without replacement from "
                               f"{int((w > 0).sum())} non-zero weights")
        self.weights, self.num_samples = w, num_samples
        self.replacement, self.generator = replacement, generator

    def __iter__(self):
        rng = _epoch_rng(self.generator)
        p = self.weights / self.weights.sum()
        return iter(rng.choice(len(p), self.num_samples, replace=self.replacement, p=p).tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size`` (the last one shorter
    unless ``drop_last``)."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
