"""``DistributedSampler``: each rank reads its own 1/N of a dataset, the same split on every rank.

PyTorch's semantics (``torch/utils/data/distributed.py``): the indices are (optionally) shuffled
with a generator seeded by ``seed + epoch``, so every rank draws the *same* permutation without
talking to the others; the list is padded by wrapping around (or trimmed with ``drop_last``) to a
multiple of ``num_replicas``; rank ``r`` takes every ``num_replicas``-th index starting at ``r``.
Call :meth:`set_epoch` at the start of every epoch, or every epoch repeats the same order
(pytorch/pytorch#31771).

>>> from tensorbrain.utils.data.distributed import DistributedSampler
>>> data = list(range(10))
>>> [list(DistributedSampler(data, num_replicas=3, rank=r, shuffle=False)) for r in range(3)]
[[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
>>> len(DistributedSampler(data, num_replicas=3, rank=0, drop_last=True))
3
"""
from __future__ import annotations

import math

import numpy as np

from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _group_rank_and_size():
    """(rank, world size) of the default process group, or a clear error when there is none."""
    try:
        from ... import distributed as dist
        available = dist.is_available() and dist.is_initialized()
    except (ImportError, AttributeError):
        available = False
    if not available:
        raise RuntimeError("DistributedSampler: num_replicas and rank were not given and no "
                           "default process group is initialized; call "
                           "tb.distributed.init_process_group(...) first (tbrun sets RANK and "
                           "WORLD_SIZE for it) or pass num_replicas= and rank= explicitly")
    return dist.get_rank(), dist.get_world_size()


class DistributedSampler(Sampler):
    """Restrict data loading to this rank's subset of ``dataset`` (``torch.utils.data.DistributedSampler``).

    ``num_replicas``/``rank`` default to the default process group's world size and rank.
    With ``shuffle`` the order changes with :meth:`set_epoch` and is identical on every rank for
    the same ``seed`` and epoch. Without ``drop_last`` the tail is padded with indices from the
    start so every rank gets ``ceil(len / num_replicas)`` samples; with it, the tail is dropped
    so every rank gets ``floor(len / num_replicas)``: with fewer samples than ranks that is none,
    which a ``UserWarning`` says (torch is silent).

    Args:
        dataset (Dataset): a map-style dataset (``len(dataset)`` is used).
        num_replicas (int | None): how many ranks share the dataset; None: the default process
            group's world size.
        rank (int | None): this rank, ``0 <= rank < num_replicas``; None: the default process
            group's rank.
        shuffle (bool): shuffle the indices, by ``seed + epoch``.
        seed (int): the shuffle's seed; the same on every rank.
        drop_last (bool): drop the tail so every rank gets the same number of distinct samples,
            instead of padding it with samples from the start.

    Raises:
        RuntimeError: ``num_replicas``/``rank`` not given and no process group is initialized.
        ValueError: ``num_replicas < 1`` or ``rank`` out of range.

    Example:
        >>> from tensorbrain.utils.data import DistributedSampler
        >>> list(DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False))
        [1, 3, 0]
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            g_rank, g_size = _group_rank_and_size()
            num_replicas = g_size if num_replicas is None else num_replicas
            rank = g_rank if rank is None else rank
        if int(num_replicas) < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be >= 1, got {num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = int(num_replicas)
        self.rank = int(rank)
        self.epoch = 0
        self.drop_last = bool(drop_last)
        n = len(dataset)
        if self.drop_last and n % self.num_replicas != 0:
            # Trim so every rank gets the same count: ceil((n - R) / R) == floor(n / R).
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        if self.drop_last and self.num_samples == 0 and n > 0:
            import warnings
            warnings.warn(f"DistributedSampler: drop_last=True with {n} sample(s) and "
                          f"{self.num_replicas} replicas gives every rank 0 samples; use "
                          f"drop_last=False (the tail is padded with repeated samples) or fewer "
                          f"ranks", UserWarning, stacklevel=2)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)

    def _all_indices(self) -> np.ndarray:
        """The padded/trimmed index list of all ranks (identical on every rank)."""
        n = len(self.dataset)
        if self.shuffle:
            # A fresh generator per epoch: the order depends only on seed + epoch, never on how
            # many random numbers this process drew before.
            indices = np.random.default_rng(self.seed + self.epoch).permutation(n)
        else:
            indices = np.arange(n)
        if not self.drop_last:
            pad = self.total_size - n
            if pad > 0:
                indices = np.concatenate([indices, np.resize(indices, pad)])  # wraps, as torch
        else:
            indices = indices[:self.total_size]
        assert len(indices) == self.total_size
        return indices

    def __iter__(self):
        return iter(self._all_indices()[self.rank:self.total_size:self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch that seeds the next shuffle; call it before each epoch's loop."""
        self.epoch = int(epoch)

    def __repr__(self):
        return (f"DistributedSampler(num_replicas={self.num_replicas}, rank={self.rank}, "
                f"shuffle={self.shuffle}, seed={self.seed}, drop_last={self.drop_last}, "
                f"num_samples={self.num_samples})")
