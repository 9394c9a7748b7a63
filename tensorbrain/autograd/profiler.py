"""``tb.autograd.profiler`` (``torch.autograd.profiler``): torch's older profiler API, on top of
:mod:`tensorbrain.profiler` (the same hooks, events and tables).

``profile(enabled=..., use_cuda=..., record_shapes=...)`` records what ``tb.profiler.profile``
records; ``prof.function_events``, ``prof.key_averages().table(...)``, ``prof.table(...)``,
``prof.self_cpu_time_total`` and ``export_chrome_trace`` are there. ``record_function`` and
``EventList`` are ``tb.profiler``'s. ``emit_nvtx`` is a no-op block when ``enabled=False`` (how
programs use it, behind a flag); enabled, it needs a CUDA GPU as torch's does (an
``AssertionError`` without one, as torch's CPU build), and on a GPU it refuses, since TensorBrain
emits no NVTX ranges per op (use ``tb.profiler.profile(activities=[ProfilerActivity.CUDA])``).

>>> import tensorbrain as tb
>>> from tensorbrain.autograd import profiler
>>> a = tb.ones(4, 4)
>>> with profiler.profile(record_shapes=True) as prof:
...     with profiler.record_function("step"):
...         loss = (a @ a).sum()
>>> sorted({e.key for e in prof.key_averages()})
['matmul', 'step', 'sum']
"""
from __future__ import annotations

from ..profiler import EventList, FunctionEvent, record_function
from ..profiler import profile as _profile
from ..profiler.profiler import ProfilerActivity
from .._unsupported import NotSupportedError

__all__ = ["EventList", "FunctionEvent", "emit_itt", "emit_nvtx", "profile", "record_function"]


class profile(_profile):
    """Record ops, backward, optimizer steps and collectives (``torch.autograd.profiler.profile``).

    The legacy spelling of :class:`tensorbrain.profiler.profile`: the options are keyword flags
    instead of ``activities``; everything recorded and every result is the same.

    Args:
        enabled (bool): False makes the block record nothing (and cost nothing).
        use_cuda (bool): also time the CUDA kernels of ops on CUDA tensors (needs a GPU).
        use_device (str | None): ``"cuda"`` is ``use_cuda=True``; None or ``"cpu"``: CPU only.
        record_shapes (bool): keep each op's tensor argument shapes.
        with_flops (bool): not supported (raises).
        profile_memory (bool): not supported (raises).
        with_stack (bool): not supported (raises).
        with_modules (bool): not supported (raises).
        use_kineto (bool): accepted for torch's signature (there is one recorder).
        use_cpu (bool): must be True (CPU spans are always recorded).
        experimental_config: must be None.
        acc_events (bool): accepted for torch's signature.
        custom_trace_id_callback: accepted for torch's signature; unused.
        **more: torch's newer keywords (``post_processing_timeout_s``, ``activity_filters``),
            accepted when None.

    Raises:
        NotImplementedError: an option TensorBrain does not record, ``use_cpu=False``, or CUDA
            asked for without a GPU.
        TypeError: ``use_device`` is not a string.

    Example:
        >>> import tensorbrain as tb
        >>> from tensorbrain.autograd.profiler import profile
        >>> x = tb.ones(3)
        >>> with profile() as prof:
        ...     y = x + 1
        >>> [e.name for e in prof.function_events]
        ['add']
    """

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False,
                 use_device: str | None = None, record_shapes: bool = False,
                 with_flops: bool = False, profile_memory: bool = False, with_stack: bool = False,
                 with_modules: bool = False, use_kineto: bool = False, use_cpu: bool = True,
                 experimental_config=None, acc_events: bool = False,
                 custom_trace_id_callback=None, **more):
        if use_device is not None and not isinstance(use_device, str):
            raise TypeError(f"profile(use_device=...) must be a device string such as 'cuda', "
                            f"got {type(use_device).__name__}")
        if not use_cpu:
            raise NotImplementedError("profile(use_cpu=False) is not supported: TensorBrain "
                                      "always records the CPU side of each op")
        unknown = {k: v for k, v in more.items() if v is not None}
        cuda = bool(use_cuda) or (use_device or "cpu").split(":")[0] == "cuda"
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        super().__init__(activities=acts, record_shapes=record_shapes,
                         profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules,
                         experimental_config=experimental_config, **unknown)
        self.enabled = bool(enabled)

    def __enter__(self) -> profile:
        if self.enabled:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.stop()

    @property
    def function_events(self) -> EventList:
        """Every recorded span (torch's ``function_events``)."""
        return self.events()

    @property
    def self_cpu_time_total(self) -> float:
        """The sum of every span's self CPU time, in microseconds."""
        return sum(e.self_cpu_time_total for e in self._finished)

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_name_column_width: int = 55, header: str | None = None,
              top_level_events_only: bool = False) -> str:
        """``key_averages().table(...)`` (torch's shortcut).

        Args:
            sort_by: a column (``"cpu_time_total"``, ``"self_cpu_time_total"``, ``"count"``...).
            row_limit: at most this many rows (-1: all).
            max_name_column_width: names longer than this are cut.
            header: a line above the table.
            top_level_events_only: accepted for torch's signature.

        Returns:
            str: the table.
        """
        return self.key_averages().table(sort_by=sort_by, row_limit=row_limit,
                                         max_name_column_width=max_name_column_width,
                                         header=header,
                                         top_level_events_only=top_level_events_only)

    def total_average(self):
        """Every span summed into one row."""
        return self.key_averages().total_average()


