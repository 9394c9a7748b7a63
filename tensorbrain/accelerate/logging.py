"""``accelerate.logging``: ``get_logger(__name__)``, a logger that speaks on the main process
only (``main_process_only=False`` for every process, ``in_order=True`` for every process in rank
order)."""
from __future__ import annotations

import logging
import os


def _rank_and_size() -> tuple[int, int]:
    from .. import distributed as dist
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


class MultiProcessAdapter(logging.LoggerAdapter):
    """A ``LoggerAdapter`` whose calls take ``main_process_only`` (default True) and
    ``in_order`` (default False), as Accelerate's."""

    def log(self, level, msg, *args, **kwargs):
        """Log ``msg`` at ``level`` on the main process (or on all, see the class doc).

        Args:
            level: the logging level.
            msg: the message.
            *args: ``msg``'s arguments.
            **kwargs: ``main_process_only``, ``in_order`` and ``logging``'s own keywords.
        """
        main_only = kwargs.pop("main_process_only", True)
        in_order = kwargs.pop("in_order", False)
        kwargs.setdefault("stacklevel", 2)
        if not self.isEnabledFor(level):
            return
        rank, size = _rank_and_size()
        if not in_order:
            if not main_only or rank == 0:
                msg, kwargs = self.process(msg, kwargs)
                self.logger.log(level, msg, *args, **kwargs)
            return
        from .. import distributed as dist
        for turn in range(size):
            if turn == rank:
                msg, kwargs = self.process(msg, kwargs)
                self.logger.log(level, msg, *args, **kwargs)
            if size > 1 and dist.is_initialized():
                dist.barrier()


def get_logger(name: str, log_level: str | None = None) -> MultiProcessAdapter:
    """A logger for ``name`` that logs on the main process unless told otherwise.

    Args:
        name: the logger's name (``__name__``).
        log_level: its level (default: ``ACCELERATE_LOG_LEVEL`` when set).

    Returns:
        A :class:`MultiProcessAdapter`.

    Example:
        >>> log = get_logger("train", log_level="INFO")
        >>> log.info("on the main process only")
    """
    log_level = log_level or os.environ.get("ACCELERATE_LOG_LEVEL")
    logger = logging.getLogger(name)
    if log_level is not None:
        logger.setLevel(log_level.upper())
        logger.root.setLevel(log_level.upper())
    return MultiProcessAdapter(logger, {})


__all__ = ["MultiProcessAdapter", "get_logger"]
