"""One rank of ``mpiexec -n 3 python -m tests.distributed.faults.mpi_skipped``: rank 2 calls one
barrier fewer than the others and exits without ``destroy_process_group`` (a script whose last
rank skips a step). The survivors' barrier must fail naming rank 2 (its exit), well before the
group timeout; tcp names it within 0.25 s. Results go to ``TB_RESULT_FILE`` (see
mpi_interrupt)."""
import os
import time

import tensorbrain.distributed as dist
from tests.distributed.faults.mpi_interrupt import report

TIMEOUT = 20.0


def main():
    dist.init_process_group("mpi", timeout=TIMEOUT)
    rank = dist.get_rank()
    dist.barrier()
    if rank == 2:
        return  # one barrier fewer, no destroy_process_group
    t0 = time.monotonic()
    try:
        dist.barrier()
        report(f"rank{rank}=returned")
    except Exception as exc:  # noqa: BLE001 - reported to the test
        report(f"rank{rank}={type(exc).__name__} secs={time.monotonic() - t0:.3f} msg={exc}")
    from mpi4py import MPI

    from tensorbrain.distributed.backends._mpi_requests import unlink_mpich_segments
    unlink_mpich_segments()
    if rank == 0:
        time.sleep(0.5)  # let rank 1 report too
        MPI.COMM_WORLD.Abort(0)
    time.sleep(10)
    os._exit(0)


if __name__ == "__main__":
    main()