class emit_nvtx:
    """NVTX ranges for Nsight (``torch.autograd.profiler.emit_nvtx``).

    Args:
        enabled (bool): False: the block does nothing (programs pass a command-line flag).
        record_shapes (bool): accepted for torch's signature.

    Raises:
        AssertionError: entered enabled without a CUDA GPU (torch's CPU build does the same).
        NotSupportedError: entered enabled on a GPU: TensorBrain emits no NVTX range per op;
            use ``tb.profiler.profile(activities=[ProfilerActivity.CUDA])``.
    """

    def __init__(self, enabled: bool = True, record_shapes: bool = False):
        self.enabled, self.record_shapes = bool(enabled), bool(record_shapes)

    def __enter__(self) -> emit_nvtx:
        if not self.enabled:
            return self
        from ..profiler import _hooks
        if not _hooks.cuda_available():
            raise AssertionError("emit_nvtx needs a CUDA GPU (NVTX ranges are CUDA's); this "
                                 "process has none: pass enabled=False or use "
                                 "tb.autograd.profiler.profile()")
        raise NotSupportedError("torch.autograd.profiler.emit_nvtx is not supported by "
                                "TensorBrain: it emits no NVTX range per op. Use "
                                "tb.profiler.profile(activities=[ProfilerActivity.CUDA]) instead")

    def __exit__(self, *exc) -> None:
        return None


class emit_itt:
    """Intel ITT ranges for VTune (``torch.autograd.profiler.emit_itt``).

    Args:
        enabled (bool): False: the block does nothing.
        record_shapes (bool): accepted for torch's signature.

    Raises:
        NotSupportedError: entered enabled: TensorBrain emits no ITT ranges; use
            ``tb.autograd.profiler.profile()``.
    """

    def __init__(self, enabled: bool = True, record_shapes: bool = False):
        self.enabled, self.record_shapes = bool(enabled), bool(record_shapes)

    def __enter__(self) -> emit_itt:
        if self.enabled:
            raise NotSupportedError("torch.autograd.profiler.emit_itt is not supported by "
                                    "TensorBrain: it emits no ITT ranges. Use "
                                    "tb.autograd.profiler.profile() instead")
        return self

    def __exit__(self, *exc) -> None:
        return None
