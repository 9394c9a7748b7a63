"""``tb.random``: the global generator's functions under torch.random's names.

>>> import tensorbrain as tb
>>> with tb.random.fork_rng():
...     _ = tb.rand(2)        # draws here do not move the global generator outside
>>> tb.random.initial_seed() == tb.initial_seed()
True
"""
from __future__ import annotations

import contextlib

from ._random import (default_generator, get_rng_state, initial_seed, manual_seed, seed,  # noqa: F401
                      set_rng_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True):
    """Restore the global generator's state on exit (``torch.random.fork_rng``).

    Args:
        devices: accepted for torch's signature; CUDA tensors draw on the host generator in
            TensorBrain (see tensorbrain/_random.py), so there is no device state to fork.
        enabled: ``False`` makes this a no-op.

    Yields:
        None.
    """
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
