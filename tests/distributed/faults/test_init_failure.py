"""Findings 4 and 5: a rank (or the store host) that dies or freezes during init_process_group.

4 ranks, env:// rendezvous (rank 0 hosts the store, as under tbrun), group timeout 10 s. The
victim connects to the store and announces itself as every rank does, then is SIGKILLed (or
SIGSTOPped). Survivors must raise from init_process_group:

* victim on another rank, killed: within ~2 s (asserted < 4 s), naming the rank;
* victim is rank 0 (the store dies): as fast as a store ``get`` fails, with the store's error;
* victim is rank 0, frozen: within the timeout given (asserted < 10 s + 2 s), never twice it.

Nothing may be left in /tmp (no ``tb-*.sock`` of a survivor).
"""
import glob
import os
import signal
import time

import pytest

import tensorbrain.distributed as dist

HERE = "tests.distributed.faults.test_init_failure"
TIMEOUT = 10.0


def init_victim_worker(rank, size, victim, sig):
    from datetime import timedelta
    pid_file = os.path.join(os.path.dirname(os.environ["TB_TEST_RESULT"]), "victim.pid")
    try:
        return _init_observed(rank, size, victim, sig, pid_file, timedelta)
    finally:
        if sig == "stop":  # the last survivor to finish ends the frozen victim (no harness wait)
            tmp = os.path.dirname(pid_file)
            open(os.path.join(tmp, f"done-{rank}"), "w").close()
            end = time.monotonic() + 15
            while (sum(f.startswith("done-") for f in os.listdir(tmp)) < size - 1
                   and time.monotonic() < end):
                time.sleep(0.05)
            try:
                os.kill(int(open(pid_file).read()), signal.SIGKILL)
            except (OSError, ValueError):
                pass


def _init_observed(rank, size, victim, sig, pid_file, timedelta):
    if rank == victim:
        from tensorbrain.distributed import distributed_c10d as c10d
        from tensorbrain.distributed.store import PrefixStore, TCPStore
        store = TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), size,
                         rank == 0, timedelta(seconds=TIMEOUT), wait_for_workers=False)
        scoped = PrefixStore("tb_pg1", PrefixStore("tb/attempt0", store))  # as env:// scopes it
        c10d._announce(scoped, rank, size)  # joined, as init_process_group does
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(0.5)  # the others are waiting inside init_process_group by now
        os.kill(os.getpid(), signal.SIGKILL if sig == "kill" else signal.SIGSTOP)
        time.sleep(60)
    t0 = time.monotonic()
    try:
        dist.init_process_group("tcp", init_method="env://", timeout=timedelta(seconds=TIMEOUT))
    except Exception as exc:  # noqa: BLE001 - reported to the test
        cause = exc.__cause__
        return {"type": type(exc).__name__, "msg": str(exc), "secs": time.monotonic() - t0,
                "cause": type(cause).__name__ if cause is not None else None}
    dist.destroy_process_group()
    return {"type": None, "secs": time.monotonic() - t0}


def _run(workers, victim, sig, tmp_path):
    before = set(glob.glob("/tmp/tb-*.sock"))
    results = workers(f"{HERE}:init_victim_worker", 4, victim, sig, timeout=40,
                      group_timeout=TIMEOUT, init=None, raise_on_error=False,
                      env={"TB_SHM": "0"})
    for res in results:
        if res.rank == victim and sig == "stop" and res.pid:
            try:
                os.kill(res.pid, signal.SIGKILL)
            except OSError:
                pass
    time.sleep(0.2)
    ours = {r.pid for r in results}  # other programs on this machine may use /tmp too
    left = {p for p in set(glob.glob("/tmp/tb-*.sock")) - before
            if p.split("-")[1].isdigit() and int(p.split("-")[1]) in ours}
    assert not left, f"socket files left behind: {left}"
    return [r.value for r in results if r.rank != victim]


@pytest.mark.parametrize("victim", [1, 3])
def test_rank_killed_during_init_is_named(workers, victim, tmp_path):
    for obs in _run(workers, victim, "kill", tmp_path):
        assert obs["type"] is not None, obs
        assert f"rank {victim}" in obs["msg"] or f"rank(s) [{victim}]" in obs["msg"], obs
        assert obs["secs"] < 4.0, obs


def test_store_host_killed_during_init(workers, tmp_path):
    for obs in _run(workers, 0, "kill", tmp_path):
        assert obs["type"] is not None, obs
        assert obs["secs"] < 4.0, obs
        assert obs["cause"] == "DistStoreError" or "store" in obs["msg"], obs


def test_store_host_frozen_during_init(workers, tmp_path):
    for obs in _run(workers, 0, "stop", tmp_path):
        assert obs["type"] is not None, obs
        assert obs["secs"] < TIMEOUT + 2.0, obs
