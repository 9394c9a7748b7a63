"""DistributedDataParallel scaling: 1 vs N ranks, TensorBrain vs torch DDP over Gloo.

    python benchmarks/ddp.py                       # MLP and CNN, B=64 and 512 per rank, 1 vs 2 ranks
    python benchmarks/ddp.py --compare torch       # + torch DDP (gloo) in the same run
    python benchmarks/ddp.py --models mlp --batches 512 --repeat 3 --compare torch
    python benchmarks/ddp.py --quick               # smoke run

Every rank is a separate process with 1 BLAS thread (OMP/OPENBLAS/MKL_NUM_THREADS=1, torch
set_num_threads(1)), so a rank's time does not depend on idle cores. A step is
``zero_grad; loss(model(x), y).backward(); step()`` with SGD (momentum 0.9) on random data of B
samples per rank.

Figures (one launch per model and batch runs every contender in the same processes -- tb and,
with --compare torch, torch with its own gloo group -- in interleaved blocks of steps, so the
load of this shared machine hits every contender alike; medians over blocks):
* step, 1 rank: rank 0 alone with DDP in a world of one (as torch's baseline row), while the
  other ranks wait in a barrier; "tb, no DDP" is the bare model for reference;
* step, N ranks: every rank with DDP over the whole world, the slowest rank's time per block;
* global samples/s: ranks x B / step; efficiency: step(1 rank) / step(N ranks), per block;
* all_reduce hidden: the share of all_reduce time that overlapped backward, measured from
  timestamps the reducer records: a bucket's reduction runs from max(its launch, the previous
  bucket's end) to its completion; the part after backward ended is exposed;
* CPU/wall: process CPU time per wall time of a rank in the N-rank phase; well below 1 means
  the ranks were waiting for a core (other jobs) or for each other;
* efficiency by CPU time: CPU time per step of rank 0 alone / of the busiest rank with N ranks.
  It counts the work DDP adds (copies, reductions, Python, waiting threads that spin) but not
  time spent waiting for a core, so on a loaded machine it shows what the wall-clock efficiency
  would be with a core per rank; on an idle machine the two agree.
Compare ratios from one run, not absolute figures across runs.
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
def build(nn, name):
    """The model and its input shape, from ``nn`` = ``tb.nn`` or ``torch.nn`` (same names)."""
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


def _timed(step, n, reducer=None):
    """Wall and process-CPU seconds per step over ``n`` steps."""
    if reducer is not None:
        reducer.timings = []
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        step()
    return (time.perf_counter() - w0) / n, (time.process_time() - c0) / n


def _setup_tb(a, rank, world, port):
    import numpy as np
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    tb.manual_seed(0)
    dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    solo = dist.new_group([0])
    rng = np.random.default_rng(rank)
    model, shape = build(tb.nn, a.model)
    x = tb.from_numpy(rng.standard_normal((a.batch, *shape)).astype(np.float32))
    y = tb.from_numpy(rng.integers(0, 10, a.batch))
    DDP = tb.nn.parallel.DistributedDataParallel
    ddp_n = DDP(model)
    steps = {"N": _stepper(tb, ddp_n, x, y)}
    if rank == 0:
        steps["plain"] = _stepper(tb, build(tb.nn, a.model)[0], x, y)
        steps["one"] = _stepper(tb, DDP(build(tb.nn, a.model)[0], process_group=solo), x, y)
    setups = {"tb": (dist, steps, ddp_n.reducer)}
    variants = a.variants.split(",") if a.variants else []
    if "view" in variants:  # gradient_as_bucket_view=True: no copy into or out of the buckets
        view_n = DDP(build(tb.nn, a.model)[0], gradient_as_bucket_view=True)
        vsteps = {"N": _stepper(tb, view_n, x, y)}
        if rank == 0:
            vsteps["one"] = _stepper(tb, DDP(build(tb.nn, a.model)[0], process_group=solo,
                                             gradient_as_bucket_view=True), x, y)
        setups["tb-view"] = (dist, vsteps, view_n.reducer)
    if "copy" in variants:  # fused, but through the transport's buffers (no resident arena)
        cp_n = DDP(build(tb.nn, a.model)[0])
        cp_n.reducer.resident = False
        setups["tb-copy"] = (dist, {"N": _stepper(tb, cp_n, x, y)}, cp_n.reducer)
        if rank == 0:
            setups["tb-copy"][1]["one"] = _stepper(tb, DDP(build(tb.nn, a.model)[0],
                                                           process_group=solo), x, y)
    if "unfused" in variants:  # the default DDP reducing bucket by bucket, scaling in the copy
        unf_n = DDP(build(tb.nn, a.model)[0])
        unf_n.reducer.fuse = False
        setups["tb-unfused"] = (dist, {"N": _stepper(tb, unf_n, x, y)}, unf_n.reducer)
        if rank == 0:
            unf_1 = DDP(build(tb.nn, a.model)[0], process_group=solo)
            unf_1.reducer.fuse = False
            setups["tb-unfused"][1]["one"] = _stepper(tb, unf_1, x, y)
    if "plain" in variants:  # no DDP on every rank at once: the ceiling the shared cores allow
        plain = _stepper(tb, build(tb.nn, a.model)[0], x, y)
        setups["tb-plain"] = (dist, {"N": plain, **({"one": plain} if rank == 0 else {})}, None)
    if "lockstep" in variants:  # no DDP, but a barrier after every step: what any synchronous
        bare = _stepper(tb, build(tb.nn, a.model)[0], x, y)  # method pays for step-time jitter

        def lockstep(marks=None):
            bare(marks)
            dist.barrier()
        setups["tb-lockstep"] = (dist, {"N": lockstep, **({"one": bare} if rank == 0 else {})},
                                 None)
    return setups


def _setup_torch(a, rank, world, port):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    torch.manual_seed(0)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    solo = dist.new_group([0])
    g = torch.Generator().manual_seed(rank)
    model, shape = build(torch.nn, a.model)
    x = torch.randn(a.batch, *shape, generator=g)
    y = torch.randint(0, 10, (a.batch,), generator=g)
    DDP = torch.nn.parallel.DistributedDataParallel
    steps = {"N": _stepper(torch, DDP(model), x, y)}
    if rank == 0:
        steps["one"] = _stepper(torch, DDP(build(torch.nn, a.model)[0], process_group=solo), x, y)
    return dist, steps, None


def _stepper(fw, model, x, y):
    opt = fw.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    lossf = fw.nn.CrossEntropyLoss()

    def step(marks=None):
        """One step; ``marks`` (--phases) gets the times after forward and after backward."""
        opt.zero_grad()
        loss = lossf(model(x), y)
        if marks is not None:
            marks.append(time.perf_counter())
        loss.backward()
        if marks is not None:
            marks.append(time.perf_counter())
        opt.step()
    return step


PHASES = ("forward", "backward", "reduce", "after reduce", "optimizer", "step", "CPU")


def phases(setups, rank, rounds):
    """--phases: every N-rank contender one step at a time in turn, each step after a barrier;
    per step the wall time of each phase (backward ends where the reducer's end-of-backward
    callback starts; reduce runs from there to the end of the reduction, waiting for the
    slower rank included) and the step's CPU time. Returns {contender: [[per phase] per step]}."""
    dist = setups["tb"][0]
    out: dict = {fw: [] for fw in setups}
    for r in range(rounds):
        names = list(setups)
        for fw in names[r % len(names):] + names[:r % len(names)]:
            _, steps, reducer = setups[fw]
            if reducer is not None:
                reducer.timings = []
            marks: list = []
            dist.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            steps["N"](marks)
            t3, c3 = time.perf_counter(), time.process_time()
            fwd_end, bwd_end = marks
            red = [t for t in (reducer.timings if reducer is not None else []) if t[1] is not None]
            if red and red[-1][0] == "backward_end":
                t_end = red[-1][1]
                r1 = max(t[1] for t in red[:-1]) if len(red) > 1 else t_end
                row = [fwd_end - t0, t_end - fwd_end, r1 - t_end, bwd_end - r1]
            else:
                row = [fwd_end - t0, bwd_end - fwd_end, 0.0, 0.0]
            out[fw].append(row + [t3 - bwd_end, t3 - t0, c3 - c0])
    return out


