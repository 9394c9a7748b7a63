"""Finding 1: a mismatched collective is an error on every rank, on every backend, always.

Rank 0 calls one collective, the other ranks a different one (op, dtype, element count, kind or
root). Before the fix the sockets (TB_SHM=0) returned different values per rank for MAX vs SUM
and the mpi backend returned garbage for every mismatch. Each rank must raise DistBackendError
naming the mismatch well before the group timeout, and the group is then unusable.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist

HERE = "tests.distributed.faults.test_mismatch"
GROUP_TIMEOUT = 20.0
ROOT = Path(__file__).resolve().parents[3]

# case -> (what rank 0 does, what the other ranks do); each is (collective, dtype, count, op/root)
CASES = {
    "op": (("all_reduce", "float32", 4, "max"), ("all_reduce", "float32", 4, "sum")),
    "op_one_element": (("all_reduce", "float32", 1, "max"), ("all_reduce", "float32", 1, "sum")),
    "dtype": (("all_reduce", "float32", 4, "sum"), ("all_reduce", "float64", 4, "sum")),
    "dtype_same_bytes": (("all_reduce", "int32", 4, "sum"), ("all_reduce", "float32", 4, "sum")),
    "count": (("all_reduce", "float32", 4, "sum"), ("all_reduce", "float32", 2, "sum")),
    "count_3_1": (("all_reduce", "float32", 3, "sum"), ("all_reduce", "float32", 1, "sum")),
    "kind": (("all_reduce", "float32", 4, "sum"), ("broadcast", "float32", 4, 0)),
    "big_op": (("all_reduce", "float32", 1 << 20, "max"), ("all_reduce", "float32", 1 << 20, "sum")),
}
# root mismatches: caught by the shared-memory control blocks, the mpi layer and DETAIL mode
ROOT_CASES = {
    "broadcast_root": (("broadcast", "float32", 4, 0), ("broadcast", "float32", 4, 1)),
}
# same dtype and count, other shapes: only TB_DISTRIBUTED_DEBUG=DETAIL compares shapes
DETAIL_CASES = {
    "shape": (("all_reduce", "float32", (2, 3), "sum"), ("all_reduce", "float32", (3, 2), "sum")),
}


def call(spec, rank, group=None):
    kind, dtype, count, arg = spec
    x = tb.tensor(np.full(count, rank + 1, dtype=dtype))  # count may be a shape
    if kind == "all_reduce":
        dist.all_reduce(x, op=getattr(dist.ReduceOp, arg.upper()), group=group)
    elif kind == "broadcast":
        dist.broadcast(x, src=arg, group=group)
    return x.numpy().tolist()[:4]


def observe(fn):
    t0 = time.monotonic()
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return {"error": type(exc).__name__, "msg": str(exc), "secs": time.monotonic() - t0,
                "backend_error": isinstance(exc, dist.DistBackendError)}
    return {"error": None, "value": value, "secs": time.monotonic() - t0}


def mismatch_worker(rank, size, case):
    specs = {**CASES, **ROOT_CASES, **DETAIL_CASES}[case]
    dist.all_reduce(tb.tensor(np.ones(2, np.float32)))  # a matched op first: seq 0
    first = observe(lambda: call(specs[0] if rank == 0 else specs[1], rank))
    later = observe(lambda: dist.all_reduce(tb.tensor(np.ones(2, np.float32))))
    return {"first": first, "later": later}


def check(results, case, limit):
    for rank, res in enumerate(results):
        first, later = res["first"], res["later"]
        assert first["error"] is not None, f"{case}: rank {rank} returned {first} (silent)"
        assert first["backend_error"], (case, rank, first)
        assert "mismatch" in first["msg"] or "differ" in first["msg"], (case, rank, first)
        assert first["secs"] < limit, (case, rank, first)
        assert later["error"] is not None, (case, rank, later)


@pytest.mark.parametrize("shm", ["0", "1"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_mismatch_tcp(workers, run_id, case, shm):
    res = workers(f"{HERE}:mismatch_worker", 2, case, timeout=60, group_timeout=GROUP_TIMEOUT,
                  env={"TB_SHM": shm, "TB_RUN_ID": run_id})
    check(res, case, limit=5.0)


@pytest.mark.parametrize("case", sorted(ROOT_CASES))
@pytest.mark.parametrize("mode", ["shm", "detail"])
def test_root_mismatch_tcp(workers, run_id, case, mode):
    env = {"TB_SHM": "1", "TB_RUN_ID": run_id} if mode == "shm" else \
        {"TB_SHM": "0", "TB_DISTRIBUTED_DEBUG": "DETAIL"}
    res = workers(f"{HERE}:mismatch_worker", 2, case, timeout=60, group_timeout=GROUP_TIMEOUT,
                  env=env)
    check(res, case, limit=5.0)


def detail_worker(rank, size):
    x = tb.tensor(np.ones((2, 3) if rank == 0 else (3, 2), np.float32))
    return observe(lambda: dist.all_reduce(x))


def test_detail_names_shapes_and_call_sites(workers):
    """DETAIL: same dtype and count, different shapes: an error naming shapes and the line."""
    res = workers(f"{HERE}:detail_worker", 2, timeout=60, group_timeout=GROUP_TIMEOUT,
                  env={"TB_SHM": "0", "TB_DISTRIBUTED_DEBUG": "DETAIL"})
    for obs in res:
        assert obs["error"] and "[2, 3]" in obs["msg"] and "[3, 2]" in obs["msg"], obs
        assert "test_mismatch.py" in obs["msg"], obs


# ***** mpi: the fingerprint layer ahead of every collective *****
def _mpiexec():
    sibling = Path(sys.executable).parent / "mpiexec"
    return str(sibling) if sibling.exists() else None


@pytest.mark.mpi
@pytest.mark.skipif(_mpiexec() is None, reason="no mpiexec next to python (pip install mpich)")
@pytest.mark.parametrize("detail, inline", [(False, "1"), (False, "0"), (True, "1")],
                         ids=["inline-check", "all-gather-check", "detail"])
def test_mismatch_mpi(tmp_path, detail, inline):
    # inline: the fingerprint (and a small all_reduce's data) in one MPI reduction; 0 (and
    # DETAIL, which needs every rank's call site): an all-gather beside each collective
    pytest.importorskip("mpi4py")
    cases = sorted({**CASES, **ROOT_CASES, **(DETAIL_CASES if detail else {})})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "TB_FAULT_OUT": str(tmp_path), "TB_MPI_INLINE_CHECK": inline,
           "TB_DISTRIBUTED_DEBUG": "DETAIL" if detail else "OFF"}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT"):
        env.pop(key, None)
    proc = subprocess.run([_mpiexec(), "-n", "2", sys.executable, "-m",
                           "tests.distributed.faults.mpi_mismatch", *cases],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for rank in range(2):
        results = json.loads((tmp_path / f"rank{rank}.json").read_text())
        for case in cases:
            check([r[case] for r in [results]], case, limit=5.0)
        if detail:  # DETAIL names each rank's shapes and call site
            msg = results["shape"]["first"]["msg"]
            assert "[2, 3]" in msg and "[3, 2]" in msg and "test_mismatch.py" in msg, msg
