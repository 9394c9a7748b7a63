"""DistributedDataParallel scaling: 1 vs N ranks, TensorBrain vs torch DDP over Gloo.

    python benchmarks/ddp.py                       # MLP and CNN, B=64 and 512 per rank, 1 vs 2 ranks
    python benchmarks/ddp.py --compare torch       # + torch DDP (gloo) in the same run
    python benchmarks/ddp.py --models mlp --batches 512 --repeat 3 --compare torch
    python benchmarks/ddp.py --quick               # smoke run

Every rank is a separate process with 1 BLAS thread (OMP/OPENBLAS/MKL_NUM_THREADS=1, torch
set_num_threads(1)), as in ../shared/BASELINES.md. A step is ``zero_grad; loss(model(x),
y).backward(); step()`` with SGD (momentum 0.9) on random data of B samples per rank.

Figures:
* step: wall time per step, the slowest rank's mean over the timed steps;
* samples/s: global throughput, ranks x B / step;
* efficiency: samples/s with N ranks / (N x samples/s with 1 rank) = step(1) / step(N);
  1 rank runs DDP too (a world of one), as torch's baseline row does; "plain" is the model
  without DDP in one process, for reference;
* hidden: the share of all_reduce time that overlapped backward, measured from timestamps
  the reducer records: a bucket's reduction runs from max(its launch, the previous bucket's
  end) to its completion; the part after backward ended (while the optimizer waits) is exposed.
Runs of the contenders are interleaved (--repeat) and the median is kept, because this shared
2-core machine is noisy; compare ratios from one run, not absolute figures across runs.
Goals (issue 5; not asserted anywhere): efficiency >= 0.85 at B=512 per rank on 2 ranks, and a
step faster than torch DDP's.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"  # before NumPy/torch load their BLAS (this script is the entry point)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

LR, MOMENTUM = 0.01, 0.9


# ***** models (the same architecture in both frameworks) *****
def build_tb(name):
    import tensorbrain as tb
    nn = tb.nn
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                             nn.Linear(512, 10)), (784,)
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(),
                         nn.Linear(128, 10)), (1, 28, 28)


def build_torch(name):
    import torch.nn as nn
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                             nn.Linear(512, 10)), (784,)
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(),
                         nn.Linear(128, 10)), (1, 28, 28)


# ***** worker side *****
def overlap_from_timings(timings):
    """(hidden share, exposed seconds, comm seconds) from the reducer's timestamp records."""
    comm = exposed = 0.0
    prev_done = None
    pending = []
    for rec in timings:
        if rec[0] == "backward_end":
            t_end = rec[1]
            for launch, done in pending:
                if done is None:
                    continue
                start = launch if prev_done is None else max(launch, prev_done)
                comm += done - start
                exposed += max(0.0, done - max(start, t_end))
                prev_done = done
            pending, prev_done = [], None
        else:
            pending.append(rec)
    return (1.0 - exposed / comm if comm > 0 else 0.0), exposed, comm


def worker_tb(a, rank, world):
    import numpy as np
    import tensorbrain as tb
    tb.manual_seed(0)
    model, shape = build_tb(a.model)
    ddp = model
    if world > 0:
        import tensorbrain.distributed as dist
        dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{a.port}", rank=rank,
                                world_size=world)
        ddp = tb.nn.parallel.DistributedDataParallel(model)
    rng = np.random.default_rng(rank)
    x = tb.from_numpy(rng.standard_normal((a.batch, *shape)).astype(np.float32))
    y = tb.from_numpy(rng.integers(0, 10, a.batch))
    opt = tb.optim.SGD(ddp.parameters(), lr=LR, momentum=MOMENTUM)
    lossf = tb.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        lossf(ddp(x), y).backward()
        opt.step()
    for _ in range(a.warmup):
        step()
    if world > 0:
        dist.barrier()
        ddp.reducer.timings = []
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    elapsed = time.perf_counter() - t0
    out = {"step": elapsed / a.steps}
    if world > 0:
        hidden, exposed, comm = overlap_from_timings(ddp.reducer.timings)
        out.update(hidden=hidden, exposed=exposed / a.steps, comm=comm / a.steps,
                   buckets=len(ddp.reducer.buckets))
        dist.barrier()
        dist.destroy_process_group()
    return out


def worker_torch(a, rank, world):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, shape = build_torch(a.model)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(a.batch, *shape, generator=g)
    y = torch.randint(0, 10, (a.batch,), generator=g)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR, momentum=MOMENTUM)
    lossf = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        lossf(ddp(x), y).backward()
        opt.step()
    for _ in range(a.warmup):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    elapsed = time.perf_counter() - t0
    dist.barrier()
    dist.destroy_process_group()
    return {"step": elapsed / a.steps}


