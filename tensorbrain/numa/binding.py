"""``tb.numa.binding`` (``torch.numa.binding``): refused by name (see ``tb.numa``)."""
from __future__ import annotations

from .._unsupported import unsupported_class

_WHY = "TensorBrain's launcher does not bind processes to NUMA nodes"
_USE = "numactl or taskset in the launch command"
AffinityMode = unsupported_class("torch.numa.binding.AffinityMode", _WHY, _USE)
NumaOptions = unsupported_class("torch.numa.binding.NumaOptions", _WHY, _USE)
