"""``torch.distributed.elastic.agent``: the agent's types (:mod:`.server.api`); TensorBrain's
agent is ``tbrun``'s (``tensorbrain/distributed/_launcher/agent.py``)."""