def worker(a, rank, world):
    """One launch measures every contender in the same processes, interleaved in blocks, so
    load changes on this shared machine hit all alike. Per block: rank 0 alone (tb plain,
    tb DDP in a world of one, torch DDP in a world of one) while the others wait in a barrier,
    then every rank with tb DDP over the world, then every rank with torch DDP."""
    setups = _setup_tb(a, rank, world, a.port)
    frameworks = list(setups) + (["torch"] if a.worker == "both" else [])
    if "torch" in frameworks:
        setups["torch"] = _setup_torch(a, rank, world, a.port + 1)
    tb_dist = setups["tb"][0]
    for _, steps, _ in setups.values():  # warm-up
        for fn in steps.values():
            for _ in range(a.warmup):
                fn()
    if a.phases:
        setups.pop("torch", None)
        result = phases(setups, rank, a.phases)
        tb_dist.barrier()
        tb_dist.destroy_process_group()
        return result
    out = {fw: {"plain": [], "one": [], "cpu1": [], "N": [], "cpuN": [], "hidden": [],
                "exposed": []}
           for fw in frameworks}
    for block in range(a.blocks):
        tb_dist.barrier()
        if rank == 0:
            for fw in frameworks:
                steps = setups[fw][1]
                if "plain" in steps:
                    out[fw]["plain"].append(_timed(steps["plain"], a.steps)[0])
                wall, cpu = _timed(steps["one"], a.steps)
                out[fw]["one"].append(wall)
                out[fw]["cpu1"].append(cpu)
        # the N-rank contenders in an order that rotates per block: the first one after rank
        # 0's solo steps (its peers idle in a barrier meanwhile) ran 1-4 points slower (measured)
        k = block % len(frameworks)
        for fw in frameworks[k:] + frameworks[:k]:
            tb_dist.barrier()
            _, steps, reducer = setups[fw]
            wall, cpu = _timed(steps["N"], a.steps, reducer)
            out[fw]["N"].append(wall)
            out[fw]["cpuN"].append(cpu)
            if reducer is not None:
                hidden, exposed, _ = overlap_from_timings(reducer.timings)
                out[fw]["hidden"].append(hidden)
                out[fw]["exposed"].append(exposed / a.steps)
    out["tb"]["buckets"] = len(setups["tb"][2].buckets)
    tb_dist.barrier()
    for dist in {id(d): d for d, _, _ in setups.values()}.values():
        dist.destroy_process_group()
    return out


