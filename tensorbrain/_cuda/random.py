"""``tb.cuda.random`` (``torch.cuda.get_rng_state`` & co.).

TensorBrain draws the random numbers of CUDA tensors from the host generator and copies them to
the GPU (``tensorbrain/_random.py``: the same seed gives the same numbers on CPU and GPU), so
the CUDA generator's state *is* the host generator's state: ``get_rng_state()`` returns it and
``set_rng_state`` restores it (restoring the CPU stream too, which torch keeps apart; programs
that save and restore both, as checkpoints and activation recomputation do, see no difference).
Without a GPU, ``get_rng_state`` and ``initial_seed`` raise and the setters do nothing, as
torch's.
"""
from __future__ import annotations

from .. import _random, _xp


def get_rng_state(device="cuda"):
    """The CUDA generator's state as a uint8 Tensor (the host generator's, see above).

    Args:
        device: accepted for torch compatibility.

    Returns:
        Tensor: the state; pass it to :func:`set_rng_state`.

    Raises:
        RuntimeError: no usable GPU.
    """
    _xp.cupy()
    return _random.get_rng_state()


def set_rng_state(new_state, device="cuda") -> None:
    """Restore a state from :func:`get_rng_state` (nothing without a GPU, as torch).

    Args:
        new_state: the uint8 Tensor.
        device: accepted for torch compatibility.
    """
    if _xp.cuda_available():
        _random.set_rng_state(new_state)


def get_rng_state_all() -> list:
    """One state per GPU (``[]`` without one).

    Returns:
        list[Tensor]: the states.
    """
    return [_random.get_rng_state() for _ in range(_xp._cupy_devices if
                                                    _xp.cuda_available() else 0)]


def set_rng_state_all(new_states) -> None:
    """Restore the states of :func:`get_rng_state_all` (they are one generator's: the first).

    Args:
        new_states: the list of uint8 Tensors.
    """
    states = list(new_states)
    if states and _xp.cuda_available():
        _random.set_rng_state(states[0])


def initial_seed() -> int:
    """The generator's seed (the host generator's, see above).

    Returns:
        int: the seed.

    Raises:
        RuntimeError: no usable GPU.
    """
    _xp.cupy()
    return _random.initial_seed()


def seed() -> None:
    """Seed the generator from fresh entropy (the host generator's; nothing without a GPU)."""
    if _xp.cuda_available():
        _random.seed()


seed_all = seed

#: torch's per-GPU generators: the one host generator per GPU (``()`` without a GPU).
default_generators: tuple = tuple(_random.default_generator for _ in
                                  range(_xp._cupy_devices if _xp.cuda_available() else 0))

__all__ = ["default_generators", "get_rng_state", "get_rng_state_all", "initial_seed", "seed",
           "seed_all", "set_rng_state", "set_rng_state_all"]
