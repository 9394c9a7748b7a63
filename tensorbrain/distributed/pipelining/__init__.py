"""``tb.distributed.pipelining``: pipeline parallelism with torch's names.

Cut a model into stages (by hand, with :func:`split_sequential`, or with :func:`pipeline` and
:class:`SplitPoint` for ``nn.Sequential`` models), wrap this rank's part in a
:class:`PipelineStage`, and drive it with a schedule: :class:`ScheduleGPipe`,
:class:`Schedule1F1B` or :class:`ScheduleInterleaved1F1B`. See ``docs/pipeline.md``.

>>> from tensorbrain.distributed.pipelining import PipelineStage, ScheduleGPipe  # doctest: +SKIP
>>> stage = PipelineStage(my_layers, rank, world_size, "cpu")                   # doctest: +SKIP
>>> sched = ScheduleGPipe(stage, n_microbatches=4, loss_fn=tb.nn.MSELoss())     # doctest: +SKIP
>>> sched.step(x) if rank == 0 else sched.step(target=y, losses=[])             # doctest: +SKIP
"""
from .schedules import (PipelineScheduleMulti, PipelineScheduleSingle, Schedule1F1B,
                        ScheduleGPipe, ScheduleInterleaved1F1B, get_schedule_class)
from .stage import (Pipe, PipelineStage, PipeliningShapeError, SplitPoint, pipeline,
                    split_sequential)

from . import microbatch  # noqa: F401  (torch's module path)
from .microbatch import TensorChunkSpec


def __getattr__(name):
    from . import schedules
    return schedules.__getattr__(name)   # the refused schedules name themselves


__all__ = ["Pipe", "PipelineScheduleMulti", "PipelineScheduleSingle", "PipelineStage",
           "PipeliningShapeError", "Schedule1F1B", "ScheduleGPipe", "ScheduleInterleaved1F1B",
           "SplitPoint", "TensorChunkSpec", "get_schedule_class", "pipeline", "split_sequential"]
