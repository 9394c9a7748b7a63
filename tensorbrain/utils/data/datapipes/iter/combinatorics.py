"""``ShufflerIterDataPipe`` (``dp.shuffle()``): torch's buffered shuffle, with torch's
algorithm (a ``random.Random`` seeded per epoch), so ``set_seed(s)`` gives torch's order."""
from __future__ import annotations

import random

from ..datapipe import IterDataPipe, functional_datapipe


@functional_datapipe("shuffle")
class ShufflerIterDataPipe(IterDataPipe):
    """Shuffle within a buffer of ``buffer_size`` items (torch's ``Shuffler``).

    Args:
        datapipe: the source.
        buffer_size: the buffer (the whole source when it is at least as long).
        unbatch_level: unbatch this many levels first.

    Raises:
        AssertionError: ``buffer_size`` is not positive, as torch's.
    """

    def __init__(self, datapipe, *, buffer_size: int = 10000, unbatch_level: int = 0) -> None:
        assert buffer_size > 0, "buffer_size should be larger than 0"
        self.datapipe = datapipe if unbatch_level == 0 else datapipe.unbatch(unbatch_level)
        self.buffer_size = buffer_size
        self._buffer: list = []
        self._enabled = True
        self._seed: int | None = None
        self._rng = random.Random()

    def set_shuffle(self, shuffle: bool = True) -> ShufflerIterDataPipe:
        """Turn shuffling on or off.

        Args:
            shuffle: on.
        """
        self._enabled = shuffle
        return self

    def set_seed(self, seed: int) -> ShufflerIterDataPipe:
        """Use ``seed`` for the next epoch.

        Args:
            seed: the seed.
        """
        self._seed = seed
        return self

    def reset(self) -> None:
        """Empty the shuffle buffer before a new pass."""
        self._buffer = []
        if self._enabled:
            if self._seed is None:
                import tensorbrain
                self._seed = int(tensorbrain.randint(0, 2 ** 62, ()).item())
            self._rng.seed(self._seed)
            self._seed = None

    def __iter__(self):
        self.reset()
        if not self._enabled:
            yield from self.datapipe
            return
        for x in self.datapipe:
            if len(self._buffer) == self.buffer_size:
                idx = self._rng.randint(0, len(self._buffer) - 1)
                val, self._buffer[idx] = self._buffer[idx], x
                yield val
            else:
                self._buffer.append(x)
        while self._buffer:
            idx = self._rng.randint(0, len(self._buffer) - 1)
            yield self._buffer.pop(idx)

    def __len__(self) -> int:
        return len(self.datapipe)


__all__ = ["ShufflerIterDataPipe"]
