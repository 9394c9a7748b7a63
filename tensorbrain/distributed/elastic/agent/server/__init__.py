"""``torch.distributed.elastic.agent.server``: the worker and run types of torch's elastic
agent (:mod:`.api`); ``LocalElasticAgent`` is refused in :mod:`.local_elastic_agent`."""
from .api import RunResult, Worker, WorkerGroup, WorkerSpec, WorkerState

__all__ = ["RunResult", "Worker", "WorkerGroup", "WorkerSpec", "WorkerState"]
