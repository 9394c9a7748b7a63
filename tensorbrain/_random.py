"""Random numbers: one global NumPy Generator seeded by ``tb.manual_seed``, and ``tb.Generator``.

CUDA tensors draw on the host generator and are copied to the device: slower than CuPy's own
generator, but the same seed gives the same numbers on CPU and GPU, which keeps tests and
DDP's rank-0 broadcast checks simple.
"""
from __future__ import annotations

import secrets

import numpy as np

from . import _dtype, _xp
from ._tensor_base import TensorBase as Tensor


class Generator:
    """A random number generator, as ``torch.Generator`` (``manual_seed``, ``initial_seed``)."""

    def __init__(self, device="cpu"):
        self._seed = int(np.random.SeedSequence().entropy % (2 ** 63))
        self.rng = np.random.default_rng(self._seed)

    def manual_seed(self, seed: int):
        """Reseed this generator, as ``torch.Generator.manual_seed``.

        Args:
            seed: the seed (an int).

        Returns:
            Generator: self.
        """
        self._seed = int(seed)
        self.rng = np.random.default_rng(self._seed)
        return self

    def initial_seed(self) -> int:
        """The seed this generator was last seeded with (``torch.Generator.initial_seed``).

        Returns:
            int: the seed.
        """
        return self._seed

    def get_state(self):
        """This generator's state as a uint8 Tensor (``torch.Generator.get_state``)."""
        return _generator_get_state_tensor(self)

    def set_state(self, new_state):
        """Restore a state from :meth:`get_state` (a uint8 Tensor; a NumPy bit-generator state
        dict from older TensorBrain versions is accepted too)."""
        if isinstance(new_state, dict):
            self.rng.bit_generator.state = new_state
            return self
        _load_state_bytes(self, new_state, "Generator.set_state")
        return self


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the global generator (and CuPy's, when present)."""
    default_generator.manual_seed(seed)
    if _xp.cuda_available():
        _xp.cupy().random.seed(seed)
    return default_generator


def initial_seed() -> int:
    """The seed of the global generator, as ``torch.initial_seed``.

    Returns:
        int: the last seed given to ``tb.manual_seed`` or chosen by ``tb.seed``.

    Example:
        >>> import tensorbrain as tb
        >>> _ = tb.manual_seed(7); tb.initial_seed()
        7
    """
    return default_generator.initial_seed()


def seed() -> int:
    """Seed the global generator (and CuPy's) from fresh entropy, as ``torch.seed``.

    Returns:
        int: the seed chosen (``tb.initial_seed()`` returns it too).
    """
    s = secrets.randbits(63)
    manual_seed(s)
    return s


def _rng(generator):
    return (generator or default_generator).rng


def _place(arr, like):
    if like is not None and _xp.is_cupy_array(like):
        return _xp.cupy().asarray(arr)
    return arr


def uniform(a, b, shape, dtype, like=None, generator=None):
    if _xp.is_meta(like):   # an initialiser on the meta device draws nothing, as in torch
        return like
    dtype = np.dtype(dtype)
    if not _dtype.is_floating_point(dtype):
        raise TypeError(f"uniform_ needs a floating point tensor, got {dtype}")
    arr = _rng(generator).random(shape, dtype=np.float32 if dtype.itemsize == 2 else
                                 (dtype if dtype in (np.float32, np.float64) else np.float64))
    if a != 0.0 or b != 1.0:
        arr = arr * (b - a) + a
    return _place(arr.astype(dtype, copy=False), like)


def normal(mean, std, shape, dtype, like=None, generator=None):
    if _xp.is_meta(like):
        return like
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


def _state_bytes(generator) -> np.ndarray:
    import json
    state = {"seed": generator._seed, "bit_generator": generator.rng.bit_generator.state}
    return np.frombuffer(json.dumps(state).encode(), dtype=np.uint8).copy()


def _load_state_bytes(generator, new_state, what="set_rng_state") -> None:
    import json
    raw = getattr(new_state, "_data", new_state)
    arr = _xp.to_numpy(raw)
    if arr.dtype != np.uint8 or arr.ndim != 1:
        raise TypeError(f"{what}: expected the uint8 tensor that get_rng_state() returned, got "
                        f"dtype {arr.dtype} and shape {tuple(arr.shape)}")
    try:
        state = json.loads(arr.tobytes().decode())
        generator.rng.bit_generator.state = state["bit_generator"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{what}: not a state from tb.get_rng_state() ({exc})") from None
    generator._seed = int(state["seed"])


def get_rng_state():
    """The global generator's state as a uint8 Tensor (``torch.get_rng_state``).

    Returns:
        Tensor: an opaque 1-d uint8 tensor; pass it to :func:`set_rng_state` to replay the same
        random numbers. (Its bytes are TensorBrain's, not torch's: states do not cross frameworks.)

    Example:
        >>> import tensorbrain as tb
        >>> state = tb.get_rng_state()
        >>> a = tb.rand(3)
        >>> tb.set_rng_state(state)
        >>> tb.equal(a, tb.rand(3))
        True
    """
    return Tensor._wrap(_state_bytes(default_generator))


def set_rng_state(new_state) -> None:
    """Restore the global generator from a :func:`get_rng_state` tensor (``torch.set_rng_state``).

    Args:
        new_state: the uint8 Tensor (or NumPy array) from :func:`get_rng_state`.

    Raises:
        TypeError: not a 1-d uint8 tensor.
        ValueError: the bytes are not a TensorBrain generator state.
    """
    _load_state_bytes(default_generator, new_state)


def _generator_get_state_tensor(self):
    return Tensor._wrap(_state_bytes(self))
