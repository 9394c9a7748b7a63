"""torch.distributed.elastic.multiprocessing's ``errors`` (``record``, ``ErrorHandler``),
:class:`Std` (which streams of which local ranks to redirect or tee, as ``tbrun``'s
``--redirects`` / ``--tee`` take them) and ``start_processes`` (:mod:`.api`)."""
from __future__ import annotations

from .api import (DefaultLogsSpecs, LogsSpecs, PContext, ProcessFailure, RunProcsResult, Std,
                  start_processes)

__all__ = ["DefaultLogsSpecs", "LogsSpecs", "PContext", "ProcessFailure", "RunProcsResult", "Std",
           "start_processes"]
