"""Rendezvous: turn an ``init_method`` URL into ``(store, rank, world_size)``.

Handlers for three schemes, as ``torch.distributed.rendezvous``:

- ``env://`` -- rank and world size from the environment (``RANK``/``WORLD_SIZE`` as tbrun and
  torchrun set them, else Open MPI, MPICH/Hydra or Slurm variables, see ``_env.resolve``) and a
  :class:`TCPStore` at ``MASTER_ADDR:MASTER_PORT`` served by rank 0 (or, under ``tbrun``, by the
  launcher's agent: ``TB_USE_AGENT_STORE=1``; under torchrun itself,
  ``TORCHELASTIC_USE_AGENT_STORE=True``: torchrun's agent store, joined through torch's own
  client, see ``_store/torch_agent.py``). With a world size of 1 the store is a
  :class:`HashStore`: a plain ``python train.py`` needs no address or port.
- ``tcp://host:port?rank=R&world_size=N`` -- a TCPStore at host:port, served by rank 0.
- ``file:///path?rank=R&world_size=N`` -- a :class:`FileStore` on a shared filesystem.

Explicit ``rank``/``world_size`` arguments are added to the URL's query (a conflict is an error);
missing ones fall back to the environment, so ``tcp://`` works under ``mpiexec`` too.

Every store handed out is a :class:`PrefixStore` scoped by the restart count
(``TB_RESTART_COUNT``, set by tbrun): after a restart the new group only sees keys written in this
attempt, never the addresses the previous (dead) attempt published: a group that read those
would try to connect to processes that no longer exist.

>>> import os, tempfile
>>> url = "file://" + os.path.join(tempfile.mkdtemp(), "rdzv")
>>> store, rank, world_size = next(rendezvous(url, rank=0, world_size=1))
>>> rank, world_size, store.prefix
(0, 1, 'tb/attempt0')
"""
from __future__ import annotations

import os
from datetime import timedelta
from typing import Callable, Iterator
from urllib.parse import parse_qs, urlencode, urlparse, urlunparse

from .. import _config
from . import _env
from .errors import DistStoreError
from .store import FileStore, HashStore, PrefixStore, Store, TCPStore

DEFAULT_TIMEOUT = timedelta(minutes=30)  # torch's default_pg_timeout

RendezvousHandler = Callable[..., Iterator[tuple[Store, int, int]]]
_handlers: dict[str, RendezvousHandler] = {}


def register_rendezvous_handler(scheme: str, handler: RendezvousHandler) -> None:
    """Register ``handler(url, **kwargs)`` (a generator yielding ``(store, rank, world_size)``)
    for ``scheme://`` URLs.

    Args:
        scheme: the URL scheme, e.g. ``"tcp"``.
        handler: the generator function.

    Raises:
        RuntimeError: a handler for ``scheme`` is already registered.
    """
    if scheme in _handlers:
        raise RuntimeError(f"a rendezvous handler for {scheme}:// is already registered")
    _handlers[scheme] = handler


def rendezvous(url: str, rank: int = -1, world_size: int = -1,
               timeout: timedelta = DEFAULT_TIMEOUT, **kwargs) -> Iterator[tuple[Store, int, int]]:
    """Meet the other ranks through ``url``; yields ``(store, rank, world_size)``.

    Args:
        url: ``env://``, ``tcp://host:port`` or ``file:///path`` (or a registered scheme), with
            optional ``?rank=..&world_size=..``.
        rank: this process's rank; -1 to take it from the URL or the environment.
        world_size: the number of ranks; -1 to take it from the URL or the environment.
        timeout: how long to wait for the store.
        **kwargs: passed to the handler.

    Raises:
        TypeError: ``url`` is not a str.
        ValueError: no handler for the scheme, or ``rank``/``world_size`` disagree with the URL.
    """
    if not isinstance(url, str):
        raise TypeError(f"rendezvous URL must be a str, got {type(url).__name__}")
    parsed = urlparse(url)
    scheme = parsed.scheme
    if scheme not in _handlers:
        known = ", ".join(f"{s}://" for s in sorted(_handlers))
        raise ValueError(f"no rendezvous handler for {url!r} (scheme {scheme!r}); known: {known}")
    if rank != -1 or world_size != -1:
        query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        for name, value in (("rank", rank), ("world_size", world_size)):
            if value == -1:
                continue
            if name in query and int(query[name]) != value:
                raise ValueError(f"{name}={value} conflicts with {name}={query[name]} in {url!r}")
            query[name] = str(value)
        url = urlunparse(parsed._replace(query=urlencode(query)))
    return _handlers[scheme](url, timeout=timeout, **kwargs)


# ***** helpers *****

def _query(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(url).query).items()}


