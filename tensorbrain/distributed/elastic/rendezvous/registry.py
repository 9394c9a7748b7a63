"""``torch.distributed.elastic.rendezvous.registry``: rendezvous handlers by backend name.

:func:`get_rendezvous_handler` makes the handler a :class:`RendezvousParameters` names, from the
creators registered in :data:`handler_registry` (``register(name, creator)``, as torch's).
Built in: ``"static"``, torch's static TCP rendezvous (every node knows its rank; node 0 serves
a TCPStore at the endpoint and :meth:`StaticTCPRendezvous.next_rendezvous` gives each node a
store prefixed by the run id). The dynamic backends (``"c10d"``, ``"etcd"``, ``"etcd-v2"``)
are refused by name: TensorBrain's dynamic rendezvous is ``tbrun --rdzv-backend c10d``'s.

>>> from tensorbrain.distributed.elastic.rendezvous import RendezvousParameters
>>> from tensorbrain.distributed.elastic.rendezvous.registry import get_rendezvous_handler
>>> h = get_rendezvous_handler(RendezvousParameters("static", "127.0.0.1:29511", "job", 1, 1,
...                                                 rank=0))
>>> h.get_backend(), h.get_run_id()
('static', 'job')
"""
from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...._unsupported import NotSupportedError
from . import RendezvousParameters


@dataclass
class RendezvousStoreInfo:
    """Where the store workers bootstrap from (torch's).

    Args:
        master_addr: the store's host.
        master_port: its port.
    """
    master_addr: str
    master_port: int


class RendezvousInfo:
    """What a rendezvous gives a node: the store, its rank, the world size, the bootstrap info.

    Args:
        store: the (prefixed) store.
        rank: this node's rank.
        world_size: the number of nodes.
        bootstrap_store_info: a :class:`RendezvousStoreInfo`.
    """

    def __init__(self, store, rank: int, world_size: int, bootstrap_store_info):
        self.store, self.rank, self.world_size = store, rank, world_size
        self.bootstrap_store_info = bootstrap_store_info


class RendezvousHandler:
    """The interface of a rendezvous (torch's method names); subclasses implement it."""

    def get_backend(self) -> str:
        """The backend's name."""
        raise NotImplementedError

    def next_rendezvous(self) -> RendezvousInfo:
        """Meet the other nodes; the result names this node's rank and the store."""
        raise NotImplementedError

    def is_closed(self) -> bool:
        """Whether the rendezvous is closed."""
        raise NotImplementedError

    def set_closed(self) -> None:
        """Close it."""
        raise NotImplementedError

    def num_nodes_waiting(self) -> int:
        """Nodes waiting to join."""
        raise NotImplementedError

    def get_run_id(self) -> str:
        """The job id."""
        raise NotImplementedError

    def shutdown(self) -> bool:
        """Release the rendezvous' resources."""
        raise NotImplementedError

    @property
    def use_agent_store(self) -> bool:
        """Whether workers reuse the agent's store."""
        return False


class StaticTCPRendezvous(RendezvousHandler):
    """torch's static rendezvous: ranks are given, node 0 serves the store.

    Args:
        master_addr: the store's host.
        master_port: its port.
        rank: this node's rank.
        world_size: the number of nodes.
        run_id: the job id (the store's key prefix).
        timeout: seconds to wait for the store.
    """

    def __init__(self, master_addr: str, master_port: int, rank: int, world_size: int,
                 run_id: str, timeout: int):
        self.master_addr, self.master_port = master_addr, master_port
        self.rank, self.world_size, self.run_id = rank, world_size, run_id
        self.timeout = datetime.timedelta(seconds=timeout)
        self._store: Any = None

    def get_backend(self) -> str:
        """``"static"``."""
        return "static"

    @property
    def use_agent_store(self) -> bool:
        """True: workers use this store."""
        return True

    def next_rendezvous(self) -> RendezvousInfo:
        """Open (node 0: serve) the TCPStore and return it under the run id's prefix."""
        from ...store import PrefixStore, TCPStore
        if self._store is None:
            self._store = TCPStore(self.master_addr, self.master_port, self.world_size,
                                   self.rank == 0, self.timeout)
        return RendezvousInfo(PrefixStore(self.run_id, self._store), self.rank,
                              self.world_size,
                              RendezvousStoreInfo(self.master_addr, self.master_port))

    def is_closed(self) -> bool:
        """Never closed."""
        return False

    def set_closed(self) -> None:
        """Nothing to close."""

    def num_nodes_waiting(self) -> int:
        """0: membership is fixed."""
        return 0

    def get_run_id(self) -> str:
        """The job id."""
        return self.run_id

    def shutdown(self) -> bool:
        """True."""
        return True


