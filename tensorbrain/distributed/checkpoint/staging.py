"""``tb.distributed.checkpoint.staging`` (``torch.distributed.checkpoint.staging``): the copy
of a state dict that :func:`~tensorbrain.distributed.checkpoint.async_save` writes while
training goes on. :class:`DefaultStager` copies every tensor (detached, on the CPU for CPU
tensors, on its device otherwise) synchronously; torch's pinned, shared-memory and background
staging options are accepted and stored (staging here is one memory copy, done before
``async_save`` returns).
"""
from __future__ import annotations

import dataclasses
from concurrent.futures import Future
from typing import Any

from .stateful import Stateful


@dataclasses.dataclass
class StagingOptions:
    """torch's staging options (stored; see the module docstring).

    Args:
        use_pinned_memory: stage into page-locked memory (CUDA).
        use_shared_memory: stage into shared memory (process-based saving).
        use_async_staging: stage in the background.
        use_non_blocking_copy: copy without synchronising.
    """

    use_pinned_memory: bool = True
    use_shared_memory: bool = True
    use_async_staging: bool = True
    use_non_blocking_copy: bool = True


def _copy(obj: Any) -> Any:
    if isinstance(obj, dict):
        return type(obj)((k, _copy(v)) for k, v in obj.items()) if type(obj) is not dict \
            else {k: _copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_copy(v) for v in obj)
    if hasattr(obj, "detach") and hasattr(obj, "clone"):
        return obj.detach().clone()
    if hasattr(obj, "copy") and hasattr(obj, "dtype"):   # a NumPy/CuPy array
        return obj.copy()
    return obj


class DefaultStager:
    """Copies a state dict for a background save (torch's ``DefaultStager``).

    Args:
        config: the :class:`StagingOptions`.
    """

    def __init__(self, config: StagingOptions | None = None) -> None:
        self.config = config or StagingOptions()

    def stage(self, state_dict: dict, **kwargs: Any) -> dict:
        """A copy of ``state_dict`` (``Stateful`` values replaced by their state dicts).

        Args:
            state_dict: the state dict.
        """
        return _copy({k: (v.state_dict() if isinstance(v, Stateful) else v)
                      for k, v in state_dict.items()})

    def synchronize_staging(self) -> None:
        """Wait for staging to finish (it finishes in :meth:`stage`)."""

    def close(self) -> None:
        """Release the staging buffers (none are kept)."""


def _done() -> Future:
    f: Future = Future()
    f.set_result(None)
    return f


__all__ = ["DefaultStager", "StagingOptions"]
