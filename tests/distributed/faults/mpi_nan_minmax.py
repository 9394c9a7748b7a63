"""Reproducer (open finding, not a test): on mpi, MIN/MAX of floats with NaN give different
results on different ranks when the all_reduce takes MPI's own MIN/MAX: above 256 bytes, any
float16, or every size under ``TB_MPI_INLINE_CHECK=0``. At most 256 bytes in inline mode the C
kernel propagates NaN like NumPy (as tcp and shared memory do), so the semantics also change
with the size of the array.

    mpiexec -n 2 python -m tests.distributed.faults.mpi_nan_minmax

prints one line per rank and size; ``rank 0`` and ``rank 1`` disagree on the 65-element rows
(seen: rank 0 1.0, rank 1 nan, for MIN and MAX); NumPy gives nan.
"""
import numpy as np

import tensorbrain as tb
import tensorbrain.distributed as dist


def main():
    dist.init_process_group("mpi")
    rank = dist.get_rank()
    for n in (1, 64, 65):  # float32: 4, 256 (inline) and 260 bytes (MPI_MIN)
        for op in ("MIN", "MAX"):
            x = tb.tensor(np.full(n, np.nan if rank == 0 else 1.0, np.float32))
            dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
            print(f"rank {rank} n={n} {op}: {x.numpy()[0]} (NumPy: nan)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
