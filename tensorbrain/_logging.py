"""TensorBrain's loggers: ``logging`` loggers per package, level from ``TB_LOG_LEVEL``.

Every module logs through ``logging.getLogger("tensorbrain.<package>")`` (``get_logger``):
``tensorbrain``, ``tensorbrain.distributed``, ``tensorbrain.distributed.store``, ... The
``tensorbrain`` logger has one stderr handler whose records read

    [tensorbrain rank 1] WARNING tensorbrain.distributed: message

(the ``rank N`` part appears once a default process group exists in this process: the
:class:`RankFilter` adds ``record.rank``). Its level comes from ``TB_LOG_LEVEL`` (DEBUG, INFO,
WARNING (default) or ERROR; another value is an error naming them). As torch's loggers, it does
not propagate to the root logger; to collect records elsewhere, add your handler to
``logging.getLogger("tensorbrain")`` (adding the filter gives your records ``%(rank)s`` too).

``TB_DISTRIBUTED_DEBUG=INFO`` or ``DETAIL`` lowers ``tensorbrain.distributed`` to INFO (if
``TB_LOG_LEVEL`` is not lower already): each collective's summary is an INFO record there.

>>> import logging
>>> from tensorbrain import _logging
>>> _logging.get_logger("tensorbrain.distributed").name
'tensorbrain.distributed'
>>> logging.getLogger("tensorbrain").propagate
False
"""
from __future__ import annotations

import logging
import sys

from . import _config

ROOT = "tensorbrain"
FORMAT = "[%(tbprefix)s] %(levelname)s %(name)s: %(message)s"
_configured = False


def _current_rank():
    """This process's global rank, or None while no default process group exists."""
    c10d = sys.modules.get("tensorbrain.distributed.distributed_c10d")
    if c10d is None:
        return None
    world = getattr(c10d, "_WORLD", None)
    if world is None or world.default is None:
        return None
    return world.global_rank if world.global_rank >= 0 else world.default.rank()


class RankFilter(logging.Filter):
    """Adds ``record.rank`` ("" or " rank N") and ``record.tbprefix`` ("tensorbrain[ rank N]")."""

    def filter(self, record: logging.LogRecord) -> bool:
        rank = _current_rank()
        text = "" if rank is None else f" rank {rank}"
        record.__dict__.update(rank=text, tbprefix="tensorbrain" + text)  # as logging's extra=
        return True


class _StderrHandler(logging.StreamHandler):
    """A StreamHandler on whatever ``sys.stderr`` is at emit time (pytest's capture, redirects)."""

    def __init__(self):
        super().__init__(sys.stderr)

    def emit(self, record):
        self.stream = sys.stderr
        super().emit(record)


def configure(env=None) -> logging.Logger:
    """Set up the ``tensorbrain`` logger once (level from TB_LOG_LEVEL, the stderr handler).

    Args:
        env: a mapping to read the variables from instead of ``os.environ`` (tests).

    Returns:
        logging.Logger: the ``tensorbrain`` logger.

    Raises:
        ValueError: TB_LOG_LEVEL or TB_DISTRIBUTED_DEBUG has a value outside the allowed ones.
    """
    global _configured
    root = logging.getLogger(ROOT)
    level = _config.get("TB_LOG_LEVEL", env)
    debug = _config.get("TB_DISTRIBUTED_DEBUG", env)
    root.setLevel(getattr(logging, level))
    dist = logging.getLogger(ROOT + ".distributed")
    if debug in ("INFO", "DETAIL") and root.level > logging.INFO:
        dist.setLevel(logging.INFO)
    else:
        dist.setLevel(logging.NOTSET)
    if not _configured:
        handler = _StderrHandler()
        handler.addFilter(RankFilter())
        handler.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(handler)
        root.propagate = False
        _configured = True
    return root


def get_logger(name: str) -> logging.Logger:
    """The logger ``name`` (under ``tensorbrain``), configured on first use."""
    if not _configured:
        configure()
    return logging.getLogger(name)


class _WriteHandler(logging.Handler):
    """Formats records and passes the bytes to ``write`` (tbrun's console writer and its lock)."""

    def __init__(self, prefix: str, write):
        super().__init__()
        self.prefix, self.write = prefix, write

    def emit(self, record):
        try:
            self.write(f"{self.prefix} {record.getMessage()}\n".encode())
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)


def prefixed_logger(name: str, prefix: str, write) -> logging.Logger:
    """A logger under ``tensorbrain`` whose records are written as ``prefix message`` by ``write``.

    tbrun's notices use it: they keep their ``tbrun:`` form on the console and obey
    ``TB_LOG_LEVEL`` (they are WARNING records, so ERROR hides them).
    """
    log = get_logger(name)
    if not any(isinstance(h, _WriteHandler) for h in log.handlers):
        log.addHandler(_WriteHandler(prefix, write))
        log.propagate = False
    return log
