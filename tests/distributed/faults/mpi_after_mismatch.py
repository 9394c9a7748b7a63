"""One rank of ``mpiexec -n 2 python -m tests.distributed.faults.mpi_after_mismatch CASE``
(test_mpi_after_mismatch.py): what happens around a mismatched collective on mpi, in the inline
check's follow-up. Observations go to ``$TB_FAULT_OUT/rank<r>.json``, written and fsync'd at
once (the ctrl_c case ends the job with MPI_Abort).

Cases (rank 1 always calls MAX where rank 0 calls SUM, on a fresh group of both ranks):

* ``pending``: rank 0 posts the mismatched all_reduce and a second one asynchronously, then
  waits for both; rank 1 raises on the first and never posts the second.
* ``waiters``: three threads of rank 0 wait for the same mismatched Work.
* ``serialized``: a synchronous mismatch under ``mpi4py.rc.thread_level = 'serialized'``.
* ``ctrl_c``: Ctrl-C (a real SIGINT) on rank 0 while the follow-up waits for rank 1, which
  posted its mismatched all_reduce and then sleeps.

Then, except in ``ctrl_c``, a barrier of the world group, timed on both ranks.
"""
import json
import os
import signal
import sys
import threading
import time

if __name__ == "__main__" and sys.argv[1:] == ["serialized"]:
    import mpi4py
    mpi4py.rc.thread_level = "serialized"

import numpy as np  # noqa: E402

import tensorbrain as tb  # noqa: E402
import tensorbrain.distributed as dist  # noqa: E402

GROUP_TIMEOUT = 20.0  # the follow-up waits min(this, 10 s): a stall shows as ~10 s


def observe(fn):
    t0 = time.monotonic()
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - reported to the test (KeyboardInterrupt too)
        return {"error": type(exc).__name__, "msg": str(exc), "secs": time.monotonic() - t0}
    return {"error": None, "secs": time.monotonic() - t0}


def save(rank, out):
    path = os.path.join(os.environ["TB_FAULT_OUT"], f"rank{rank}.json")
    with open(path, "w") as f:
        json.dump(out, f)
        f.flush()
        os.fsync(f.fileno())


def op_of(rank):
    return dist.ReduceOp.MAX if rank == 1 else dist.ReduceOp.SUM


def main(case):
    import datetime
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=GROUP_TIMEOUT))
    rank = dist.get_rank()
    g = dist.new_group([0, 1])
    x, y = tb.tensor(np.ones(8, np.float32)), tb.tensor(np.ones(8, np.float32))
    out = {}
    if case == "pending":
        if rank == 0:
            first = dist.all_reduce(x, group=g, async_op=True)
            second = dist.all_reduce(y, group=g, async_op=True)  # rank 1 never posts it
            out["first"] = observe(first.wait)
            out["second"] = observe(second.wait)
        else:
            out["first"] = observe(lambda: dist.all_reduce(x, op=op_of(rank), group=g))
    elif case == "waiters":
        if rank == 1:
            time.sleep(0.3)  # rank 0's waiters are polling when the message completes
        work = dist.all_reduce(x, op=op_of(rank), group=g, async_op=True)
        threads = [threading.Thread(target=lambda k=k: out.__setitem__(f"waiter{k}",
                                                                       observe(work.wait)))
                   for k in range(3 if rank == 0 else 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    elif case == "serialized":
        from mpi4py import MPI
        out["level"] = MPI.Query_thread()
        out["first"] = observe(lambda: dist.all_reduce(x, op=op_of(rank), group=g))
    elif case == "ctrl_c":
        dist.all_reduce(x, group=g)  # both running
        if rank == 1:
            dist.all_reduce(x, op=op_of(rank), group=g, async_op=True)
            save(rank, out)
            time.sleep(30)  # rank 0 ends the job first
            return
        sent = []

        def ctrl_c():
            time.sleep(0.7)
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=ctrl_c, daemon=True).start()
        out["first"] = observe(lambda: dist.all_reduce(x, op=op_of(rank), group=g))
        out["react"] = time.monotonic() - sent[0] if sent else None
        out["later"] = observe(lambda: dist.barrier(group=g))
        save(rank, out)
        from mpi4py import MPI

        from tensorbrain.distributed.backends._mpi_requests import unlink_mpich_segments
        unlink_mpich_segments()  # MPI_Abort leaves them behind
        MPI.COMM_WORLD.Abort(0)
    out["world"] = observe(dist.barrier)
    save(rank, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
