"""Failures of the tcp backend become clear errors on every rank, within the group timeout.

Each scenario runs in real processes; the worker functions below return what they observed
(exception type, message, seconds until the error) and the tests check the words and the timing.
"""
import os
import signal
import time

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist

HERE = "tests.distributed.test_tcp_failures"
GROUP_TIMEOUT = 1.5


def _observe(fn):
    t0 = time.monotonic()
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return {"type": type(exc).__name__, "msg": str(exc), "secs": time.monotonic() - t0,
                "backend_error": isinstance(exc, dist.DistBackendError),
                "timeout": isinstance(exc, dist.DistTimeoutError)}
    return {"type": None, "secs": time.monotonic() - t0}


def skip_worker(rank, size):
    """Rank size-1 skips an all_reduce (sleeps past the timeout); the others must raise."""
    t = tb.tensor(np.ones(4, np.float32))
    dist.all_reduce(t)  # everyone takes part once
    if rank == size - 1:
        time.sleep(GROUP_TIMEOUT + 1.5)
        return {"type": "skipped"}
    first = _observe(lambda: dist.all_reduce(t))
    later = _observe(lambda: dist.barrier())  # the group is poisoned: raises at once
    return {"first": first, "later": later}


# TB_SHM=0: sockets only; 1: same-host ranks go through shared memory (the default)
SHM = pytest.mark.parametrize("shm", ["0", "1"])


@SHM
def test_rank_that_skips_a_collective(workers, shm):
    res = workers(f"{HERE}:skip_worker", 3, timeout=30, group_timeout=GROUP_TIMEOUT,
                  env={"TB_SHM": shm})
    for rank in (0, 1):
        first, later = res[rank]["first"], res[rank]["later"]
        assert first["backend_error"], first
        assert first["secs"] < GROUP_TIMEOUT + 1.5, first
        assert "all_reduce (seq 1)" in first["msg"] and "'default'" in first["msg"], first
        assert later["backend_error"] and later["secs"] < 0.5, later
        assert "failed earlier and is unusable" in later["msg"], later
    # at least one rank saw the timeout itself and names the rank it waited for
    timeouts = [res[r]["first"] for r in (0, 1) if res[r]["first"]["timeout"]]
    assert timeouts and any("rank 2" in t["msg"] for t in timeouts), res


def killed_worker(rank, size, count):
    t = tb.tensor(np.ones(count, np.float32))
    dist.all_reduce(t)
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    obs = _observe(lambda: dist.all_reduce(t))
    # Stay a moment: a survivor that exits at once can be what the slower survivor notices
    # first (its sockets close), and this test is about naming the killed rank, not that race
    # (test_peer_failure.py covers survivors that fail and leave).
    time.sleep(1.0)
    return obs


@SHM
@pytest.mark.parametrize("count", [8, 400_000])  # direct exchange and ring
def test_killed_peer_is_noticed_at_once(workers, count, shm):
    results = workers(f"{HERE}:killed_worker", 3, count, timeout=30, group_timeout=20,
                      raise_on_error=False, env={"TB_SHM": shm})
    assert results[1].exitcode == -signal.SIGKILL
    for rank in (0, 2):
        obs = results[rank].value
        assert obs["backend_error"] and not obs["timeout"], obs
        assert obs["secs"] < 3.0, obs   # EOF, not the 20 s timeout
        assert "rank 1" in obs["msg"], obs


def mismatch_worker(rank, size, kind):
    if kind == "size":
        n = 10 if rank == size - 1 else 8
        fn = lambda: dist.all_reduce(tb.tensor(np.ones(n, np.float32)))  # noqa: E731
    elif kind == "size-ring":
        n = 300_000 if rank == size - 1 else 300_001
        fn = lambda: dist.all_reduce(tb.tensor(np.ones(n, np.float32)))  # noqa: E731
    elif kind == "dtype":
        dt = np.float64 if rank == 1 else np.float32
        fn = lambda: dist.all_reduce(tb.tensor(np.ones(4, dt)))  # noqa: E731
    else:  # different collectives
        t = tb.tensor(np.ones(4, np.float32))
        fn = (lambda: dist.broadcast(t, src=0)) if rank == 0 else (lambda: dist.all_reduce(t))
    obs = _observe(fn)
    if obs["type"] is None:
        # A rank that only sends (the root of a broadcast) cannot see the mismatch in that op;
        # the receivers poison the group, so its next op must fail at once.
        obs = _observe(lambda: dist.barrier())
        obs["next_op"] = True
    return obs


