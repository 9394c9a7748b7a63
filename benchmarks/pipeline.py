"""Pipeline schedules, tensor parallel and activation checkpointing: step time, bubble, memory.

    python benchmarks/pipeline.py                 # everything (2 and 4 pipeline ranks)
    python benchmarks/pipeline.py --parts pp --ranks 2
    python benchmarks/pipeline.py --quick         # smoke run: small sizes, few steps

Every rank is a separate process (tensorbrain.testing.distributed.run_workers, tcp backend) with
1 BLAS thread. Figures, medians over the timed steps:

* pipeline (GPipe, 1F1B, interleaved 1F1B with 2 stages per rank) on P ranks, M = 8
  micro-batches, the same deep MLP (``--layers`` Linear+ReLU layers of ``--width``) cut into
  P stages (2P for interleaved):
  - step: the slowest rank's wall time of ``schedule.step`` (ranks start together after a
    barrier);
  - bubble (measured): 1 - compute / step per rank, averaged over ranks, where compute is the
    time a rank spent inside its stages' forward and backward; next to the ideal
    (S-1)/(M+S-1) (GPipe, 1F1B) or (P-1)/(V*M+P-1) (interleaved, V stages per rank). On a
    machine with fewer free cores than ranks the measured bubble also contains time spent
    waiting for a core;
  - activations: the peak of traced NumPy memory during one step above the memory held before
    it (Python's tracemalloc sees every NumPy allocation; it includes the last stage's merged
    output and the transport's buffers), and the most (stage, micro-batch) activation sets a
    rank held at once;
* tensor parallel: a Megatron MLP block (d -> 4d -> d) on 2 ranks (ColwiseParallel,
  RowwiseParallel) against the unsplit block on one rank alone (the other waits): step time and
  memory per rank (parameters + optimizer-free step peak);
* tensor parallel x FSDP on a 2-D mesh (dp=2 x tp=2, 4 ranks): blocks of that MLP,
  ``parallelize_module`` on ``mesh["tp"]`` then ``fully_shard`` on ``mesh["dp"]``, each dp rank
  on half the batch, a step = forward, backward, ``clip_grad_norm_``, SGD, against the unsplit
  model on rank 0 alone on the whole batch (the others wait): step time and parameters per rank;
* activation checkpointing: a deep MLP in one process, plain against checkpoint_sequential with
  k segments: peak activation memory and step time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _mlp(tb, width, layers):
    mods = []
    for _ in range(layers):
        mods += [tb.nn.Linear(width, width), tb.nn.ReLU()]
    return tb.nn.Sequential(*mods)


def _peak_during(fn):
    """(peak traced bytes above the start, result of fn())."""
    import tracemalloc
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = fn()
        return tracemalloc.get_traced_memory()[1] - base, out
    finally:
        tracemalloc.stop()


# ***** pipeline schedules (one function per rank) *****
def pp_worker(rank, world, kind, width, layers, mb_rows, M, warmup, steps):
    import numpy as np

    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                                    ScheduleInterleaved1F1B, split_sequential)
    V = 2 if kind == "interleaved" else 1
    S = world * V
    tb.manual_seed(0)
    parts = split_sequential(_mlp(tb, width, layers), num_stages=S)
    mine = [s for s in range(S) if s % world == rank]
    stages = [PipelineStage(parts[s], s, S, "cpu") for s in mine]
    loss = tb.nn.MSELoss()
    if kind == "interleaved":
        sched = ScheduleInterleaved1F1B(stages, M, loss_fn=loss)
    else:
        sched = (ScheduleGPipe if kind == "gpipe" else Schedule1F1B)(stages[0], M, loss_fn=loss)
    opt = tb.optim.SGD([p for s in mine for p in parts[s].parameters()], lr=1e-4)
    rng = np.random.default_rng(rank)
    x = tb.tensor(rng.standard_normal((M * mb_rows, width)).astype(np.float32))
    y = tb.tensor(rng.standard_normal((M * mb_rows, width)).astype(np.float32))

    def one():
        if 0 in mine:
            return sched.step(x)
        if S - 1 in mine:
            return sched.step(target=y)
        return sched.step()
    times, busy = [], []
    for i in range(warmup + steps):
        opt.zero_grad()
        dist.barrier()
        one()
        opt.step()
        if i >= warmup:
            times.append(sched.last_step_stats["step_s"])
            busy.append(sched.last_step_stats["compute_s"])
    dist.barrier()
    peak, _ = _peak_during(one)    # gradients already exist: the peak is activations + buffers
    return {"step": times, "busy": busy, "peak_bytes": peak,
            "live": sched.last_step_stats["peak_live_rank"]}


def run_pp(ranks, width, layers, mb_rows, M, warmup, steps):
    from tensorbrain.testing.distributed import run_workers
    rows = []
    for P in ranks:
        for kind in ("gpipe", "1f1b", "interleaved"):
            res = run_workers("benchmarks.pipeline:pp_worker", P, kind, width, layers, mb_rows, M,
                              warmup, steps, timeout=600)
            step = statistics.median(max(r["step"][i] for r in res) for i in range(steps))
            bubble = statistics.mean(
                1 - statistics.median(r["busy"]) / statistics.median(r["step"]) for r in res)
            V = 2 if kind == "interleaved" else 1
            ideal = (P - 1) / (V * M + P - 1)
            rows.append({"ranks": P, "schedule": kind, "stages": P * V, "step_ms": step * 1e3,
                         "bubble": bubble, "ideal": ideal,
                         "peak_mib": [r["peak_bytes"] / 2**20 for r in res],
                         "live": [r["live"] for r in res]})
            print(_pp_row(rows[-1]), flush=True)
    return rows


def _pp_row(r):
    mib = " / ".join(f"{m:.1f}" for m in r["peak_mib"])
    live = " / ".join(str(n) for n in r["live"])
    return (f"| {r['ranks']} | {r['schedule']} | {r['stages']} | {r['step_ms']:.1f} | "
            f"{r['bubble']:.2f} | {r['ideal']:.2f} | {mib} | {live} |")


# ***** tensor parallel MLP block *****
def tp_worker(rank, world, dim, tokens, warmup, steps):
    import numpy as np

    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed.device_mesh import init_device_mesh
    from tensorbrain.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                         parallelize_module)
    F = tb.nn.functional

    class Block(tb.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1, self.w2 = tb.nn.Linear(dim, 4 * dim), tb.nn.Linear(4 * dim, dim)

        def forward(self, x):
            return self.w2(F.gelu(self.w1(x)))
    rng = np.random.default_rng(0)
    x = tb.tensor(rng.standard_normal((tokens, dim)).astype(np.float32))
    y = tb.tensor(rng.standard_normal((tokens, dim)).astype(np.float32))

    def measure(model):
        opt = tb.optim.SGD(model.parameters(), lr=1e-4)

        def step():
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()
        times = []
        for i in range(warmup + steps):
            t0 = time.perf_counter()
            step()
            if i >= warmup:
                times.append(time.perf_counter() - t0)
        param = sum(p._data.nbytes for p in model.parameters())
        peak, _ = _peak_during(step)
        return {"step": statistics.median(times), "param_bytes": param, "peak_bytes": peak}
    out = {}
    tb.manual_seed(0)
    if rank == 0:
        out["unsplit"] = measure(Block())
    dist.barrier()
    mesh = init_device_mesh("cpu", (world,))
    tb.manual_seed(0)
    model = parallelize_module(Block(), mesh, {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
    dist.barrier()
    out["tp"] = measure(model)
    return out


def run_tp(dim, tokens, warmup, steps):
    from tensorbrain.testing.distributed import run_workers
    res = run_workers("benchmarks.pipeline:tp_worker", 2, dim, tokens, warmup, steps,
                      timeout=600)
    un, tp = res[0]["unsplit"], res
    print("| layout | step (ms) | parameters per rank (MiB) | step peak per rank (MiB) |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| unsplit, 1 rank | {un['step'] * 1e3:.1f} | {un['param_bytes'] / 2**20:.1f} | "
          f"{un['peak_bytes'] / 2**20:.1f} |")
    step = max(r["tp"]["step"] for r in tp)
    print(f"| tensor parallel, 2 ranks | {step * 1e3:.1f} | "
          f"{max(r['tp']['param_bytes'] for r in tp) / 2**20:.1f} | "
          f"{max(r['tp']['peak_bytes'] for r in tp) / 2**20:.1f} |")
    print(f"speed-up {un['step'] / step:.2f}x on 2 ranks", flush=True)
    return {"unsplit": un, "tp": [r["tp"] for r in tp]}


# ***** tensor parallel + FSDP on a 2-D mesh *****
def tpfsdp_worker(rank, world, dim, tokens, blocks, warmup, steps):
    import numpy as np

    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed.device_mesh import init_device_mesh
    from tensorbrain.distributed.fsdp import fully_shard
    from tensorbrain.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                         parallelize_module)
    F = tb.nn.functional

    class Block(tb.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1, self.w2 = tb.nn.Linear(dim, 4 * dim), tb.nn.Linear(4 * dim, dim)

        def forward(self, x):
            return x + self.w2(F.gelu(self.w1(x)))

    def build():
        tb.manual_seed(0)
        return tb.nn.Sequential(*[Block() for _ in range(blocks)])
    rng = np.random.default_rng(0)
    x = tb.tensor(rng.standard_normal((tokens, dim)).astype(np.float32))
    y = tb.tensor(rng.standard_normal((tokens, dim)).astype(np.float32))

    def measure(model, xs, ys):
        opt = tb.optim.SGD(model.parameters(), lr=1e-4)

        def step():
            opt.zero_grad()
            F.mse_loss(model(xs), ys).backward()
            tb.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        times = []
        for i in range(warmup + steps):
            dist.barrier()
            t0 = time.perf_counter()
            step()
            if i >= warmup:
                times.append(time.perf_counter() - t0)
        param = sum(p._data.nbytes for p in model.parameters())
        return {"step": statistics.median(times), "param_bytes": param}
    out = {}
    if rank == 0:
        out["unsplit"] = _alone(measure, build(), x, y)
    dist.barrier()
    mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp"))
    model = parallelize_module(build(), mesh["tp"], {"*.w1": ColwiseParallel(),
                                                     "*.w2": RowwiseParallel()})
    for b in model:
        fully_shard(b, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    dp, rows = mesh.get_local_rank("dp"), tokens // mesh.size(0)
    out["tpfsdp"] = measure(model, x[dp * rows:(dp + 1) * rows], y[dp * rows:(dp + 1) * rows])
    return out


def _alone(measure, model, x, y):
    """``measure`` on rank 0 alone (its barriers must not wait for the others)."""
    import tensorbrain.distributed as dist
    real = dist.barrier
    dist.barrier = lambda *a, **k: None
    try:
        return measure(model, x, y)
    finally:
        dist.barrier = real


def run_tpfsdp(dim, tokens, blocks, warmup, steps, world=4):
    from tensorbrain.testing.distributed import run_workers
    res = run_workers("benchmarks.pipeline:tpfsdp_worker", world, dim, tokens, blocks, warmup,
                      steps, timeout=900)
    un = res[0]["unsplit"]
    step = max(r["tpfsdp"]["step"] for r in res)
    print("| layout | step (ms) | parameters per rank (MiB) |")
    print("| --- | ---: | ---: |")
    print(f"| unsplit, 1 rank, whole batch | {un['step'] * 1e3:.1f} | "
          f"{un['param_bytes'] / 2**20:.2f} |")
    print(f"| TP x FSDP, {world} ranks (dp={world // 2} x tp=2) | {step * 1e3:.1f} | "
          f"{max(r['tpfsdp']['param_bytes'] for r in res) / 2**20:.2f} |")
    print(f"speed-up {un['step'] / step:.2f}x on {world} ranks", flush=True)
    return {"unsplit": un, "tpfsdp": [r["tpfsdp"] for r in res]}


# ***** activation checkpointing *****
def run_ckpt(width, layers, rows, warmup, steps, segments):
    import numpy as np

    import tensorbrain as tb
    from tensorbrain.utils.checkpoint import checkpoint_sequential
    tb.manual_seed(0)
    net = _mlp(tb, width, layers)
    opt = tb.optim.SGD(net.parameters(), lr=1e-4)
    rng = np.random.default_rng(0)
    x = tb.tensor(rng.standard_normal((rows, width)).astype(np.float32))

    def step(seg):
        opt.zero_grad(set_to_none=False)
        out = net(x) if seg is None else checkpoint_sequential(net, seg, x, use_reentrant=False)
        out.pow(2).mean().backward()
        opt.step()
    print("| run | step (ms) | peak above parameters+grads (MiB) |")
    print("| --- | ---: | ---: |")
    results = {}
    for seg in [None] + list(segments):
        for _ in range(warmup):
            step(seg)
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step(seg)
            times.append(time.perf_counter() - t0)
        peak, _ = _peak_during(lambda s=seg: step(s))
        name = "plain" if seg is None else f"checkpoint_sequential, {seg} segments"
        results[name] = (statistics.median(times), peak)
        print(f"| {name} | {results[name][0] * 1e3:.1f} | {peak / 2**20:.1f} |", flush=True)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="pp,tp,tpfsdp,ckpt")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--mb-rows", type=int, default=64)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.width, a.mb_rows, a.steps = 64, 8, 3
    from benchmarks._common import cpu_model
    print(f"# {cpu_model()}, {os.cpu_count()} cores, 1 BLAS thread per rank\n")
    parts = a.parts.split(",")
    if "pp" in parts:
        print(f"## pipeline: MLP of {a.layers} x Linear({a.width}) + ReLU, "
              f"M={a.microbatches} micro-batches of {a.mb_rows} rows\n")
        print("| ranks | schedule | stages | step (ms) | bubble measured | bubble ideal | "
              "activation peak per rank (MiB) | micro-batches held per rank |")
        print("| ---: | --- | ---: | ---: | ---: | ---: | --- | --- |")
        run_pp([int(r) for r in a.ranks.split(",")], a.width, a.layers, a.mb_rows,
               a.microbatches, 2, a.steps)
    if "tp" in parts:
        dim = 256 if a.quick else 1024
        tokens = 64 if a.quick else 512
        print(f"\n## tensor parallel MLP block d={dim} -> {4 * dim} -> {dim}, {tokens} tokens\n")
        run_tp(dim, tokens, 2, a.steps)
    if "tpfsdp" in parts:
        dim, tokens, blocks = (64, 64, 2) if a.quick else (512, 512, 2)
        print(f"\n## tensor parallel x FSDP (fully_shard), {blocks} MLP blocks d={dim} -> "
              f"{4 * dim} -> {dim}, {tokens} tokens, clip_grad_norm_ each step\n")
        run_tpfsdp(dim, tokens, blocks, 2, a.steps)
    if "ckpt" in parts:
        width, layers, rows = (128, 8, 32) if a.quick else (512, 16, 1024)
        print(f"\n## activation checkpointing: MLP of {layers} x Linear({width}) + ReLU, "
              f"batch {rows}\n")
        run_ckpt(width, layers, rows, 2, a.steps, (2, 4, layers))


if __name__ == "__main__":
    main()
