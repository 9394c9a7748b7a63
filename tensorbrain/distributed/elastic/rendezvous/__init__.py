"""``tb.distributed.elastic.rendezvous`` (``torch.distributed.elastic.rendezvous``):
:class:`RendezvousParameters`, the options of a rendezvous as torch's agents pass them around.
TensorBrain's launcher does its own rendezvous (``tbrun --rdzv-backend c10d``); torch's
handler registry (:mod:`.registry`: ``get_rendezvous_handler``) has the static TCP backend."""
from __future__ import annotations

from typing import Any


class RendezvousParameters:
    """The parameters of a rendezvous (torch's class, with its checks and getters).

    Args:
        backend: the rendezvous backend name.
        endpoint: ``host[:port]``.
        run_id: the job id.
        min_nodes: at least 1.
        max_nodes: at least ``min_nodes``.
        local_addr: this node's address.
        **kwargs: backend options (``config``).

    Raises:
        ValueError: an empty backend or bad node counts (torch's messages).
    """

    def __init__(self, backend: str, endpoint: str, run_id: str, min_nodes: int,
                 max_nodes: int, local_addr: str | None = None, **kwargs: Any) -> None:
        if not backend:
            raise ValueError("The rendezvous backend name must be a non-empty string.")
        if min_nodes < 1:
            raise ValueError(f"The minimum number of rendezvous nodes ({min_nodes}) must be "
                             f"greater than zero.")
        if max_nodes < min_nodes:
            raise ValueError(f"The maximum number of rendezvous nodes ({max_nodes}) must be "
                             f"greater than or equal to the minimum number of rendezvous nodes "
                             f"({min_nodes}).")
        self.backend, self.endpoint, self.run_id = backend, endpoint, run_id
        self.min_nodes, self.max_nodes = min_nodes, max_nodes
        self.config, self.local_addr = kwargs, local_addr

    def get(self, key: str, default: Any = None) -> Any:
        """The option ``key``, else ``default``."""
        return self.config.get(key, default)

    def get_as_bool(self, key: str, default: bool | None = None) -> bool | None:
        """The option ``key`` as a bool (``1``/``"true"``/``"yes"``...).

        Raises:
            ValueError: not a boolean value.
        """
        value = self.get(key, default)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str):
            if value.lower() in ("1", "true", "t", "yes", "y"):
                return True
            if value.lower() in ("0", "false", "f", "no", "n"):
                return False
        raise ValueError(f"The rendezvous configuration option '{key}' does not represent a "
                         f"valid boolean value.")

    def get_as_int(self, key: str, default: int | None = None) -> int | None:
        """The option ``key`` as an int.

        Raises:
            ValueError: not an integer.
        """
        value = self.get(key, default)
        if value is None:
            return value
        try:
            return int(value)
        except ValueError as e:
            raise ValueError(f"The rendezvous configuration option '{key}' does not represent "
                             f"a valid integer value.") from e


__all__ = ["RendezvousParameters"]
