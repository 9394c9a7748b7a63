"""Sharding a DataLoader across processes the way Accelerate does (``split_batches=False``).

Process ``i`` of ``n`` gets batches ``i, i+n, i+2n, ...`` of the original batch sampler, so one
step of ``n`` processes at batch ``b`` sees the same samples as one process at batch ``n*b``.
With ``even_batches`` (the default) the last round is completed with samples from the start of
the epoch, so every process gets the same number of full batches; ``gather_for_metrics`` drops
those duplicates again.
"""
from __future__ import annotations

import numpy as np

from ..utils.data import DataLoader, RandomSampler, Sampler


class SeedableRandomSampler(Sampler):
    """A random permutation drawn from ``seed + epoch``: identical on every process.

    Args:
        data_source: the data set (only its length is used).
        seed: the shared seed (the :class:`Accelerator` agrees on one across processes).
    """

    def __init__(self, data_source, seed: int):
        self.data_source = data_source
        self.seed = int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Choose the permutation of ``epoch`` (as ``DistributedSampler.set_epoch``).

        Args:
            epoch: the epoch.
        """
        self.epoch = int(epoch)

    def __iter__(self):
        order = np.random.default_rng(self.seed + self.epoch).permutation(len(self.data_source))
        self.epoch += 1
        return iter(order.tolist())

    def __len__(self):
        return len(self.data_source)


class BatchSamplerShard(Sampler):
    """This process's batches of ``batch_sampler``: every ``num_processes``-th, from
    ``process_index``; ``even_batches`` completes the last round from the epoch's start.

    Args:
        batch_sampler: the original batch sampler.
        num_processes: ``n``.
        process_index: this process's index.
        even_batches: complete the last round with samples from the start of the epoch.
        drop_last: drop the incomplete last round.
    """

    def __init__(self, batch_sampler, num_processes: int, process_index: int,
                 even_batches: bool = True, drop_last: bool = False):
        self.batch_sampler = batch_sampler
        self.num_processes, self.process_index = num_processes, process_index
        self.even_batches, self.drop_last = even_batches, drop_last
        self.batch_size = getattr(batch_sampler, "batch_size", None)

    def _all_batches(self) -> list:
        batches = [list(b) for b in self.batch_sampler]
        n, size = self.num_processes, self.batch_size
        if not batches or n == 1:
            return batches
        if self.drop_last:
            full = [b for b in batches if len(b) == size] if size else batches
            return full[:len(full) - len(full) % n]
        if not self.even_batches or size is None:
            return batches
        start = [i for b in batches[:n] for i in b]
        while len(start) < n * size:
            start += start
        cursor = 0
        if len(batches[-1]) < size:
            need = size - len(batches[-1])
            batches[-1] = batches[-1] + start[:need]
            cursor = need
        while len(batches) % n:
            batches.append(start[cursor:cursor + size])
            cursor += size
        return batches

    def __iter__(self):
        return iter(self._all_batches()[self.process_index::self.num_processes])

    def __len__(self):
        total = len(self.batch_sampler)
        n = self.num_processes
        if self.drop_last:
            return total // n
        if self.even_batches:
            return -(-total // n)
        return total // n + (1 if self.process_index < total % n else 0)


class DataLoaderShard(DataLoader):
    """A DataLoader over this process's share of the batches; tells the Accelerator when it is
    at its last batch (for gradient accumulation and ``gather_for_metrics``).

    Args:
        loader: the original DataLoader.
        state: the Accelerator's ``GradientState``.
        num_processes: ``n``.
        process_index: this process's index.
        even_batches: as :class:`BatchSamplerShard`.
        seed: the shared seed for shuffled loaders.
    """

    def __init__(self, loader: DataLoader, state, num_processes: int, process_index: int,
                 even_batches: bool, seed: int):
        sampler = loader.sampler
        if isinstance(sampler, RandomSampler):
            sampler = SeedableRandomSampler(loader.dataset, seed)
        from ..utils.data import BatchSampler
        inner = loader.batch_sampler
        if sampler is not loader.sampler:
            inner = BatchSampler(sampler, loader.batch_size, loader.drop_last)
        shard = BatchSamplerShard(inner, num_processes, process_index, even_batches,
                                  loader.drop_last)
        super().__init__(loader.dataset, batch_sampler=shard, num_workers=loader.num_workers,
                         collate_fn=loader.collate_fn, timeout=loader.timeout,
                         worker_init_fn=loader.worker_init_fn, generator=loader.generator)
        self.base_dataloader = loader
        self.total_batch_size = (loader.batch_size or 1) * num_processes
        self.total_dataset_length = len(loader.dataset)
        self._state = state
        self._epoch_sampler = sampler

    def set_epoch(self, epoch: int) -> None:
        """Forward ``set_epoch`` to the sampler (the shuffled order of that epoch).

        Args:
            epoch: the epoch.
        """
        if hasattr(self._epoch_sampler, "set_epoch"):
            self._epoch_sampler.set_epoch(epoch)

    def __iter__(self):
        self._state.begin_dataloader(self)
        it = super().__iter__()
        try:
            current = next(it)
        except StopIteration:
            self._state.end_dataloader(self)
            return
        for following in it:
            yield current
            current = following
        self._state.end_of_dataloader = True
        yield current
        self._state.end_dataloader(self)

    @property
    def remainder(self) -> int:
        """How many real samples the last global batch holds (-1: it is full, or the loader
        drops its incomplete end, so nothing was padded)."""
        if self.base_dataloader.drop_last:
            return -1
        rest = self.total_dataset_length % self.total_batch_size
        return rest if rest else -1


class SkipDataLoader:
    """``loader`` without its first ``skip_batches`` batches (this epoch's iteration); the
    rest, the end-of-loader signal and every attribute are the loader's.

    Args:
        loader: a prepared (or plain) DataLoader.
        skip_batches: how many batches to skip.
    """

    def __init__(self, loader, skip_batches: int):
        self.loader, self.skip_batches = loader, int(skip_batches)

    def __getattr__(self, name):
        return getattr(self.__dict__["loader"], name)

    def __iter__(self):
        for i, batch in enumerate(self.loader):
            if i >= self.skip_batches:
                yield batch

    def __len__(self):
        return max(0, len(self.loader) - self.skip_batches)


def skip_first_batches(dataloader, num_batches: int = 0):
    """A loader that resumes an epoch: ``dataloader`` without its first ``num_batches``.

    Args:
        dataloader: the (prepared) DataLoader.
        num_batches: batches of this process to skip.

    Returns:
        A :class:`SkipDataLoader`.
    """
    return SkipDataLoader(dataloader, num_batches)
