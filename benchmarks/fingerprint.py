"""What the always-on collective fingerprint check costs (issue 13, finding 1).

Starts its own 2 ranks (or runs under tbrun / mpiexec) and times ``all_reduce`` at 8 B and
4 MiB with the check and, interleaved in the same run, without it:

* tcp (``--backend tcp``, sockets with ``TB_SHM=0`` or shared memory with ``TB_SHM=1``): the
  check is in band (op and root in each frame's tag, compared by the receiver with kind, dtype,
  size and sequence number); "without" replaces ``_fingerprint.wire_tag`` by a constant 0;
* mpi (``--backend mpi``): the fingerprint layer all-gathers the fingerprint ahead of each
  collective; "without" calls the wrapped backend directly.

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
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tensorbrain as tb  # noqa: E402
import tensorbrain.distributed as dist  # noqa: E402
from tensorbrain.distributed import _fingerprint  # noqa: E402
from tensorbrain.distributed.backends import tcp as tcp_backend  # noqa: E402

SIZES = {"8 B": 2, "4 MiB": 1 << 20}  # float32 elements


def measure(be, backend: str, count: int, iters: int, rounds: int) -> tuple[float, float]:
    """(median us with the check, median us without), interleaved round by round."""
    x = np.ones(count, np.float32)
    real_tag = tcp_backend.FP.wire_tag
    inner = getattr(be, "_inner", be)
    with_t, without_t = [], []
    for _ in range(rounds):
        for checked in (True, False):
            if backend == "tcp":
                tcp_backend.FP.wire_tag = real_tag if checked else (lambda *a, **k: 0)
                target = be
            else:
                target = be if checked else inner
            target.barrier(async_op=False)
            for _ in range(3):
                target.allreduce([x], "sum", async_op=False)
            t0 = time.perf_counter()
            for _ in range(iters):
                target.allreduce([x], "sum", async_op=False)
            (with_t if checked else without_t).append((time.perf_counter() - t0) / iters * 1e6)
    tcp_backend.FP.wire_tag = real_tag
    return float(np.median(with_t)), float(np.median(without_t))


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
    be = dist.distributed_c10d._default("fingerprint benchmark").backend
    rank = dist.get_rank()
    if rank == 0:
        where = f"TB_SHM={os.environ.get('TB_SHM', '1')}" if args.backend == "tcp" else "mpich"
        print(f"# fingerprint check cost, {args.backend} ({where}), {dist.get_world_size()} "
              f"ranks, all_reduce float32, median of {args.rounds} interleaved rounds")
        print(f"{'size':>8} {'with us':>10} {'without us':>11} {'cost us':>9} {'cost %':>7}")
    if rank == 0 and args.backend == "tcp":
        import timeit
        n = 200_000
        per = min(timeit.repeat(lambda: _fingerprint.wire_tag("sum"), number=n, repeat=5)) / n
        print(f"# in-band check, CPU cost per call (wire_tag, timeit): {per * 1e6:.3f} us; the "
              "receiver compares one more header field")
    for label, count in SIZES.items():
        iters = 200 if count < 1024 else 10
        w, wo = measure(be, args.backend, count, iters, args.rounds)
        tw = tb.tensor(np.array([w, wo], np.float64))
        dist.all_reduce(tw, op=dist.ReduceOp.MAX)  # the slowest rank's figure
        w, wo = tw.numpy().tolist()
        if rank == 0:
            print(f"{label:>8} {w:10.1f} {wo:11.1f} {w - wo:9.2f} {100 * (w - wo) / wo:6.1f}%")
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
