"""Is a joined rank still alive? Bounded, sliced waits for init_process_group and backend setup.

A rank that joined (announced itself in the store) and then died used to make the others wait
their whole timeout, or twice it: init waited once for the join and once more for the backend's
addresses. Here every init-time wait on the store runs in short slices against ONE deadline, and
between slices the ranks that announced themselves and are still missing are checked: same-host
ranks through /proc (gone, zombie, or stopped), every rank through its store announcement. A
store that fails (its host died) ends the wait at once with the store's error as the cause; a
store that does not answer (its host is frozen) ends it at the deadline.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from datetime import timedelta

from .errors import DistBackendError, DistStoreError, DistTimeoutError

SLICE_S = 0.25  # how often a waiting rank re-checks the ranks it waits for
# How long the rank that serves the store keeps serving after it found a dead rank, before it
# raises: the others are waiting on that store and learn the death from it at their next slice;
# were the host to raise and exit at once, they would see only "the store failed".
LINGER_S = 4 * SLICE_S


def proc_state(pid: int):
    """'died (...)', 'is stopped (...)' or None for a running process (Linux /proc)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"died (its process {pid} is gone)"
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    state = stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3]
    if state in (b"Z", b"X", b"x"):
        return f"died (its process {pid} exited)"
    if state in (b"T", b"t"):
        return (f"is stopped (process {pid} is in state {state.decode()}: SIGSTOP, Ctrl-Z or a "
                "debugger) and not running")
    return None


def host_identity() -> tuple:
    """(hostname, host id). Ranks with the same host id share a kernel *and* a network
    namespace: containers or netns "hosts" on one machine count as different hosts, so they talk
    TCP as separate machines would (their Unix sockets and shared memory may not be shared)."""
    host = socket.gethostname()
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = "no-boot-id"
    try:
        netns = os.readlink("/proc/self/ns/net")
    except OSError:
        netns = "no-netns"
    return host, f"{host}/{boot}/{netns}"


def host_id() -> str:
    """This process's host id (see :func:`host_identity`)."""
    return host_identity()[1]


def announce(store, rank: int) -> None:
    """Publish this process's pid and host identity (read by :func:`failed_ranks`)."""
    store.set(f"live/{rank}", json.dumps({"pid": os.getpid(), "host": host_id()}).encode())


def failed_ranks(store, ranks, deadline: float, known: dict | None = None) -> dict:
    """``{rank: 'died (...)'}`` for the ranks among ``ranks`` that announced themselves on this
    host and are no longer running (other hosts' ranks cannot be checked from here). ``known``
    caches the announcements read (so they can be checked after the store itself is gone)."""
    known = {} if known is None else known
    for j in ranks:
        key = f"live/{j}"
        if j in known or store is None:
            continue
        if call(lambda k=key: store.check([k]), deadline, store):
            known[j] = json.loads(bytes(call(lambda k=key: store.get(k), deadline, store)))
    me, out = host_id(), {}
    for j in ranks:
        rec = known.get(j)
        if rec and rec.get("host") == me and rec.get("pid"):
            state = proc_state(int(rec["pid"]))
            if state:
                out[j] = state
    return out


def call(fn, deadline: float, store=None):
    """``fn()`` (a store operation) bounded by ``deadline``: a store whose host is frozen does
    not hold us past it. Store failures other than timeouts propagate as they are."""
    box: list = []

    def run():
        try:
            box.append((True, fn()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box.append((False, exc))
    t = threading.Thread(target=run, daemon=True, name="tb-store-call")
    t.start()
    t.join(max(0.0, deadline - time.monotonic()) + 0.05)
    if not box:
        where = getattr(store, "describe", lambda: "the store")()
        raise DistStoreError(f"{where} did not answer before the deadline: its host is frozen, "
                             "overloaded or unreachable")
    ok, value = box[0]
    if ok:
        return value
    raise value


def wait_keys(store, keys, deadline: float, what: str, watch=(), report=None):
    """Wait until every key of ``keys`` is set, by ``deadline`` (monotonic), in slices; between
    slices, a rank of ``watch`` (key index -> rank) that announced itself and died raises
    `DistBackendError` naming it. A failing store raises at once (`DistStoreError`, chained);
    the deadline raises `DistTimeoutError` listing the ranks whose keys are missing."""
    keys = list(keys)
    known: dict = {}
    ranks: list = []
    from .. import _config
    every = float(_config.get("TB_WAIT_REPORT_S"))
    start = last = time.monotonic()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        piece = timedelta(seconds=min(SLICE_S, left))
        try:
            call(lambda p=piece: store.wait(keys, p), deadline, store)
            return
        except DistStoreError as exc:
            if "timed out" not in str(exc):  # the store failed: name a dead rank if we can
                dead = failed_ranks(None, ranks, deadline, known)
                also = "".join(f"; rank {j} {st}" for j, st in dead.items())
                raise DistStoreError(f"{what}: the store failed: {exc}{also}") from exc
        try:
            missing = [j for j, k in enumerate(keys) if not call(lambda k=k: store.check([k]),
                                                                   deadline, store)]
            if not missing:
                return
            ranks = [watch[j] for j in missing if j in watch]
            dead = failed_ranks(store, ranks, deadline, known) if ranks else {}
            now = time.monotonic()
            if report is not None and every > 0 and now - last >= every:
                last = now
                joined = [r for j, r in sorted(dict(watch).items()) if j not in missing]
                report(joined, ranks, now - start)
        except DistStoreError as exc:
            dead = failed_ranks(None, ranks, deadline, known)
            also = "".join(f"; rank {j} {st}" for j, st in dead.items())
            raise DistStoreError(f"{what}: the store failed: {exc}{also}") from exc
        if dead:
            if _serves(store):
                time.sleep(max(0.0, min(LINGER_S, deadline - time.monotonic())))
            raise DistBackendError(f"{what}: " + "; ".join(f"rank {j} {st}" for j, st in
                                                          dead.items())
                                   + " after joining; restart the job")
    missing = [j for j, k in enumerate(keys) if not _safe_check(store, k, deadline)]
    who = [watch.get(j, j) for j in missing] if watch else missing
    err = DistTimeoutError(f"{what}: rank(s) {who or '?'} did not arrive in time")
    setattr(err, "missing", who)  # noqa: B010 - read by init_process_group's message
    raise err


def _serves(store) -> bool:
    """Whether this process runs the server of ``store`` (through any prefix wrappers)."""
    while hasattr(store, "underlying_store"):
        store = store.underlying_store
    return bool(getattr(store, "is_master", False))


def _safe_check(store, key, deadline) -> bool:
    try:
        return bool(call(lambda: store.check([key]), max(deadline, time.monotonic() + 1.0),
                         store))
    except Exception:  # noqa: BLE001
        return False
