"""``tb.mps`` (``torch.mps``): TensorBrain has no Apple Metal backend. Each name answers what
torch built without MPS answers (``is_available()`` False, ``device_count()`` 0, seeding a
no-op; the memory and synchronisation calls raise), from the table :data:`NAMES` (see
``tensorbrain/_absent_device.py``).

>>> import tensorbrain as tb
>>> tb.mps.is_available()
False
"""
from __future__ import annotations

from ._absent_device import fill

#: torch.mps's names -> what they give here.
NAMES = {
    "is_available": "false", "device_count": "zero", "manual_seed": "none",
    "set_rng_state": "none", "set_per_process_memory_fraction": "raise",
    "current_allocated_memory": "raise", "driver_allocated_memory": "raise",
    "recommended_max_memory": "raise", "empty_cache": "raise", "synchronize": "raise",
    "get_rng_state": "raise", "seed": "raise", "compile_shader": "raise",
    "load_metallib": "raise", "Event": "raise",
}
fill(globals(), "mps", "MPS", NAMES)