@pytest.mark.parametrize("shm", ["0", "1"])
@pytest.mark.parametrize("kind", ["size", "size-ring", "dtype", "op"])
def test_mismatch_raises_on_every_rank(workers, kind, shm):
    res = workers(f"{HERE}:mismatch_worker", 3, kind, timeout=30, group_timeout=10,
                  env={"TB_SHM": shm})
    for rank, obs in enumerate(res):
        assert obs["backend_error"], (kind, res)
        assert not obs.get("next_op") or (kind == "op" and rank == 0), (kind, res)
        assert obs["secs"] < 5.0, (kind, res)   # well before the 10 s timeout
    assert any("mismatch between ranks" in obs["msg"] for obs in res), res


def monitored_worker(rank, size):
    if rank == size - 1:
        time.sleep(2.5)
        return {"type": "absent"}
    return _observe(lambda: dist.monitored_barrier(timeout=1.0))


def test_monitored_barrier_names_missing_rank(workers):
    res = workers(f"{HERE}:monitored_worker", 3, timeout=30, group_timeout=10)
    assert res[0]["timeout"] and "[2]" in res[0]["msg"], res[0]
    assert res[1]["timeout"] and "2" in res[1]["msg"], res[1]


def wait_timeout_worker(rank, size):
    t = tb.tensor(np.ones(4, np.float32))
    if rank == 1:
        time.sleep(1.5)
        dist.all_reduce(t)
        return {"type": None}
    w = dist.all_reduce(t, async_op=True)
    first = _observe(lambda: w.wait(timeout=0.3))   # still running: Work.wait times out
    w.wait()                                        # the op itself completes later
    return {"first": first, "value": float(t._data[0]), "done": w.is_completed()}


def test_work_wait_timeout(workers):
    res = workers(f"{HERE}:wait_timeout_worker", 2, timeout=30, group_timeout=10)
    assert res[0]["first"]["timeout"] and "still running" in res[0]["first"]["msg"]
    assert res[0]["value"] == 2.0 and res[0]["done"]


def monitored_rank0_absent(rank, size):
    if rank == 0:
        time.sleep(2.5)
        return {"type": "absent"}
    return _observe(lambda: dist.monitored_barrier(timeout=0.5))


def test_monitored_barrier_without_rank0(workers):
    res = workers(f"{HERE}:monitored_rank0_absent", 2, timeout=30, group_timeout=10)
    assert res[1]["timeout"] and "rank 0 did not arrive" in res[1]["msg"], res[1]
    assert res[1]["secs"] < 4.0, res[1]


@pytest.mark.parametrize("kind", ["size", "dtype", "op"])
def test_detail_debug_catches_mismatches_on_any_transport(workers, kind):
    """TB_DISTRIBUTED_DEBUG=DETAIL compares every call over the sockets first, so a mismatch is
    caught on every rank even when the op itself would run in shared memory."""
    res = workers(f"{HERE}:mismatch_worker", 3, kind, timeout=30, group_timeout=10,
                  env={"TB_SHM": "1", "TB_DISTRIBUTED_DEBUG": "DETAIL"})
    for obs in res:
        assert obs["backend_error"] and not obs.get("next_op"), (kind, res)
        assert "TB_DISTRIBUTED_DEBUG=DETAIL" in obs["msg"] and "rank 2:" in obs["msg"], obs


def detail_ok_worker(rank, size):
    from tests.distributed import collective_suite as S
    return S.run_some(rank, size, "tcp", ["check_all_reduce", "check_broadcast",
                                          "check_reduce_scatter", "check_barrier"])


def test_detail_debug_passes_matching_calls(workers):
    res = workers(f"{HERE}:detail_ok_worker", 3, timeout=60, group_timeout=20,
                  env={"TB_DISTRIBUTED_DEBUG": "DETAIL"})
    assert res[0] == res[1] == res[2]
