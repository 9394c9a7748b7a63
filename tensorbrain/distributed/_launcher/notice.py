"""tbrun's notices: ``tbrun: ...`` lines on stderr, written under the console lock."""
from __future__ import annotations

import sys

from .. import _output

_NOTICE = "tbrun:"


def notice(msg: str):
    """Print one of tbrun's notices (``tbrun: ...`` on stderr): a WARNING record of the
    ``tensorbrain.distributed.run`` logger, shown unless ``TB_LOG_LEVEL`` hides it.

    Args:
        msg: the text.
    """
    _notices().warning(msg)


def _notices():
    from ..._logging import prefixed_logger
    return prefixed_logger("tensorbrain.distributed.run", _NOTICE,
                           lambda data: _output.emit(sys.stderr.buffer, data))
