"""One rank of ``mpiexec -n 2 python -m tests.distributed.faults.mpi_mismatch CASE...``: each
mismatched collective of test_mismatch.CASES in a fresh MPI group; observations go to
``$TB_FAULT_OUT/rank<r>.json``."""
import json
import os
import sys

import tensorbrain.distributed as dist
from tests.distributed.faults import test_mismatch as T


def main(cases):
    dist.init_process_group("mpi", timeout=__import__("datetime").timedelta(seconds=20))
    rank = dist.get_rank()
    out = {}
    for case in cases:
        group = dist.new_group(list(range(dist.get_world_size())))
        specs = {**T.CASES, **T.ROOT_CASES, **T.DETAIL_CASES}[case]
        spec = specs[0] if rank == 0 else specs[1]
        first = T.observe(lambda s=spec, g=group: T.call(s, rank, g))
        later = T.observe(lambda g=group: dist.barrier(group=g))
        out[case] = {"first": first, "later": later}
    with open(os.path.join(os.environ["TB_FAULT_OUT"], f"rank{rank}.json"), "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
