"""One rank of ``mpiexec -n 2 python -m tests.distributed.faults.mpi_frozen``: rank 1 stops
itself (SIGSTOP) while rank 0 waits in a barrier; rank 0's timeout must name rank 1 (MPI cannot
say which rank a collective waits for; the backend looks same-host ranks up in /proc). Rank 0
then kills rank 1 and ends the job. Results go to ``TB_RESULT_FILE`` (see mpi_interrupt)."""
import os
import signal
import time


import tensorbrain.distributed as dist
from tests.distributed.faults.mpi_interrupt import report

TIMEOUT = 3.0


def main():
    dist.init_process_group("mpi", timeout=TIMEOUT)
    rank = dist.get_rank()
    pids = [None, None]
    dist.all_gather_object(pids, os.getpid())
    if rank == 1:
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGSTOP)
        time.sleep(60)
        return
    t0 = time.monotonic()
    try:
        dist.barrier()
        report("first=returned")
    except Exception as exc:  # noqa: BLE001 - reported to the test
        report(f"first={type(exc).__name__} secs={time.monotonic() - t0:.3f} msg={exc}")
    os.kill(pids[1], signal.SIGKILL)
    from mpi4py import MPI

    from tensorbrain.distributed.backends._mpi_requests import unlink_mpich_segments
    unlink_mpich_segments()
    MPI.COMM_WORLD.Abort(0)


if __name__ == "__main__":
    main()
