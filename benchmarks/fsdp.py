"""FSDP memory and step time against DDP: an 8-layer, 1024-wide MLP trained with Adam.

    python benchmarks/fsdp.py                  # memory rows at 2 and 4 ranks, step time at 2
    python benchmarks/fsdp.py --quick          # smaller model, fewer steps (smoke run)
    python benchmarks/fsdp.py --json out.json
    python benchmarks/fsdp.py --only limit --limit-mib 128   # largest MLP under a memory cap

Every configuration runs in fresh processes (``run_workers``: real processes, TCP backend with
its same-host shared-memory transport, one BLAS thread each). Memory runs fix
``MALLOC_MMAP_THRESHOLD_`` so that freed arrays go back to the OS and RSS means something; the
step-time run keeps the default allocator, as a user would. Figures per rank (rank 0 shown; the ranks agree to within a few pages):

* persistent: bytes of parameters + gradients + optimizer state that live between steps, summed
  over the arrays the model and optimizer hold (``p._data``, ``p.grad``, Adam's two moments);
* RSS between steps: resident memory after a step minus resident memory before the model was
  built (after ``gc`` and ``malloc_trim``), so FSDP's freed all-gather buffers count only if
  their pages are really resident;
* peak in step: the highest resident memory a sampling thread saw during the timed steps,
  minus the same baseline (activations, unsharded parameters, gradient buffers);
* step: median time of ``zero_grad; loss.backward(); step()`` over blocks of steps; DDP and
  FSDP run in the same processes in interleaved blocks, so the machine's load hits both alike;
* CPU time per step: process CPU time (all threads) per step; on a machine shared with other
  jobs it shows the work each variant adds, without the time spent waiting for a core.

Goals (issue 16; figures, not asserted): FULL_SHARD persistent <= (1/N + 0.1) x DDP's at N = 2
and 4; FSDP step <= 1.3 x DDP's at 2 ranks.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
       "MALLOC_MMAP_THRESHOLD_": "131072"}


# ***** worker side *****
def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _trim():
    import ctypes
    import gc
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


def _model(tb, width, layers):
    mods = []
    for _ in range(layers):
        mods += [tb.nn.Linear(width, width), tb.nn.ReLU()]
    return tb.nn.Sequential(*mods)


def _wrap(tb, model, kind):
    from tensorbrain.distributed.fsdp import (CPUOffload, FullyShardedDataParallel as FSDP,
                                              ShardingStrategy)
    from tensorbrain.distributed.fsdp.wrap import ModuleWrapPolicy
    if kind == "DDP":
        return tb.nn.parallel.DistributedDataParallel(model)
    if kind == "single":
        return model
    strategy, _, extra = kind.partition("+")
    return FSDP(model, sharding_strategy=ShardingStrategy[strategy],
                auto_wrap_policy=ModuleWrapPolicy({tb.nn.Linear}),
                cpu_offload=CPUOffload(offload_params=extra == "CPUOffload"),
                forward_prefetch=extra == "forward_prefetch")


def _persistent(model, optim) -> int:
    total = 0
    for p in model.parameters():
        total += p._data.nbytes + (p.grad._data.nbytes if p.grad is not None else 0)
    for st in optim.state.values():
        total += sum(v.nbytes for v in st.values() if hasattr(v, "nbytes"))
    return total


def memory_worker(rank, world, kind, width, layers, batch, steps):
    import threading

    import numpy as np
    import tensorbrain as tb
    _trim()
    base = _rss()
    tb.manual_seed(0)
    model = _wrap(tb, _model(tb, width, layers), kind)
    optim = tb.optim.Adam(model.parameters(), lr=1e-4)
    x = tb.tensor(np.random.RandomState(rank).randn(batch, width).astype(np.float32))

    def step():
        optim.zero_grad()
        (model(x) ** 2).mean().backward()
        optim.step()
    step()   # Adam's state exists after the first step
    _trim()
    between = _rss() - base
    peak, stop = [0], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.0005)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    stop.set()
    t.join()
    return {"persistent": _persistent(model, optim), "rss_between": between,
            "peak": peak[0] - base, "step": statistics.median(times)}


def speed_worker(rank, world, kinds, width, layers, batch, blocks, steps):
    import numpy as np
    import tensorbrain as tb
    runs = {}
    for kind in kinds:
        tb.manual_seed(0)
        model = _wrap(tb, _model(tb, width, layers), kind)
        runs[kind] = (model, tb.optim.Adam(model.parameters(), lr=1e-4))
    x = tb.tensor(np.random.RandomState(rank).randn(batch, width).astype(np.float32))
    times = {k: [] for k in kinds}
    cpu = {k: [] for k in kinds}
    for b in range(blocks + 1):
        for kind, (model, optim) in runs.items():
            tb.distributed.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(steps):
                optim.zero_grad()
                (model(x) ** 2).mean().backward()
                optim.step()
            dt = (time.perf_counter() - t0) / steps
            if b:                              # block 0 warms up
                times[kind].append(dt)
                cpu[kind].append((time.process_time() - c0) / steps)
    return {"wall": times, "cpu": cpu}


def largest_under_cap(args, env, me, world=4, layers=4):
    """The widest ``layers``-layer MLP whose peak resident memory per rank (above the
    pre-model baseline, sampled during training steps) stays under ``--limit-mib``: DDP against
    FULL_SHARD at ``world`` ranks."""
    from tensorbrain.testing.distributed import run_workers
    cap = args.limit_mib * (1 << 20)
    print(f"\n# largest {layers}-layer MLP (Adam, batch {args.batch}/rank) whose peak RSS per "
          f"rank stays under {args.limit_mib:.0f} MiB, {world} ranks")
    print("| config | width | parameters | peak in step (MiB) | fits |")
    print("| --- | ---: | ---: | ---: | --- |")
    best = {}
    for kind in ("DDP", "FULL_SHARD"):
        for width in (512, 768, 1024, 1280, 1536, 1792, 2048, 2304):
            r = run_workers(f"{me}:memory_worker", world, kind, width, layers, args.batch, 2,
                            timeout=600, env=env)
            peak = max(x["peak"] for x in r)
            n = layers * (width * width + width)
            fits = peak <= cap
            print(f"| {kind} | {width} | {n / 1e6:.2f} M | {peak / (1 << 20):.1f} | "
                  f"{'yes' if fits else 'no'} |", flush=True)
            if not fits:
                break
            best[kind] = n
    if len(best) == 2:
        print(f"\nFULL_SHARD trains {best['FULL_SHARD'] / best['DDP']:.1f} x DDP's parameters "
              f"under the cap")
    return best


# ***** driver *****
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank")
    ap.add_argument("--json")
    ap.add_argument("--only", choices=("memory", "speed", "limit"))
    ap.add_argument("--limit-mib", type=float, default=128.0,
                    help="per-process resident-memory cap for the largest-model search")
    args = ap.parse_args(argv)
    from tensorbrain.testing.distributed import run_workers
    from benchmarks._common import cpu_model
    width, layers = (256, 4) if args.quick else (args.width, args.layers)
    steps, blocks = (3, 2) if args.quick else (5, 5)
    me = "benchmarks.fsdp"
    env = {**ENV, "PYTHONPATH": ROOT}
    print(f"# FSDP vs DDP: {layers} x Linear({width}, {width}) + ReLU, Adam, batch {args.batch}"
          f"/rank, TCP backend; {cpu_model()}")
    if args.only == "limit":
        return largest_under_cap(args, env, me)
    rows = []
    print("\n| ranks | config | persistent (MiB) | x DDP | goal | RSS between steps (MiB) "
          "| peak in step (MiB) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    memory_runs = () if args.only == "speed" else (
        (2, ["DDP", "FULL_SHARD", "SHARD_GRAD_OP", "FULL_SHARD+CPUOffload", "NO_SHARD"]),
        (4, ["DDP", "FULL_SHARD"]))
    for world, kinds in memory_runs:
        ddp = None
        for kind in kinds:
            r = run_workers(f"{me}:memory_worker", world, kind, width, layers, args.batch, steps,
                            timeout=600, env=env)[0]
            ddp = r["persistent"] if kind == "DDP" else ddp
            ratio = r["persistent"] / ddp
            goal = f"<= {1 / world + 0.1:.2f}" if kind == "FULL_SHARD" else ""
            mib = 1 << 20
            print(f"| {world} | {kind} | {r['persistent'] / mib:.1f} | {ratio:.3f} | {goal} | "
                  f"{r['rss_between'] / mib:.1f} | {r['peak'] / mib:.1f} |", flush=True)
            rows.append({"world": world, "kind": kind, **r, "ratio": ratio})
    if args.only == "memory":
        return
    kinds = ["DDP", "FULL_SHARD", "FULL_SHARD+forward_prefetch", "SHARD_GRAD_OP"]
    speed_env = {k: v for k, v in env.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    res = run_workers(f"{me}:speed_worker", 2, kinds, width, layers, args.batch, blocks, steps,
                      timeout=600, env=speed_env)
    print("\n| config (2 ranks) | step (ms, median of blocks, slowest rank) | x DDP "
          "| CPU time per step (ms, busiest rank) | x DDP |")
    print("| --- | ---: | ---: | ---: | ---: |")
    per_block = {k: [max(r["wall"][k][b] for r in res) for b in range(blocks)] for k in kinds}
    cpu_block = {k: [max(r["cpu"][k][b] for r in res) for b in range(blocks)] for k in kinds}
    for k in kinds:
        ratios = [a / d for a, d in zip(per_block[k], per_block["DDP"], strict=True)]
        cratios = [a / d for a, d in zip(cpu_block[k], cpu_block["DDP"], strict=True)]
        print(f"| {k} | {statistics.median(per_block[k]) * 1e3:.1f} | "
              f"{statistics.median(ratios):.2f} | {statistics.median(cpu_block[k]) * 1e3:.1f} | "
              f"{statistics.median(cratios):.2f} |")
    print("\ngoal: FULL_SHARD step <= 1.30 x DDP")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"memory": rows, "speed": res}, f, indent=1)


if __name__ == "__main__":
    main()
