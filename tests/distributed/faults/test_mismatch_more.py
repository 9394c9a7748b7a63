"""Finding 1, continued: mismatches that the first fault run did not try, found by a second one.

Before these fixes each was silent somewhere (a wrong result, or a group that went on):

* shared memory: ``broadcast``, ``all_gather`` and ``all_to_all`` compared byte counts but not
  dtypes (float32 on one rank against int32 on the other returned reinterpreted bits);
* shared memory: a ``scatter`` whose ranks each named themselves as the root returned on every
  rank and left its frames unread in the sockets, which later collectives (in shared memory)
  never read, so nothing ever raised;
* mpi: ``all_reduce_coalesced`` of [2, 3] against [3, 2] elements (same total), and
  ``all_to_all_single`` whose split sizes do not pair up (same totals), returned garbage; a
  ``recv`` into a larger buffer than the message filled part of it and returned;
* mpi: a valid ``all_to_all`` of lists with different sizes per peer raised a false mismatch.

All cases run in one pair of processes per transport, each case in a fresh group (a mismatch
makes its group unusable), so this file adds little to the suite's time.
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

HERE = "tests.distributed.faults.test_mismatch_more"
ROOT = Path(__file__).resolve().parents[3]
GROUP_TIMEOUT = 20.0


def T(a):
    return tb.tensor(np.asarray(a))


# ***** the calls: what rank r does in each case (2 ranks) *****
def _a2a_dtype(r, g):
    dt = np.float32 if r == 0 else np.int32
    out = [T(np.zeros(2, dt)) for _ in range(2)]
    dist.all_to_all(out, [T(np.full(2, r + 1, dt)) for _ in range(2)], group=g)


def _a2a_single_dtype(r, g):
    dt = np.float32 if r == 0 else np.int32
    dist.all_to_all_single(T(np.zeros(4, dt)), T(np.full(4, r + 1, dt)), group=g)


def _all_gather_dtype(r, g):
    dt = np.float32 if r == 0 else np.int32
    dist.all_gather([T(np.zeros(4, dt)) for _ in range(2)], T(np.full(4, r + 1, dt)), group=g)


def _broadcast_dtype(r, g):
    dist.broadcast(T(np.full(4, r + 1, np.float32 if r == 0 else np.int32)), src=0, group=g)


def _scatter_roots(r, g):  # every rank believes it is the root
    out = T(np.zeros(2, np.float32))
    dist.scatter(out, [T(np.full(2, 10 * r + j, np.float32)) for j in range(2)], src=r, group=g)


def _gather_vs_reduce_scatter(r, g):  # the same byte counts, another collective
    if r == 0:
        dist.all_gather_into_tensor(T(np.zeros(8, np.float32)), T(np.ones(4, np.float32)), group=g)
    else:
        dist.reduce_scatter_tensor(T(np.zeros(4, np.float32)), T(np.ones(8, np.float32)), group=g)


def _coalesced_sizes(r, g):
    sizes = (2, 3) if r == 0 else (3, 2)
    dist.all_reduce_coalesced([T(np.ones(n, np.float32)) for n in sizes], group=g)


def _a2a_splits(r, g):  # totals agree (4 each), the pairs do not: rank 0 sends 1, rank 1 expects 2
    splits = [1, 3] if r == 0 else [2, 2]
    dist.all_to_all_single(T(np.zeros(4, np.float32)), T(np.arange(4, dtype=np.float32)),
                           splits, splits, group=g)


def _recv_larger(r, g):
    if r == 0:
        dist.send(T(np.ones(2, np.float32)), 1, group=g)
    else:
        dist.recv(T(np.zeros(4, np.float32)), 0, group=g)


CASES = {
    "a2a_dtype": _a2a_dtype, "a2a_single_dtype": _a2a_single_dtype,
    "all_gather_dtype": _all_gather_dtype, "broadcast_dtype": _broadcast_dtype,
    "scatter_roots": _scatter_roots, "gather_vs_reduce_scatter": _gather_vs_reduce_scatter,
    "coalesced_sizes": _coalesced_sizes, "a2a_splits": _a2a_splits, "recv_larger": _recv_larger,
}
# Where a rank may return from the mismatched call (docs/reliability.md: a rank that only sends
# cannot see a mismatch in that call over sockets), its next call on the group must raise
# ("later"); the sender of an mpi message may even go on ("ok": MPI cannot tell it, and its data
# was delivered; the receiver raised). Sockets: a broadcast root, scatter roots, a p2p sender.
# With shared memory, broadcast and the scatter roots are checked in it.
LATER = {"sockets": {("broadcast_dtype", 0), ("scatter_roots", 0), ("scatter_roots", 1),
                     ("recv_larger", 0)},
         "shm": {("recv_larger", 0)}, "shm-twin": {("recv_larger", 0)}, "mpi": set()}
OK = {"mpi": {("recv_larger", 0)}}
# With shared memory on, all_to_all_single runs there when this rank's blocks are equal and on
# the sockets otherwise: ranks whose splits disagree that way wait in different transports, and
# the error comes at the group timeout (short here), naming the peer.
SLOW = {"shm": {"a2a_splits"}, "shm-twin": {"a2a_splits"}}
SLOW_TIMEOUT = 3.0


def observe(fn):
    t0 = time.monotonic()
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return {"error": type(exc).__name__, "msg": str(exc)[:600], "secs": time.monotonic() - t0}
    return {"error": None, "secs": time.monotonic() - t0}


def legit_uneven_all_to_all(r, n):
    """Valid calls with different sizes per peer: they must work (and give torch's values)."""
    ins = [T(np.full((r + 1) * (j + 1), 10 * r + j, np.float32)) for j in range(n)]
    outs = [T(np.zeros((j + 1) * (r + 1), np.float32)) for j in range(n)]
    dist.all_to_all(outs, ins)
    got_list = [o.numpy().tolist() for o in outs]
    want_list = [[10.0 * j + r] * ((j + 1) * (r + 1)) for j in range(n)]
    in_splits, out_splits = [j + 1 + r for j in range(n)], [r + 1 + j for j in range(n)]
    x = T(np.arange(sum(in_splits), dtype=np.float32) + 100 * r)
    y = T(np.zeros(sum(out_splits), np.float32))
    dist.all_to_all_single(y, x, out_splits, in_splits)
    want_single = []
    for j in range(n):  # rank j's rows for rank r start after what it sends ranks 0..r-1
        start = sum(k + 1 + j for k in range(r))
        want_single += [100.0 * j + start + i for i in range(r + 1 + j)]
    return {"list": got_list == want_list, "single": y.numpy().tolist() == want_single}


def run_cases(rank, size, cases):
    out = {"legit": legit_uneven_all_to_all(rank, size)}
    slow = SLOW.get(os.environ.get("TB_FAULT_TRANSPORT", ""), set())
    for case in cases:
        g = dist.new_group(list(range(size)), timeout=SLOW_TIMEOUT if case in slow else None)
        first = observe(lambda c=case, g=g: CASES[c](rank, g))
        later = observe(lambda g=g: dist.barrier(group=g))
        out[case] = {"first": first, "later": later}
    return out


def more_worker(rank, size):
    return run_cases(rank, size, sorted(CASES))


def check(results, transport):
    for rank, res in enumerate(results):
        assert res["legit"] == {"list": True, "single": True}, (transport, rank, res["legit"])
        for case in sorted(CASES):
            first, later = res[case]["first"], res[case]["later"]
            if (case, rank) in OK.get(transport, ()) and first["error"] is None:
                continue
            if (case, rank) in LATER[transport] and first["error"] is None:
                assert later["error"] is not None, (transport, case, rank, "silent", res[case])
                continue
            assert first["error"] in ("DistBackendError", "DistTimeoutError"), \
                (transport, case, rank, first)
            msg = first["msg"]
            if case in SLOW.get(transport, ()):
                assert f"rank {1 - rank}" in msg, (transport, case, rank, first)
                assert first["secs"] < SLOW_TIMEOUT + 2.0, (transport, case, rank, first)
                continue
            assert first["error"] == "DistBackendError", (transport, case, rank, first)
            assert "mismatch" in msg or "sent" in msg or "differ" in msg, (transport, case, msg)
            assert first["secs"] < 5.0, (transport, case, rank, first)


@pytest.mark.parametrize("transport", ["sockets", "shm", "shm-twin"])
def test_more_mismatches_tcp(workers, run_id, transport):
    env = {"sockets": {"TB_SHM": "0"}, "shm": {"TB_SHM": "1"},
           "shm-twin": {"TB_SHM": "1", "TB_NATIVE": "0"}}[transport]
    res = workers(f"{HERE}:more_worker", 2, timeout=120, group_timeout=GROUP_TIMEOUT,
                  env={**env, "TB_RUN_ID": run_id, "TB_FAULT_TRANSPORT": transport})
    check(res, transport)


def _mpiexec():
    sibling = Path(sys.executable).parent / "mpiexec"
    return str(sibling) if sibling.exists() else None


@pytest.mark.mpi
@pytest.mark.skipif(_mpiexec() is None, reason="no mpiexec next to python (pip install mpich)")
def test_more_mismatches_mpi(tmp_path):
    pytest.importorskip("mpi4py")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "TB_FAULT_OUT": str(tmp_path), "TB_DISTRIBUTED_DEBUG": "OFF"}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT"):
        env.pop(key, None)
    proc = subprocess.run([_mpiexec(), "-n", "2", sys.executable, "-m", HERE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    check([json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)], "mpi")


if __name__ == "__main__":  # one rank of the mpi test
    dist.init_process_group("mpi", timeout=GROUP_TIMEOUT)
    mine = run_cases(dist.get_rank(), dist.get_world_size(), sorted(CASES))
    with open(os.path.join(os.environ["TB_FAULT_OUT"], f"rank{dist.get_rank()}.json"), "w") as f:
        json.dump(mine, f)
    dist.destroy_process_group()
