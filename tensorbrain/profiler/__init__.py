"""``tb.profiler``: torch.profiler's API (``profile``, ``record_function``, ``schedule``,
``key_averages().table()``, ``export_chrome_trace``) for TensorBrain programs.

See docs/profiler.md. The spans come from the op table, the autograd engine, the optimizers and,
under ``tb.distributed``, the collectives and DDP buckets, on one timeline; nothing is hooked
while no profile records.
"""
from __future__ import annotations

from ._events import EventList, FunctionEvent, FunctionEventAvg
from .profiler import (ProfilerAction, ProfilerActivity, profile, record_function, schedule,
                       supported_activities, tensorboard_trace_handler)
from .._unsupported import unsupported_class

#: torch's execution-trace (Chakra graph) observer: refused by name.
ExecutionTraceObserver = unsupported_class(
    "torch.profiler.ExecutionTraceObserver",
    "it records the operator graph of libtorch's dispatcher in Chakra's execution-trace format, "
    "which TensorBrain's ops do not pass through",
    "tb.profiler.profile(...) and prof.export_chrome_trace(path) (a timeline of the ops)")


def kineto_available() -> bool:
    """True: ``tb.profiler.profile`` (the API torch builds on Kineto) is always there."""
    return True


__all__ = ["kineto_available", "EventList", "ExecutionTraceObserver", "FunctionEvent", "FunctionEventAvg", "ProfilerAction",
           "ProfilerActivity", "profile", "record_function", "schedule", "supported_activities",
           "tensorboard_trace_handler"]
