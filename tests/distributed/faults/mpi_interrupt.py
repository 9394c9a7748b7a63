"""One rank of ``mpiexec -n 2 python -m tests.distributed.faults.mpi_interrupt``: Ctrl-C (a real
SIGINT) on rank 0 while it waits in all_reduce for a late rank 1. Rank 0 prints what it saw and
ends the job (MPI cannot cancel the posted operation), removing MPICH's shared-memory segment
first as TensorBrain's abort hook does (MPI_Abort leaves it in /dev/shm).

Results go to the file named by ``TB_RESULT_FILE`` (fsync'd line by line), not only to stdout:
``MPI_Abort`` can end mpiexec before it forwards the rank's last stdout lines."""
import os
import signal
import sys
import threading
import time

import numpy as np

import tensorbrain as tb
import tensorbrain.distributed as dist


def report(line):
    """Print one ``RESULT`` line and append it, durably, to ``TB_RESULT_FILE``."""
    print(f"RESULT {line}", flush=True)
    path = os.environ.get("TB_RESULT_FILE")
    if path:
        with open(path, "a") as f:
            f.write(f"RESULT {line}\n")
            f.flush()
            os.fsync(f.fileno())


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
        report("first=returned")
    except KeyboardInterrupt:
        report(f"first=KeyboardInterrupt react_s={time.monotonic() - sent[0]:.3f}")
    except Exception as exc:  # noqa: BLE001
        report(f"first={type(exc).__name__}")
    try:
        dist.barrier()
        report("later=returned")
    except Exception as exc:  # noqa: BLE001
        report(f"later={type(exc).__name__}: {exc}")
    sys.stdout.flush()
    from mpi4py import MPI

    from tensorbrain.distributed.backends._mpi_requests import unlink_mpich_segments
    report(f"unlinked={','.join(unlink_mpich_segments())}")  # MPI_Abort leaves them behind
    MPI.COMM_WORLD.Abort(0)


if __name__ == "__main__":
    main()
