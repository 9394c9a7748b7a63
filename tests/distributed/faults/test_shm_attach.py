"""Shared-memory attach during init_process_group is bounded by the init's own deadline.

2 ranks on one host, TB_SHM=1, env:// rendezvous, timeout 6 s. Rank 1 arrives 3.5 s late (the
mesh still forms within the deadline) and then never attaches to the shared-memory segment.
Rank 0 must fail at the init deadline (~6 s after it called init_process_group), not a whole
group timeout after the attach began (~9.5 s, as it did).
"""
import time

import pytest

import tensorbrain.distributed as dist

HERE = "tests.distributed.faults.test_shm_attach"
TIMEOUT = 6.0
LATE = 3.5


def late_attach_worker(rank, size):
    from datetime import timedelta
    if rank == 1:
        from tensorbrain.distributed._shm import transport

        def never_attach(*args, **kwargs):
            time.sleep(TIMEOUT)
            raise RuntimeError("rank 1 never attached (test)")
        transport.connect = never_attach
        time.sleep(LATE)
    t0 = time.monotonic()
    try:
        dist.init_process_group("tcp", init_method="env://", timeout=timedelta(seconds=TIMEOUT))
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return {"type": type(exc).__name__, "msg": str(exc), "secs": time.monotonic() - t0}
    dist.destroy_process_group()
    return {"type": None, "secs": time.monotonic() - t0}


def test_shm_attach_is_bounded_by_the_init_deadline(workers):
    pytest.importorskip("numpy")
    results = workers(f"{HERE}:late_attach_worker", 2, timeout=60, group_timeout=TIMEOUT,
                      init=None, raise_on_error=False, env={"TB_SHM": "1"})
    obs = results[0].value
    assert obs is not None and obs["type"] is not None, results[0].describe()
    assert "shm" in obs["msg"] or "shared memory" in obs["msg"], obs
    assert obs["secs"] < TIMEOUT + 1.5, obs  # the init deadline, not deadline + group timeout
