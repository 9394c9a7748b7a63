"""What ``tbrun`` runs once its command line is parsed (the CLI is :mod:`..run`).

* :mod:`.config`: :class:`Config`, one node's launch settings.
* :mod:`.agent`: :class:`Agent`, one per node: the store, the rendezvous with the other nodes,
  the restarts and the watch over one attempt.
* :mod:`.workers`: :class:`WorkerGroup`, this node's worker processes: spawning them in their
  own sessions, copying their output with a rank prefix, stopping them and cleaning up after.
* :mod:`.notice`: tbrun's ``tbrun: ...`` notices.

Private (``_launcher``) because ``torch.distributed.launcher`` is a public torch package with
another API (``LaunchConfig``, ``elastic_launch``); under ``--as-torch`` that name must not
resolve to these internals.
"""
