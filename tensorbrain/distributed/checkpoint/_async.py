"""``async_save``: stage a copy of the state dict, then write it in a background thread over
a process group of its own, so the training loop's collectives and the checkpoint's never
share connections (groups have their own, distributed_c10d.new_group)."""
from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .staging import DefaultStager, _done
from .state_dict_saver import AsyncCheckpointerType, AsyncSaveResponse, save


_executor: ThreadPoolExecutor | None = None
_groups: dict[Any, Any] = {}
_lock = threading.Lock()


def _checkpoint_group(process_group: Any, no_dist: bool) -> Any:
    from ... import distributed as dist
    if no_dist or not dist.is_initialized():
        return None
    key = id(process_group) if process_group is not None else None
    if key not in _groups:   # every rank calls async_save at the same point: a collective
        ranks = None if process_group is None else dist.get_process_group_ranks(process_group)
        _groups[key] = dist.new_group(ranks=ranks)
    return _groups[key]


def async_save(state_dict: dict, *, checkpoint_id=None, storage_writer=None, planner=None,
               process_group=None,
               async_checkpointer_type: AsyncCheckpointerType = AsyncCheckpointerType.THREAD,
               async_stager: Any = None, no_dist: bool = False, use_collectives: bool = True):
    """Save like :func:`~tensorbrain.distributed.checkpoint.save`, in the background: the
    state dict is copied (staged) before this returns, so training may change the model at
    once; the write runs in one background thread (saves run one after another) over a
    process group made for checkpoints. Every rank of the group calls it, as ``save``.

    Args:
        state_dict: as ``save``.
        checkpoint_id: as ``save``.
        storage_writer: as ``save``.
        planner: as ``save``.
        process_group: as ``save``.
        async_checkpointer_type: ``THREAD`` (``PROCESS`` is refused: TensorBrain saves from
            a thread).
        async_stager: a stager (``DefaultStager``...); then an :class:`AsyncSaveResponse` is
            returned.
        no_dist: save without collectives (one process).
        use_collectives: accepted for torch's signature.

    Returns:
        A ``concurrent.futures.Future`` of the save's metadata, or an
        :class:`AsyncSaveResponse` when ``async_stager`` is given.

    Example:
        >>> import tempfile, tensorbrain as tb
        >>> import tensorbrain.distributed.checkpoint as dcp
        >>> path = tempfile.mkdtemp()
        >>> fut = dcp.async_save({"w": tb.ones(2)}, checkpoint_id=path, no_dist=True)
        >>> _ = fut.result()
        >>> out = {"w": tb.zeros(2)}
        >>> dcp.load(out, checkpoint_id=path, no_dist=True)
        >>> out["w"].tolist()
        [1.0, 1.0]
    """
    global _executor
    if AsyncCheckpointerType(async_checkpointer_type) is AsyncCheckpointerType.PROCESS:
        from ..._unsupported import NotSupportedError
        raise NotSupportedError("async_save(async_checkpointer_type=PROCESS) is not supported "
                                "by TensorBrain: it saves from a background thread. Use "
                                "AsyncCheckpointerType.THREAD instead")
    staged = (async_stager or DefaultStager()).stage(state_dict)
    if isinstance(staged, Future):
        staged = staged.result()
    group = _checkpoint_group(process_group, no_dist)
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tb-async-save")
    fut = _executor.submit(save, staged, checkpoint_id=checkpoint_id,
                           storage_writer=storage_writer, planner=planner,
                           process_group=group, no_dist=no_dist or group is None)
    return AsyncSaveResponse(_done(), fut) if async_stager is not None else fut


__all__ = ["AsyncCheckpointerType", "AsyncSaveResponse", "async_save"]
