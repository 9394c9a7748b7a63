"""``torch.distributed.checkpoint.api``: the checkpoint error and its per-rank failure type."""
from __future__ import annotations

import traceback

from .state_dict_saver import CheckpointException

#: what a rank's failure is recorded as (torch's alias).
WRAPPED_EXCEPTION = tuple[BaseException, traceback.StackSummary]

__all__ = ["CheckpointException", "WRAPPED_EXCEPTION"]
