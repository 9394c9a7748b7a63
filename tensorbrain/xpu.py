"""``tb.xpu`` (``torch.xpu``): TensorBrain has no Intel XPU backend. Each name answers what
torch built without XPU answers (``is_available()`` False, ``device_count()`` 0, memory
figures 0, seeding a no-op; the device queries raise), from the table :data:`NAMES`
(see ``tensorbrain/_absent_device.py``).

>>> import tensorbrain as tb
>>> tb.xpu.is_available(), tb.xpu.device_count()
(False, 0)
"""
from __future__ import annotations

from ._absent_device import fill

#: torch.xpu's names -> what they give here.
NAMES = {
    "is_available": "false", "is_initialized": "false", "is_bf16_supported": "false",
    "is_tf32_supported": "false", "is_current_stream_capturing": "false",
    "device_count": "zero", "memory_allocated": "zero", "max_memory_allocated": "zero",
    "memory_reserved": "zero", "max_memory_reserved": "zero",
    "empty_cache": "none", "manual_seed": "none", "manual_seed_all": "none", "seed": "none",
    "seed_all": "none", "set_rng_state": "none", "set_rng_state_all": "none", "init": "none",
    "reset_peak_memory_stats": "none", "reset_accumulated_memory_stats": "none",
    "get_arch_list": "empty", "get_rng_state_all": "empty",
    "current_device": "raise", "set_device": "raise", "synchronize": "raise",
    "get_device_name": "raise", "get_device_properties": "raise",
    "get_device_capability": "raise", "get_rng_state": "raise", "initial_seed": "raise",
    "current_stream": "raise", "set_stream": "raise", "mem_get_info": "raise",
    "memory_stats": "raise", "Stream": "raise", "Event": "raise", "device": "raise",
    "stream": "raise", "get_gencode_flags": "raise", "device_of": "raise",
}
fill(globals(), "xpu", "XPU", NAMES)
default_generators: tuple = ()

# torch.xpu.random: the seeding names above, as a module of their own
import types as _types  # noqa: E402

random = _types.ModuleType("tensorbrain.xpu.random", "torch.xpu.random: XPU seeding (absent).")
for _n in ("manual_seed", "manual_seed_all", "seed", "seed_all", "get_rng_state",
           "get_rng_state_all", "set_rng_state", "set_rng_state_all", "initial_seed",
           "device_count", "current_device", "is_initialized"):
    setattr(random, _n, globals()[_n])
