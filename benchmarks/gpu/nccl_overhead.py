"""NCCL all_reduce at world size 1: what each layer costs per call, on one GPU, in one run.

    python benchmarks/gpu/nccl_overhead.py [-b 8] [-e 1G] [-f 8] [--json out.json]

One GPU means NCCL runs at world size 1 (it refuses two ranks on one device), so the reduction
itself is a copy and the figure is the per-call cost of each path to NCCL:

* ``tb``: ``tb.distributed.all_reduce(tensor)`` on the ``nccl`` backend (Tensor unwrap, checks,
  events, Work: what a user calls);
* ``bare``: our binding's ``Communicator.all_reduce`` on the same communicator and stream (NCCL
  plus one pybind11 call);
* ``cupyx``: CuPy's own ``cupyx.distributed`` NCCL communicator;
* ``torch``: ``torch.distributed.all_reduce`` with the NCCL backend.

Each is timed with CUDA events around ``n`` back-to-back calls on the current stream after ``w``
warm-up calls; the median of ``--rounds`` rounds is printed, in microseconds per call, with
nccl-tests' size/count/type columns (busbw is 0 at world size 1 by nccl-tests' formula, so it is
left out). Paths that cannot start (a package missing) are reported and skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from _common import parse_size  # noqa: E402


def _timed(cp, fn, n, w, rounds):
    for _ in range(w):
        fn()
    stream = cp.cuda.get_current_stream()
    times = []
    for _ in range(rounds):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        for _ in range(n):
            fn()
        end.record(stream)
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) * 1e3 / n)  # ms -> us
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-b", "--minbytes", default="8")
    ap.add_argument("-e", "--maxbytes", default="1G")
    ap.add_argument("-f", "--stepfactor", type=int, default=8)
    ap.add_argument("-n", "--iters", type=int, default=50)
    ap.add_argument("-w", "--warmup_iters", type=int, default=5)
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="instead of the table: cProfile N calls of our all_reduce at 8 B")
    args = ap.parse_args(argv)

    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed.backends import nccl as nccl_backend
    reason = nccl_backend.why_unavailable()
    if reason is not None:
        print(f"# nccl_overhead: the nccl backend cannot run here: {reason}")
        return 2
    cp = tb._xp.cupy()
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    backend = dist.distributed_c10d._default("nccl_overhead").backend
    binding, comm = backend._nccl, backend.comm
    f32, red_sum = binding.DTYPES["float32"], binding.RED_OPS["sum"]

    if args.profile:
        import cProfile
        import pstats
        t = tb.Tensor._wrap(cp.ones(2, cp.float32))
        for _ in range(100):
            dist.all_reduce(t)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.profile):
            dist.all_reduce(t)
        cp.cuda.get_current_stream().synchronize()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        return 0
    paths = {}
    try:
        from cupyx import distributed as cupyx_dist
        cx = cupyx_dist.init_process_group(1, 0, port=int(os.environ.get("TB_CUPYX_PORT", 13377)))
        paths["cupyx"] = lambda a: cx.all_reduce(a, a, "sum")
    except Exception as exc:  # noqa: BLE001 - report and skip
        print(f"# cupyx.distributed not run: {type(exc).__name__}: {exc}")
    try:
        import torch
        import torch.distributed as tdist
        tdist.init_process_group("nccl", store=tdist.HashStore(), rank=0, world_size=1,
                                 device_id=torch.device("cuda", 0))
        paths["torch"] = None  # uses its own tensors, built per size below
    except Exception as exc:  # noqa: BLE001
        print(f"# torch NCCL not run: {type(exc).__name__}: {exc}")

    size, rows = parse_size(args.minbytes), []
    print("# size(B)  count  type  | tb(us)  bare(us)  cupyx(us)  torch(us) | tb-bare(us)")
    while size <= parse_size(args.maxbytes):
        count = max(1, size // 4)
        n = max(3, min(args.iters, (4 << 30) // max(size, 1)))
        x = cp.ones(count, cp.float32)
        t = tb.Tensor._wrap(x)
        row = {"bytes": count * 4, "count": count, "type": "float",
               "tb_us": _timed(cp, lambda: dist.all_reduce(t), n, args.warmup_iters, args.rounds),
               "bare_us": _timed(cp, lambda: comm.all_reduce(
                   x.data.ptr, x.data.ptr, count, f32, red_sum,
                   cp.cuda.get_current_stream().ptr), n, args.warmup_iters, args.rounds)}
        if "cupyx" in paths:
            row["cupyx_us"] = _timed(cp, lambda: paths["cupyx"](x), n, args.warmup_iters,
                                     args.rounds)
        if "torch" in paths:
            import torch
            tt = torch.ones(count, device="cuda")  # torch and CuPy both use the default stream
            row["torch_us"] = _timed(cp, lambda: tdist.all_reduce(tt), n, args.warmup_iters,
                                     args.rounds)
        # every path summed ones across a world of one: still ones (a wrong path shows here)
        row["wrong"] = int(cp.count_nonzero(x != 1).get())
        rows.append(row)
        fmt = lambda k: f"{row[k]:9.2f}" if k in row else "      n/a"  # noqa: E731
        print(f"{row['bytes']:>10} {count:>10} float | {fmt('tb_us')} {fmt('bare_us')} "
              f"{fmt('cupyx_us')} {fmt('torch_us')} | {row['tb_us'] - row['bare_us']:9.2f}"
              f"  #wrong {row['wrong']}")
        size *= args.stepfactor
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "device": cp.cuda.runtime.getDeviceProperties(0)["name"]
                       .decode()}, f, indent=1)
    dist.destroy_process_group()
    return 1 if any(r["wrong"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