# ***** launcher side *****
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(framework, model, batch, world, steps, warmup, timeout=300):
    """Run one configuration in ``world`` fresh processes (world 0: plain model, one process)."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=ROOT)
    n = max(world, 1)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", framework, "--models", model,
           "--batches", str(batch), "--steps", str(steps), "--warmup", str(warmup),
           "--port", str(port), "--world", str(world)]
    procs = [subprocess.Popen(cmd + ["--rank", str(r)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(n)]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            if p.returncode != 0:
                raise RuntimeError(f"{framework} worker failed ({model}, B={batch}, "
                                   f"world {world}):\n{err[-3000:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    res = {"step": max(r["step"] for r in results)}
    for key in ("hidden", "exposed", "comm"):
        if key in results[0]:
            res[key] = statistics.mean(r[key] for r in results)
    if "buckets" in results[0]:
        res["buckets"] = results[0]["buckets"]
    return res


def hardware():
    import numpy as np
    model = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{model}; {os.cpu_count()} logical cores; load avg {load:.2f}; Python "
            f"{platform.python_version()}; NumPy {np.__version__}; 1 BLAS thread per rank")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--batches", default="64,512")
    ap.add_argument("--ranks", type=int, default=2, help="ranks to compare against 1 (default 2)")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default: by batch size)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=1, help="interleaved repetitions (median kept)")
    ap.add_argument("--compare", choices=["torch"], default=None)
    ap.add_argument("--quick", action="store_true", help="few steps (smoke run)")
    ap.add_argument("--json", help="also write the results to this file")
    # worker mode (internal)
    ap.add_argument("--worker", choices=["tb", "torch"])
    ap.add_argument("--port", type=int)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=1)
    a = ap.parse_args(argv)
    if a.worker:
        a.model, a.batch = a.models, int(a.batches)
        fn = worker_tb if a.worker == "tb" else worker_torch
        print(json.dumps(fn(a, a.rank, a.world)), flush=True)
        return
    if a.compare == "torch":
        try:
            import torch
            torch_version = torch.__version__
        except ImportError:
            print("torch is not installed (pip install torch==2.13.0): skipping --compare torch")
            a.compare = None
    print(f"# DDP benchmark: {hardware()}")
    print(f"# backend tcp (shared memory between local ranks); "
          + (f"torch {torch_version} DDP over gloo" if a.compare else "no torch comparison"))
    rows = []
    N = a.ranks
    for model in a.models.split(","):
        for batch in map(int, a.batches.split(",")):
            steps = a.steps or (5 if a.quick else (200 if batch <= 64 else 60))
            warm = 2 if a.quick else a.warmup
            runs = {}
            contenders = [("tb", 0), ("tb", 1), ("tb", N)]
            if a.compare:
                contenders += [("torch", 1), ("torch", N)]
            for _ in range(a.repeat):
                for fw, world in contenders:
                    runs.setdefault((fw, world), []).append(
                        launch(fw, model, batch, world, steps, warm))
            med = {k: _median(v) for k, v in runs.items()}
            row = {"model": model, "batch": batch, "ranks": N, "steps": steps,
                   "plain_step": med[("tb", 0)]["step"], "tb1": med[("tb", 1)],
                   "tbN": med[("tb", N)]}
            if a.compare:
                row["torch1"], row["torchN"] = med[("torch", 1)], med[("torch", N)]
            rows.append(row)
            _print_row(row, N)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


def _median(results):
    out = {"step": statistics.median(r["step"] for r in results)}
    for key in ("hidden", "exposed", "comm", "buckets"):
        if key in results[0]:
            out[key] = statistics.median(r[key] for r in results)
    return out


def _print_row(r, N):
    B = r["batch"]
    print(f"\n## {r['model']}, B={B} per rank ({r['steps']} timed steps)")
    print("| contender | ranks | step (ms) | global samples/s | efficiency | all_reduce hidden "
          "| exposed comm (ms/step) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(f"| tb, no DDP | 1 | {r['plain_step'] * 1e3:.2f} | {B / r['plain_step']:,.0f} | - | - | - |")
    for name, k1, kN in (("tb DDP", "tb1", "tbN"), ("torch DDP (gloo)", "torch1", "torchN")):
        if k1 not in r:
            continue
        one, many = r[k1], r[kN]
        eff = one["step"] / many["step"]
        print(f"| {name} | 1 | {one['step'] * 1e3:.2f} | {B / one['step']:,.0f} | 1.00 | - | - |")
        hid = f"{many['hidden']:.0%}" if "hidden" in many else "-"
        exp = f"{many['exposed'] * 1e3:.2f}" if "exposed" in many else "-"
        print(f"| {name} | {N} | {many['step'] * 1e3:.2f} | {N * B / many['step']:,.0f} | "
              f"{eff:.2f} | {hid} | {exp} |")
    if "torchN" in r:
        print(f"tb DDP step / torch DDP step at {N} ranks: "
              f"{r['tbN']['step'] / r['torchN']['step']:.2f} (below 1: tb faster)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