# ***** launcher side *****
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(framework, model, batch, world, steps, warmup, blocks, timeout=600, variants="",
           phases=0):
    """Run one framework/model/batch in ``world`` fresh processes; per-block figures back.
    ``variants``: extra tb contenders in the same processes ("view", "plain"; see --variants)."""
    port = free_port()
    while True:  # torch's store takes port + 1
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
            break
        except OSError:
            port = free_port()
    env = dict(os.environ, PYTHONPATH=ROOT)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", framework, "--models", model,
           "--batches", str(batch), "--steps", str(steps), "--warmup", str(warmup),
           "--blocks", str(blocks), "--port", str(port), "--world", str(world),
           "--variants", variants, "--phases", str(phases)]
    procs = [subprocess.Popen(cmd + ["--rank", str(r)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(world)]
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
    if phases:
        return {fw: [r[fw] for r in results] for fw in results[0]}
    rows = {}
    for fw in results[0]:
        r0 = results[0][fw]
        # the world's step time in a block is its slowest rank's; the median block is kept
        n_blocks = [max(r[fw]["N"][b] for r in results) for b in range(blocks)]
        effs = [one / many for one, many in zip(r0["one"], n_blocks)]
        cpu_n = [max(r[fw]["cpuN"][b] for r in results) for b in range(blocks)]
        res = {"one": statistics.median(r0["one"]), "N": statistics.median(n_blocks),
               "eff": statistics.median(effs),
               "cpu_eff": statistics.median(c1 / cn for c1, cn in zip(r0["cpu1"], cpu_n)),
               "cpuN": statistics.median(statistics.mean(r[fw]["cpuN"][b] for r in results)
                                         for b in range(blocks))}
        if r0["plain"]:
            res["plain"] = statistics.median(r0["plain"])
        if r0["hidden"]:
            res["hidden"] = statistics.median(h for r in results for h in r[fw]["hidden"])
            res["exposed"] = statistics.median(e for r in results for e in r[fw]["exposed"])
            res["buckets"] = r0.get("buckets")
        res["blocks"] = n_blocks
        rows[fw] = res
    ceiling = rows.get("tb-plain", {}).get("blocks")
    for res in rows.values():  # the goal's figure: no-DDP ceiling / this, block by block
        blocks_ = res.pop("blocks")
        if ceiling:
            res["vs_ceiling"] = statistics.median(c / b for c, b in zip(ceiling, blocks_))
    return rows


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
    ap.add_argument("--steps", type=int, default=0,
                    help="timed steps per block (default: 40 at B<=64, 10 above)")
    ap.add_argument("--blocks", type=int, default=5, help="interleaved blocks (median kept)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--compare", choices=["torch"], default=None)
    ap.add_argument("--quick", action="store_true", help="few steps (smoke run)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--phases", type=int, default=0, metavar="STEPS",
                    help="instead of blocks: STEPS rounds of one step per N-rank contender, "
                         "each after a barrier, and where each step's time goes (forward, "
                         "backward, the reduction with the wait for the slower rank, after it, "
                         "optimizer), quartile 1 per rank: robust to other jobs' load")
    ap.add_argument("--variants", default="",
                    help="extra tb contenders in the same processes, comma-separated: 'view' "
                         "(DDP with gradient_as_bucket_view=True), 'copy' (DDP without the "
                         "resident shared-memory arena: the fused all_reduce copies the "
                         "gradients in and out of the transport), 'unfused' (DDP reducing "
                         "bucket by bucket, as before the fused end of backward), 'plain' (no "
                         "DDP on every rank at once: what the shared cores and memory allow, "
                         "DDP's ceiling), 'lockstep' (no DDP, a barrier after every step: the "
                         "ceiling less what waiting for the slowest rank at every step costs)")
    # worker mode (internal)
    ap.add_argument("--worker", choices=["tb", "both"])
    ap.add_argument("--port", type=int)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=1)
    a = ap.parse_args(argv)
    if a.worker:
        a.model, a.batch = a.models, int(a.batches)
        print(json.dumps(worker(a, a.rank, a.world)), flush=True)
        return
    if a.compare == "torch":
        try:
            import torch
            torch_version = torch.__version__
        except ImportError:
            print("torch is not installed (pip install torch==2.13.0): skipping --compare torch")
            a.compare = None
    print(f"# DDP benchmark: {hardware()}")
    print("# tb: backend tcp (shared memory between local ranks); "
          + (f"torch {torch_version}: DDP over gloo" if a.compare else "no torch comparison"))
    rows = []
    N = a.ranks
    for model in a.models.split(","):
        for batch in map(int, a.batches.split(",")):
            steps = a.steps or (2 if a.quick else
                                (40 if batch <= 64 else 10) // (1 if model == "mlp" else 3))
            blocks = 1 if a.quick else a.blocks
            warm = 1 if a.quick else a.warmup
            if a.phases:
                _print_phases(model, batch, launch("tb", model, batch, N, steps, warm, blocks,
                                                   variants=a.variants, phases=a.phases))
                continue
            row = {"model": model, "batch": batch, "ranks": N, "steps": steps, "blocks": blocks}
            row.update(launch("both" if a.compare else "tb", model, batch, N, steps, warm,
                              blocks, variants=a.variants))
            rows.append(row)
            _print_row(row, N)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


def _print_phases(model, batch, per_fw):
    print(f"\n## {model}, B={batch} per rank: where a step's time goes (ms, quartile 1 of "
          f"{len(next(iter(per_fw.values()))[0])} steps, per rank)")
    print("| contender | rank | " + " | ".join(PHASES) + " |")
    print("| --- | ---: |" + " ---: |" * len(PHASES))
    for fw, ranks in per_fw.items():
        for r, rows in enumerate(ranks):
            cols = list(zip(*rows))
            q1 = [sorted(c)[len(c) // 4] * 1e3 for c in cols]
            print(f"| {fw} | {r} | " + " | ".join(f"{v:.2f}" for v in q1) + " |")
    sys.stdout.flush()


def _print_row(r, N):
    B = r["batch"]
    print(f"\n## {r['model']}, B={B} per rank ({r['blocks']} blocks of {r['steps']} steps, "
          f"medians)")
    print(f"| contender | step, 1 rank (ms) | step, {N} ranks (ms) | global samples/s, {N} ranks "
          f"| efficiency | all_reduce hidden | exposed comm (ms/step) | CPU/wall, {N} ranks "
          f"| efficiency by CPU time |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    t = r["tb"]
    print(f"| tb, no DDP | {t['plain'] * 1e3:.2f} | - | - | - | - | - | - | - |")
    for name, key in (("tb DDP", "tb"), ("tb DDP, gradient_as_bucket_view", "tb-view"),
                      ("tb DDP, arena not resident (resident=False)", "tb-copy"),
                      ("tb DDP, bucket by bucket (fuse=False)", "tb-unfused"),
                      ("tb, no DDP, every rank at once", "tb-plain"),
                      ("tb, no DDP, every rank at once, a barrier per step", "tb-lockstep"),
                      ("torch DDP (gloo)", "torch")):
        if key not in r:
            continue
        m = r[key]
        hid = f"{m['hidden']:.0%}" if "hidden" in m else "-"
        exp = f"{m['exposed'] * 1e3:.2f}" if "exposed" in m else "-"
        print(f"| {name} | {m['one'] * 1e3:.2f} | {m['N'] * 1e3:.2f} | {N * B / m['N']:,.0f} | "
              f"{m['eff']:.2f} | {hid} | {exp} | {m['cpuN'] / m['N']:.2f} | "
              f"{m['cpu_eff']:.2f} |")
    if "vs_ceiling" in t:
        print("efficiency against the no-DDP ceiling (step of 'every rank at once' / step, "
              "per block, median): " + ", ".join(
                  f"{name} {r[key]['vs_ceiling']:.3f}" for name, key in (
                      ("tb DDP", "tb"), ("gradient_as_bucket_view", "tb-view"),
                      ("resident=False", "tb-copy"), ("fuse=False", "tb-unfused"),
                      ("barrier per step", "tb-lockstep"), ("torch DDP", "torch"))
                  if key in r))
    if "torch" in r:
        print(f"tb DDP step / torch DDP step at {N} ranks: {r['tb']['N'] / r['torch']['N']:.2f} "
              f"(below 1: tb faster)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
