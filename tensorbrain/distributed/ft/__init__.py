"""Training that survives the loss of replicas without stopping (torchft's design, on our
store and process groups): ``Manager``, ``DistributedDataParallel``, ``OptimizerWrapper``, and
the slow-link algorithms ``LocalSGD`` and ``DiLoCo``.

A replica is one process (data parallel); the live replicas form the default process group.
When one dies mid-step, the others' collectives fail naming it, nobody applies that step, and
the next step starts with a round of the quorum (``_quorum``) that drops it; the survivors make
the process group again in the same processes and redo the step at the smaller world size. A
replacement (started by ``tbrun --fault_tolerant`` or any launcher, against the same store) is
admitted at the next step boundary and receives the weights and optimizer state from a healthy
replica over the process group; then the group grows back. See ``docs/fault_tolerance.md``.

>>> import tensorbrain.distributed.ft as ft
>>> sorted(n for n in ft.__all__ if n[0].isupper())[:3]
['DiLoCo', 'DistributedDataParallel', 'LocalSGD']
"""
from ._quorum import Refused
from .ddp import DistributedDataParallel, OptimizerWrapper
from .local_sgd import DiLoCo, LocalSGD
from .manager import Manager

__all__ = ["DiLoCo", "DistributedDataParallel", "LocalSGD", "Manager", "OptimizerWrapper",
           "Refused"]
