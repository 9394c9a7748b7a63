"""``torch.distributed.elastic.utils.logging``: ``get_logger``."""
from __future__ import annotations

import inspect
import logging
import os

__all__ = ["get_logger"]


def get_logger(name: str | None = None) -> logging.Logger:
    """A ``logging.Logger`` named ``name`` (None: the calling module's name), at the level of
    ``LOGLEVEL`` when set (torch's variable; default WARNING).

    Args:
        name: the logger's name.

    Example:
        >>> from tensorbrain.distributed.elastic.utils.logging import get_logger
        >>> get_logger("tb.test").name
        'tb.test'
    """
    if name is None:
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        name = caller.f_globals.get("__name__", "torchelastic") if caller else "torchelastic"
    log = logging.getLogger(name)
    log.setLevel(os.environ.get("LOGLEVEL", "WARNING").upper())
    return log
