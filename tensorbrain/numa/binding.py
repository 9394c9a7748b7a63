"""``tb.numa.binding`` (``torch.numa.binding``): the NUMA binding options torchrun and
``LaunchConfig(numa_options=...)`` take, with torch's names, values and fields.

>>> from tensorbrain.numa.binding import AffinityMode, NumaOptions
>>> NumaOptions(affinity_mode=AffinityMode.NODE)
NumaOptions(affinity_mode=<AffinityMode.NODE: 'node'>, should_fall_back_if_binding_fails=False)

torch applies them by binding worker ``local_rank`` to the CPUs near GPU ``local_rank`` (private
functions of the same module); TensorBrain's launcher accepts the options and does not bind
(pin workers with ``numactl``/``taskset`` in the launch command).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class AffinityMode(str, Enum):
    """Which CPUs a worker is bound to, relative to the GPU of its local rank (torch's modes)."""

    NODE = "node"                   #: all CPUs of the GPU's NUMA node
    SOCKET = "socket"               #: all CPUs of the NUMA nodes of the GPU's socket
    EXCLUSIVE = "exclusive"         #: an even, exclusive share of the node's physical cores
    CORE_COMPLEX = "core-complex"   #: one core complex (cores sharing an L3 cache) of the node


@dataclass(frozen=True)
class NumaOptions:
    """NUMA binding options, as ``torch.numa.binding.NumaOptions``.

    Args:
        affinity_mode: the :class:`AffinityMode`.
        should_fall_back_if_binding_fails: silence errors of the binding itself.
    """

    affinity_mode: AffinityMode
    should_fall_back_if_binding_fails: bool = False


__all__ = ["AffinityMode", "NumaOptions"]
