"""``tb.mtia`` (``torch.mtia``): TensorBrain has no MTIA backend. Each name answers what torch
built without MTIA answers (``is_available()`` False, ``device_count()`` 0, memory figures 0;
the device queries raise), from the table :data:`NAMES` (see ``tensorbrain/_absent_device.py``).

>>> import tensorbrain as tb
>>> tb.mtia.is_available(), tb.mtia.device_count()
(False, 0)
"""
from __future__ import annotations

from ._absent_device import fill

#: torch.mtia's names -> what they give here.
NAMES = {
    "is_available": "false", "is_initialized": "false", "device_count": "zero",
    "memory_allocated": "zero", "max_memory_allocated": "zero",
    "manual_seed": "none", "manual_seed_all": "none", "seed": "none", "seed_all": "none",
    "reset_peak_memory_stats": "none",
    "empty_cache": "raise", "synchronize": "raise", "current_device": "raise",
    "set_device": "raise", "get_rng_state": "raise", "set_rng_state": "raise",
    "initial_seed": "raise", "init": "raise", "current_stream": "raise",
    "default_stream": "raise", "set_stream": "raise", "get_device_capability": "raise",
    "get_device_properties": "raise", "Stream": "raise", "Event": "raise", "device": "raise",
    "stream": "raise",
}
fill(globals(), "mtia", "MTIA", NAMES)


def memory_stats(device=None) -> dict:
    """An empty dict (what torch built without MTIA returns)."""
    return {}
