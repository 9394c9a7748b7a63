"""Host<->device copy bandwidth of ``Tensor.to("cuda")`` / ``.cpu()`` against CuPy's own copies.

    python benchmarks/gpu/copy_bandwidth.py [--sizes 1M,64M,1G] [--json out.json]

For each size: tb's ``tb.tensor(host).to("cuda")`` and ``.cpu()`` next to ``cupy.asarray`` /
``cupy.asnumpy`` from pageable NumPy memory, and CuPy's copies from page-locked (pinned) memory
(``cupyx.empty_pinned`` + ``ndarray.set``/``get``), which is the limit of the link; then tb's
``.to("cuda")`` of a ``pin_memory()``'d tensor (``h2d_tb_pinned``) against that limit (the GPU
issue's goal: within 10% at 1 GiB). GB/s with
GB = 1e9 bytes, the median of ``--rounds`` timed copies after a warm-up, host clock around a
synchronised copy.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from _common import parse_size  # noqa: E402


def _gbps(fn, nbytes, rounds, sync):
    fn()
    sync()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return nbytes / statistics.median(times) / 1e9


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1M,64M,1G")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import numpy as np

    import tensorbrain as tb
    if not tb.cuda.is_available():
        print(f"# copy_bandwidth: no GPU: {tb.cuda.why_unavailable()}")
        return 2
    import cupy as cp
    import cupyx
    sync = cp.cuda.Device().synchronize
    rows = []
    print("# size  | H2D: tb  cupy  pinned  tb-pinned (GB/s) | D2H: tb  cupy  pinned (GB/s)")
    for text in args.sizes.split(","):
        nbytes = parse_size(text)
        host = np.random.default_rng(0).standard_normal(nbytes // 4).astype(np.float32)
        pinned = cupyx.empty_pinned(host.shape, host.dtype)
        pinned[...] = host
        dev = cp.asarray(host)
        t_host, t_dev = tb.tensor(host), tb.Tensor._wrap(dev)
        t_pinned = t_host.pin_memory()
        row = {"bytes": nbytes,
               "h2d_tb": _gbps(lambda: t_host.to("cuda"), nbytes, args.rounds, sync),
               "h2d_cupy": _gbps(lambda: cp.asarray(host), nbytes, args.rounds, sync),
               "h2d_pinned": _gbps(lambda: dev.set(pinned), nbytes, args.rounds, sync),
               "h2d_tb_pinned": _gbps(lambda: t_pinned.to("cuda"), nbytes, args.rounds, sync),
               "d2h_tb": _gbps(lambda: t_dev.cpu(), nbytes, args.rounds, sync),
               "d2h_cupy": _gbps(lambda: cp.asnumpy(dev), nbytes, args.rounds, sync),
               "d2h_pinned": _gbps(lambda: dev.get(out=pinned), nbytes, args.rounds, sync)}
        ok = (np.array_equal(t_host.to("cuda").cpu().numpy(), host)
              and bool(t_pinned.is_pinned())
              and np.array_equal(t_pinned.to("cuda").cpu().numpy(), host))
        row["round_trip_exact"] = bool(ok)
        rows.append(row)
        print(f"{text:>6} | {row['h2d_tb']:6.2f} {row['h2d_cupy']:6.2f} {row['h2d_pinned']:6.2f} "
              f"{row['h2d_tb_pinned']:6.2f} | "
              f"{row['d2h_tb']:6.2f} {row['d2h_cupy']:6.2f} {row['d2h_pinned']:6.2f}"
              f"  round trip exact: {ok}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    return 0 if all(r["round_trip_exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
