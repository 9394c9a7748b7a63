"""``monitored_barrier`` through the group's store: the default of backends without a channel
of their own. Every rank checks in under ``mb/<n>/<rank>``; rank 0 waits for the others and
publishes a verdict naming the ranks that did not arrive."""
from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING

from ..errors import DistTimeoutError

if TYPE_CHECKING:
    from .base import Backend


def monitored_barrier(backend: Backend, timeout: float, wait_all_ranks: bool = False) -> None:
    """``dist.monitored_barrier`` on ``backend``'s store (see the module docstring)."""
    seq = backend._mb_seq
    backend._mb_seq = seq + 1
    key = f"mb/{seq}"
    backend.store.set(f"{key}/{backend.rank}", b"1")
    if backend.rank == 0:
        deadline = time.monotonic() + timeout
        missing = list(range(1, backend.size))
        while missing and time.monotonic() < deadline:
            missing = [r for r in missing if not backend.store.check([f"{key}/{r}"])]
            if missing:
                time.sleep(0.005)
        if missing:
            backend.store.set(f"{key}/verdict", ",".join(map(str, missing)).encode())
            raise DistTimeoutError(
                f"monitored_barrier of group {backend.group_name!r} timed out after {timeout} s: "
                f"rank(s) {missing} did not arrive" + ("" if wait_all_ranks else
                                                         " (first missing shown)"))
        backend.store.set(f"{key}/verdict", b"ok")
    else:
        try:  # rank 0 always answers within ``timeout`` unless it is the one missing
            backend.store.wait([f"{key}/verdict"], timedelta(seconds=timeout + 2.0))
        except Exception:  # noqa: BLE001 - the store's own timeout error
            raise DistTimeoutError(
                f"monitored_barrier of group {backend.group_name!r} timed out after {timeout} s "
                f"on rank {backend.rank}: rank 0 did not arrive (it reports the others)") from None
        verdict = backend.store.get(f"{key}/verdict")
        if verdict != b"ok":
            raise DistTimeoutError(
                f"monitored_barrier of group {backend.group_name!r} failed: rank 0 reports "
                f"rank(s) {verdict.decode()} did not arrive")
