"""``torch.distributed.elastic.agent.server.local_elastic_agent``: refused by name.

torch's ``LocalElasticAgent`` is subclassed by programs that override its private steps
(``_start_workers``, ``_invoke_run``, ``_monitor_workers``) and read its rendezvous handler's
internal state; TensorBrain's agent (``tbrun``) does the same job (rendezvous, start, watch,
restart the group) with its own internals, so a subclass of torch's would not run on it.
"""
from __future__ import annotations

from ....._unsupported import unsupported_class

LocalElasticAgent = unsupported_class(
    "torch.distributed.elastic.agent.server.local_elastic_agent.LocalElasticAgent",
    "TensorBrain's elastic agent is tbrun's, whose internals differ from torch's agent that "
    "programs subclass",
    "tbrun (python -m tensorbrain.distributed.run) with --nnodes MIN:MAX and --max_restarts")

__all__ = ["LocalElasticAgent"]
