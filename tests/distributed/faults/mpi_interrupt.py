"""One rank of ``mpiexec -n 2 python -m tests.distributed.faults.mpi_interrupt``: Ctrl-C (a real
SIGINT) on rank 0 while it waits in all_reduce for a late rank 1. Rank 0 prints what it saw and
ends the job (MPI cannot cancel the posted operation)."""
import os
import signal
import sys
import threading
import time

import numpy as np

import tensorbrain as tb
import tensorbrain.distributed as dist


def main():
    dist.init_process_group("mpi", timeout=30)
    rank = dist.get_rank()
    t = tb.tensor(np.ones(8, np.float32))
    dist.all_reduce(t)
    if rank == 1:
        time.sleep(20)  # late; the job ends before
        return
    sent = []

    def ctrl_c():
        time.sleep(0.5)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=ctrl_c, daemon=True).start()
    try:
        dist.all_reduce(t)
        print("RESULT first=returned", flush=True)
    except KeyboardInterrupt:
        print(f"RESULT first=KeyboardInterrupt react_s={time.monotonic() - sent[0]:.3f}",
              flush=True)
    except Exception as exc:  # noqa: BLE001
        print(f"RESULT first={type(exc).__name__}", flush=True)
    try:
        dist.barrier()
        print("RESULT later=returned", flush=True)
    except Exception as exc:  # noqa: BLE001
        print(f"RESULT later={type(exc).__name__}: {exc}", flush=True)
    sys.stdout.flush()
    from mpi4py import MPI
    MPI.COMM_WORLD.Abort(0)


if __name__ == "__main__":
    main()
