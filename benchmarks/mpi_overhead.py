"""all_reduce on the ``mpi`` backend against raw mpi4py, in the same processes (nccl-tests table).

    mpiexec -n 2 python benchmarks/mpi_overhead.py --backend mpi --compare mpi4py
    mpiexec -n 4 python benchmarks/mpi_overhead.py --compare mpi4py -b 8 -e 64M -f 4
    mpiexec -n 2 python benchmarks/mpi_overhead.py --compare mpi4py --sizes 8,1K,64K,1M,4M,16M,64M
    mpiexec -n 2 python benchmarks/mpi_overhead.py --quick          # smoke run

For every size, TensorBrain's ``dist.all_reduce(tensor)`` (in place, through the process-group
layer and the mpi backend: what a user calls) and, with ``--compare mpi4py``, mpi4py's
``comm.Allreduce(MPI.IN_PLACE, array)`` on ``COMM_WORLD`` run in rounds, interleaved, in the same
processes; each round is ``-w`` warm-up calls, a barrier, then ``-n`` timed calls, and the time of
a round is the slowest rank's mean. The median round is printed. In-place against in-place: our
all_reduce is in place (as torch's), so that is the call it replaces.

Columns as nccl-tests (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md): size(B) count type redop root | time(us) algbw(GB/s)
busbw(GB/s) #wrong, with algbw = size / time (GB = 1e9 B) and busbw = algbw x 2(n-1)/n for
all_reduce; #wrong counts mismatches of a separate correctness call on rank-dependent data. Then
the raw mpi4py time and busbw, the ratio tb/mpi4py and the difference in microseconds.
Goals (issue 6; not asserted anywhere): within 5% of mpi4py at >= 1 MiB, within 10 us at 8 B.
This shared machine is noisy: compare ratios from one run, never absolute figures across runs.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from _common import parse_size  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)



def sizes(lo: int, hi: int, factor: int) -> list:
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def iterations(nbytes: int, quick: bool) -> tuple[int, int]:
    """(timed, warm-up) calls per round: enough calls that a round spans several ms."""
    if quick:
        return 5, 2
    if nbytes <= 64 << 10:
        return 1000, 50
    if nbytes <= 1 << 20:
        return 200, 10
    if nbytes <= 16 << 20:
        return 40, 5
    return 20, 5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="mpi", choices=["mpi"],
                    help="TensorBrain backend to time (this script measures the mpi backend)")
    ap.add_argument("--compare", choices=["mpi4py", "none"], default="none",
                    help="also time raw mpi4py comm.Allreduce in the same processes")
    ap.add_argument("-b", "--minbytes", default="8")
    ap.add_argument("-e", "--maxbytes", default="64M")
    ap.add_argument("-f", "--stepfactor", type=int, default=8)
    ap.add_argument("-n", "--iters", type=int, default=None, help="timed calls per round")
    ap.add_argument("-w", "--warmup", type=int, default=None, help="warm-up calls per round")
    ap.add_argument("-r", "--rounds", type=int, default=5, help="interleaved rounds (median)")
    ap.add_argument("--sizes", default=None,
                    help="comma-separated sizes instead of -b/-e/-f, e.g. 8,1K,64K,1M,4M,16M,64M")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--quick", action="store_true", help="a few small sizes, few calls")
    args = ap.parse_args()

    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from mpi4py import MPI

    dist.init_process_group(args.backend)
    comm = MPI.COMM_WORLD
    rank, n = dist.get_rank(), dist.get_world_size()
    dtype = np.dtype(args.dtype)
    lo, hi = parse_size(args.minbytes), parse_size(args.maxbytes)
    if args.quick:
        lo, hi, args.rounds = 8, 64 << 10, 2
    factor = 2.0 * (n - 1) / n if n > 1 else 1.0
    if rank == 0:
        print(f"# TensorBrain all_reduce, backend={args.backend}, {n} ranks, dtype {dtype.name}, "
              f"redop sum, in place")
        print(f"# host {platform.node()}: {platform.processor() or platform.machine()}, "
              f"{os.cpu_count()} cores, Python {platform.python_version()}, NumPy {np.__version__}")
        import mpi4py
        print(f"# MPI: {MPI.Get_library_version().splitlines()[0].strip()}, mpi4py "
              f"{mpi4py.__version__}, thread level {MPI.Query_thread()} (3 = MULTIPLE)")
        print(f"# rounds {args.rounds} (median), time = slowest rank's mean per call; "
              f"busbw = algbw x 2(n-1)/n = algbw x {factor:.3f}")
        head = (f"{'size(B)':>12} {'count':>10} {'type':>8} {'redop':>6} {'root':>5} | "
                f"{'time(us)':>9} {'algbw':>7} {'busbw':>7} {'#wrong':>6}")
        if args.compare == "mpi4py":
            head += f" | {'mpi4py(us)':>10} {'busbw':>7} | {'tb/mpi4py':>9} {'diff(us)':>9}"
        print(head, flush=True)

    def timed(call, iters: int, warm: int) -> float:
        for _ in range(warm):
            call()
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(iters):
            call()
        mine = (time.perf_counter() - start) / iters
        return comm.allreduce(mine, op=MPI.MAX)

    busbws, wrong_total = [], 0
    chosen = ([parse_size(x) for x in args.sizes.split(",")] if args.sizes
              else sizes(lo, hi, args.stepfactor))
    for nbytes in chosen:
        count = max(1, nbytes // dtype.itemsize)
        iters, warm = iterations(count * dtype.itemsize, args.quick)
        iters, warm = args.iters or iters, args.warmup if args.warmup is not None else warm
        # zeros while timing: values stay finite however many calls run
        t = tb.from_numpy(np.zeros(count, dtype))
        raw = np.zeros(count, dtype)
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(timed(lambda: dist.all_reduce(t), iters, warm))
            if args.compare == "mpi4py":
                theirs.append(timed(lambda: comm.Allreduce(MPI.IN_PLACE, raw), iters, warm))
        # correctness: rank-dependent small integers, exact in any order
        check = tb.from_numpy(((np.arange(count) % 7 + rank) % 5).astype(dtype))
        dist.all_reduce(check)
        want = sum(((np.arange(count) % 7 + r) % 5).astype(dtype) for r in range(n))
        wrong = int(np.count_nonzero(check._data != want))
        wrong = comm.allreduce(wrong, op=MPI.SUM)
        wrong_total += wrong
        sec = statistics.median(ours)
        size_b = count * dtype.itemsize
        algbw = size_b / sec / 1e9
        busbws.append(algbw * factor)
        if rank == 0:
            line = (f"{size_b:>12} {count:>10} {dtype.name:>8} {'sum':>6} {-1:>5} | "
                    f"{sec * 1e6:>9.2f} {algbw:>7.3f} {algbw * factor:>7.3f} {wrong:>6}")
            if theirs:
                raw_sec = statistics.median(theirs)
                line += (f" | {raw_sec * 1e6:>10.2f} {size_b / raw_sec / 1e9 * factor:>7.3f} | "
                         f"{sec / raw_sec:>9.3f} {(sec - raw_sec) * 1e6:>9.2f}")
            print(line, flush=True)
    if rank == 0:
        print(f"# Out of bounds values : {wrong_total} {'OK' if wrong_total == 0 else 'FAILED'}")
        print(f"# Avg bus bandwidth    : {statistics.mean(busbws):.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