def _create_static_handler(params: RendezvousParameters) -> StaticTCPRendezvous:
    if "rank" not in params.config:
        raise ValueError("rank is absent in RendezvousParameters. Try add --node-rank to the "
                         "cmd request")
    endpoint = params.endpoint.strip()
    if not endpoint:
        raise ValueError("endpoint is absent in RendezvousParameters. Try add --master-port and "
                         "--master-addr to the cmd request")
    host, _, port = endpoint.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"Port is absent in endpoint: {endpoint}. Try launching with "
                         f"--master-port")
    timeout = int(params.config.get("timeout", 600))
    return StaticTCPRendezvous(host, int(port), int(params.config["rank"]), params.max_nodes,
                               params.run_id, timeout)


class RendezvousHandlerRegistry:
    """Backend name -> creator of a :class:`RendezvousHandler` (torch's registry)."""

    def __init__(self) -> None:
        self._registry: dict[str, Callable] = {}

    def register(self, backend: str, creator: Callable) -> None:
        """Register ``creator(params)`` for ``backend``.

        Args:
            backend: the backend's name.
            creator: a function of :class:`RendezvousParameters` returning a handler.

        Raises:
            ValueError: an empty name, or another creator already registered for it.
        """
        if not backend:
            raise ValueError("The rendezvous backend name must be a non-empty string.")
        current = self._registry.get(backend)
        if current is not None and current is not creator:
            raise ValueError(f"The rendezvous backend '{backend}' cannot be registered with "
                             f"'{creator}' as it is already registered with '{current}'.")
        self._registry[backend] = creator

    def create_handler(self, params: RendezvousParameters) -> RendezvousHandler:
        """The handler of ``params.backend``.

        Args:
            params: the rendezvous parameters.

        Raises:
            ValueError: no creator for the backend.
        """
        try:
            creator = self._registry[params.backend]
        except KeyError:
            raise ValueError(f"The rendezvous backend '{params.backend}' is not registered. "
                             f"Did you forget to call `register`?") from None
        handler = creator(params)
        if handler.get_backend() != params.backend:
            raise RuntimeError(f"The rendezvous backend '{handler.get_backend()}' does not match "
                               f"the requested backend '{params.backend}'.")
        return handler


def _refused(backend: str) -> Callable:
    def create(params):
        raise NotSupportedError(
            f"the '{backend}' rendezvous backend of torch.distributed.elastic is not supported "
            f"by TensorBrain: its dynamic rendezvous is tbrun's; use tbrun --rdzv-backend c10d "
            f"--rdzv-endpoint HOST:PORT (or the 'static' backend here)")
    return create


handler_registry = RendezvousHandlerRegistry()
handler_registry.register("static", _create_static_handler)
for _name in ("c10d", "etcd", "etcd-v2"):
    handler_registry.register(_name, _refused(_name))


def get_rendezvous_handler(params: RendezvousParameters) -> RendezvousHandler:
    """The rendezvous handler ``params.backend`` names, as torch's.

    Args:
        params: the rendezvous parameters.

    Raises:
        ValueError: an unknown backend or bad parameters.
        NotImplementedError: a dynamic backend (``c10d``, ``etcd``): use ``tbrun``.
    """
    return handler_registry.create_handler(params)


__all__ = ["get_rendezvous_handler"]
