"""What the always-on collective fingerprint check costs (issue 13, finding 1).

Starts its own 2 ranks (or runs under tbrun / mpiexec) and times ``all_reduce`` at 8 B and
4 MiB with the check and, interleaved in the same run, without it:

* tcp (``--backend tcp``, sockets with ``TB_SHM=0`` or shared memory with ``TB_SHM=1``): the
  check is in band (op and root in each frame's tag, compared by the receiver with kind, dtype,
  size and sequence number); "without" replaces ``_fingerprint.wire_tag`` by a constant 0;
* mpi (``--backend mpi``): the fingerprint layer all-gathers the fingerprint beside each
  collective (a persistent all-gather); "without" calls the wrapped backend directly.

The measuring code is ``tensorbrain/benchmarks/_check_cost.py``, which ``tb-collectives
--check-cost`` (benchmarks/collectives.py) runs too.

Prints the median time per call of each variant, the difference and the relative cost::

    python benchmarks/fingerprint.py --backend tcp --shm 0
    python benchmarks/fingerprint.py --backend tcp --shm 1
    python benchmarks/fingerprint.py --backend mpi
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tensorbrain.distributed as dist  # noqa: E402
from tensorbrain.benchmarks._check_cost import report  # noqa: E402
from tensorbrain.distributed import _fingerprint  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="tcp", choices=["tcp", "mpi"])
    p.add_argument("--shm", default="0", help="TB_SHM for the tcp backend")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--nproc", type=int, default=2)
    args = p.parse_args()
    under_mpi = any(k in os.environ for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK"))
    if args.backend == "tcp" and "RANK" not in os.environ:
        return spawn(args.nproc, sys.argv[1:], {"TB_SHM": args.shm})
    if args.backend == "mpi" and not under_mpi:
        mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
        return subprocess.call([mpiexec, "-n", str(args.nproc), sys.executable,
                                os.path.abspath(__file__), *sys.argv[1:]],
                               env=dict(os.environ, OMP_NUM_THREADS="1"))
    dist.init_process_group(args.backend)
    rank = dist.get_rank()
    if rank == 0:
        where = f"TB_SHM={os.environ.get('TB_SHM', '1')}" if args.backend == "tcp" else "mpich"
        print(f"# fingerprint check cost, {args.backend} ({where}), {dist.get_world_size()} "
              f"ranks, all_reduce float32, median of {args.rounds} interleaved rounds")
    if rank == 0 and args.backend == "tcp":
        import timeit
        n = 200_000
        per = min(timeit.repeat(lambda: _fingerprint.wire_tag("sum"), number=n, repeat=5)) / n
        print(f"# in-band check, CPU cost per call (wire_tag, timeit): {per * 1e6:.3f} us; the "
              "receiver compares one more header field")
    report(print if rank == 0 else (lambda *a: None), args.rounds)
    dist.destroy_process_group()
    return 0


def spawn(nproc: int, argv, extra_env) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), *argv],
                              env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(nproc),
                                       LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(nproc),
                                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                                       OMP_NUM_THREADS="1", **extra_env))
             for r in range(nproc)]
    return max(abs(p.wait()) for p in procs)


if __name__ == "__main__":
    _ = _fingerprint  # the module measured (imported so a broken import fails loudly)
    sys.exit(main())