def _rank_and_size(url: str, env) -> tuple[int, int]:
    q = _query(url)
    try:
        rank = int(q["rank"]) if "rank" in q else None
        world = int(q["world_size"]) if "world_size" in q else None
    except ValueError:
        raise ValueError(f"rank and world_size in {url!r} must be integers") from None
    if rank is None or world is None:
        placement = _env.resolve(env)
        if placement.source == "single" and (rank is None) != (world is None):
            missing = "rank" if rank is None else "world_size"
            raise ValueError(f"{url!r}: {missing} is missing (pass it to init_process_group, add "
                             f"?{missing}=... to the URL, or launch with tbrun)")
        rank = placement.rank if rank is None else rank
        world = placement.world_size if world is None else world
    if world < 1:
        raise ValueError(f"world_size must be >= 1, got {world} ({url!r})")
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is out of range for world_size {world}; ranks are "
                         f"0..{world - 1} ({url!r})")
    return rank, world


def _scoped(store: Store) -> PrefixStore:
    """Scope by attempt so a restarted group never reads the previous attempt's keys."""
    # TB_ROUND (tbrun) also changes when a node joins late without a failure
    scope = os.environ.get("TB_ROUND") or _config.get("TB_RESTART_COUNT")
    return PrefixStore(f"tb/attempt{scope}", store)


def _tcp_store(host, port, rank, world, timeout, agent_store=False) -> TCPStore:
    if agent_store:  # tbrun's agent already serves the store; every rank is a client
        return TCPStore(host, port, None, False, timeout)
    # The master does not wait here for the others to connect: init_process_group's join check
    # waits for them by rank, names the missing ones (every TB_WAIT_REPORT_S on rank 0) and a
    # rank that joined and died, all within the one deadline it was given.
    return TCPStore(host, port, world, rank == 0, timeout, wait_for_workers=False)


# ***** the handlers *****

def _env_handler(url: str, timeout: timedelta = DEFAULT_TIMEOUT, **kwargs):
    env = os.environ
    rank, world = _rank_and_size(url, env)
    if world == 1:
        # Nobody else will ever connect, so an in-process store is equivalent and the same
        # script runs as a plain `python train.py` without MASTER_ADDR/MASTER_PORT or a free port.
        yield _scoped(HashStore(timeout)), rank, world
        return
    placement = _env.resolve(env)
    missing = [v for v in ("MASTER_ADDR", "MASTER_PORT") if not env.get(v, "").strip()]
    if placement.source == "torchrun" and missing:
        # RANK/WORLD_SIZE set by hand: without the address rank 0 is guessed on 127.0.0.1:29500
        # and a rank on another host (or a script without a rank 0) would wait there forever
        raise ValueError(f"env:// rendezvous: RANK={rank} and WORLD_SIZE={world} are set but "
                         f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not; "
                         "export MASTER_ADDR=<host of rank 0> and MASTER_PORT=<free port> on "
                         "every rank, pass init_method='tcp://host:port', or launch with tbrun "
                         "(which sets all four)")
    if placement.master_addr is None:
        raise ValueError(f"env:// rendezvous: MASTER_ADDR is not set and {placement.source} does "
                         "not say which host runs rank 0; export MASTER_ADDR=<host of rank 0> "
                         "(and MASTER_PORT) on every rank")
    agent = _config.get("TB_USE_AGENT_STORE")
    if not agent and env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true":
        # launched by torchrun itself: its agent serves MASTER_PORT; join it, never listen
        from ._store.torch_agent import TorchAgentStore
        agent_store = TorchAgentStore(placement.master_addr, placement.master_port, timeout)
        yield _scoped(agent_store), rank, world
        return
    store = _tcp_store(placement.master_addr, placement.master_port, rank, world, timeout, agent)
    yield _scoped(store), rank, world


def _tcp_handler(url: str, timeout: timedelta = DEFAULT_TIMEOUT, **kwargs):
    parsed = urlparse(url)
    if not parsed.hostname or parsed.port is None:
        raise ValueError(f"tcp:// rendezvous needs tcp://host:port, got {url!r}")
    rank, world = _rank_and_size(url, os.environ)
    store = _tcp_store(parsed.hostname, parsed.port, rank, world, timeout)
    yield _scoped(store), rank, world


def _file_handler(url: str, timeout: timedelta = DEFAULT_TIMEOUT, **kwargs):
    parsed = urlparse(url)
    path = parsed.path if not parsed.netloc else parsed.netloc + parsed.path
    if not path:
        raise ValueError(f"file:// rendezvous needs a path, got {url!r}")
    rank, world = _rank_and_size(url, os.environ)
    try:
        store = FileStore(path, world, timeout=timeout)
    except DistStoreError as exc:
        raise DistStoreError(f"file:// rendezvous {url!r}: {exc}") from None
    yield _scoped(store), rank, world


register_rendezvous_handler("env", _env_handler)
register_rendezvous_handler("tcp", _tcp_handler)
register_rendezvous_handler("file", _file_handler)
