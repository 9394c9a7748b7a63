"""Random numbers: one global NumPy Generator seeded by ``tb.manual_seed``, and ``tb.Generator``.

CUDA tensors draw on the host generator and are copied to the device: slower than CuPy's own
generator, but the same seed gives the same numbers on CPU and GPU, which keeps tests and
DDP's rank-0 broadcast checks simple.
"""
from __future__ import annotations

import numpy as np

from . import _dtype, _xp


class Generator:
    """A random number generator, as ``torch.Generator`` (``manual_seed``, ``initial_seed``)."""

    def __init__(self, device="cpu"):
        self._seed = int(np.random.SeedSequence().entropy % (2 ** 63))
        self.rng = np.random.default_rng(self._seed)

    def manual_seed(self, seed: int):
        self._seed = int(seed)
        self.rng = np.random.default_rng(self._seed)
        return self

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        return self.rng.bit_generator.state

    def set_state(self, state):
        self.rng.bit_generator.state = state


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the global generator (and CuPy's, when present)."""
    default_generator.manual_seed(seed)
    if _xp.cuda_available():
        _xp.cupy().random.seed(seed)
    return default_generator


def initial_seed() -> int:
    return default_generator.initial_seed()


def seed() -> int:
    s = int(np.random.SeedSequence().entropy % (2 ** 63))
    manual_seed(s)
    return s


def _rng(generator):
    return (generator or default_generator).rng


def _place(arr, like):
    if like is not None and _xp.is_cupy_array(like):
        return _xp.cupy().asarray(arr)
    return arr


def uniform(a, b, shape, dtype, like=None, generator=None):
    dtype = np.dtype(dtype)
    if not _dtype.is_floating_point(dtype):
        raise TypeError(f"uniform_ needs a floating point tensor, got {dtype}")
    arr = _rng(generator).random(shape, dtype=np.float32 if dtype.itemsize == 2 else
                                 (dtype if dtype in (np.float32, np.float64) else np.float64))
    if a != 0.0 or b != 1.0:
        arr = arr * (b - a) + a
    return _place(arr.astype(dtype, copy=False), like)


def normal(mean, std, shape, dtype, like=None, generator=None):
    dtype = np.dtype(dtype)
    if not _dtype.is_floating_point(dtype):
        raise TypeError(f"normal_ needs a floating point tensor, got {dtype}")
    arr = _rng(generator).standard_normal(shape, dtype=np.float32 if dtype.itemsize == 2 else
                                          (dtype if dtype in (np.float32, np.float64) else np.float64))
    if std != 1.0:
        arr *= std
    if mean != 0.0:
        arr += mean
    return _place(arr.astype(dtype, copy=False), like)


def integers(low, high, shape, generator=None):
    return _rng(generator).integers(low, high, size=shape)


def permutation(n, generator=None):
    return _rng(generator).permutation(n)
