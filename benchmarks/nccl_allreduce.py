"""all_reduce on the ``nccl`` backend (CuPy tensors), nccl-tests table, against the bare binding.

    tbrun --standalone --nproc_per_node 8 benchmarks/nccl_allreduce.py -b 8 -e 1G -f 2
    python benchmarks/nccl_allreduce.py -b 8 -e 256M          # a world of one GPU

For every size, ``dist.all_reduce(tensor)`` (in place, through the process-group layer: what a
user calls) and the bare ``tensorbrain._C.nccl`` call on the same communicator and the same
stream (no events, no Work: NCCL's own cost plus one Python call) run in interleaved rounds. A
round is ``-w`` warm-up calls, a barrier, then ``-n`` calls timed with CUDA events around the
loop on the current stream; the time is the slowest rank's, the median round is printed.
Columns as nccl-tests: size(B) count type redop root | time(us) algbw busbw #wrong, with
busbw = algbw x 2(n-1)/n, then the bare call's time and the ratio.

Without a usable GPU and NCCL the script prints why and exits with status 2.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from _common import parse_size  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-b", "--minbytes", default="8")
    ap.add_argument("-e", "--maxbytes", default="256M")
    ap.add_argument("-f", "--stepfactor", type=int, default=2)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup_iters", type=int, default=5)
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args(argv)

    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed.backends import nccl as nccl_backend

    reason = nccl_backend.why_unavailable()
    if reason is not None:
        print(f"# nccl_allreduce: the nccl backend cannot run here: {reason}")
        return 2
    cp = tb._xp.cupy()
    tb.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if "RANK" in os.environ:
        dist.init_process_group("nccl")
    else:
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    rank, n = dist.get_rank(), dist.get_world_size()
    backend = dist.distributed_c10d._default("nccl_allreduce").backend
    binding = backend._nccl
    dtype = np.dtype(args.dtype)
    code = binding.DTYPES[dtype.name]
    factor = 2.0 * (n - 1) / n if n > 1 else 1.0

    def slowest(seconds: float) -> float:
        t = tb.Tensor._wrap(cp.asarray([seconds], dtype=cp.float64))
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t._data[0])

    def timed(call, iters: int, warm: int) -> float:
        for _ in range(warm):
            call()
        dist.barrier()
        stream = cp.cuda.get_current_stream()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        for _ in range(iters):
            call()
        end.record(stream)
        end.synchronize()
        return slowest(cp.cuda.get_elapsed_time(start, end) / 1e3 / iters)

    if rank == 0:
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        print(f"# nccl all_reduce, {n} ranks, dtype {dtype.name}, redop sum, in place; NCCL "
              f"{binding.get_version()}, GPU {props['name'].decode()}, host {platform.node()}")
        print(f"# rounds {args.rounds} (median); busbw = algbw x 2(n-1)/n = algbw x {factor:.3f}")
        print(f"{'size(B)':>12} {'count':>12} {'type':>8} {'redop':>6} {'root':>5} | "
              f"{'time(us)':>9} {'algbw':>7} {'busbw':>7} {'#wrong':>6} | "
              f"{'bare(us)':>9} {'tb/bare':>8}", flush=True)
    size, busbws, wrong_total = parse_size(args.minbytes), [], 0
    while size <= parse_size(args.maxbytes):
        count = max(1, size // dtype.itemsize)
        x = cp.zeros(count, dtype)
        t = tb.Tensor._wrap(x)
        ptr = x.data.ptr
        ours, bare = [], []
        for _ in range(args.rounds):
            ours.append(timed(lambda: dist.all_reduce(t), args.iters, args.warmup_iters))
            bare.append(timed(lambda: backend.comm.all_reduce(
                ptr, ptr, count, code, 0, cp.cuda.get_current_stream().ptr),
                args.iters, args.warmup_iters))
        values = lambda r: ((np.arange(count) % 7 + r) % 5).astype(dtype)  # noqa: E731
        check = tb.Tensor._wrap(cp.asarray(values(rank)))
        dist.all_reduce(check)
        want = sum(values(r) for r in range(n)).astype(dtype)
        wrong = int(slowest(float(np.count_nonzero(cp.asnumpy(check._data) != want))))
        wrong_total += wrong
        sec, bare_sec = statistics.median(ours), statistics.median(bare)
        nbytes = count * dtype.itemsize
        algbw = nbytes / sec / 1e9
        busbws.append(algbw * factor)
        if rank == 0:
            print(f"{nbytes:>12} {count:>12} {dtype.name:>8} {'sum':>6} {-1:>5} | "
                  f"{sec * 1e6:>9.2f} {algbw:>7.2f} {algbw * factor:>7.2f} {wrong:>6} | "
                  f"{bare_sec * 1e6:>9.2f} {sec / bare_sec:>8.3f}", flush=True)
        size *= args.stepfactor
    if rank == 0:
        print(f"# Out of bounds values : {wrong_total} {'OK' if wrong_total == 0 else 'FAILED'}")
        print(f"# Avg bus bandwidth    : {statistics.mean(busbws):.4f}")
    dist.destroy_process_group()
    return 1 if wrong_total else 0


if __name__ == "__main__":
    sys.exit(main())
