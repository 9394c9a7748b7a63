"""``torch.distributed.elastic.utils.distributed``: ``get_free_port``."""
from __future__ import annotations

import socket

__all__ = ["get_free_port"]


def get_free_port() -> int:
    """A TCP port free on this host now (the OS picks it; another process may take it later).

    Example:
        >>> from tensorbrain.distributed.elastic.utils.distributed import get_free_port
        >>> 0 < get_free_port() < 65536
        True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])
