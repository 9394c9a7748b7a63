"""FSDP memory and step time against DDP: an 8-layer, 1024-wide MLP trained with Adam.

    python benchmarks/fsdp.py                  # memory rows at 2 and 4 ranks, step time at 2
    python benchmarks/fsdp.py --quick          # smaller model, fewer steps (smoke run)
    python benchmarks/fsdp.py --json out.json
    python benchmarks/fsdp.py --only limit --limit-mib 128   # largest MLP under ulimit -d
    python benchmarks/fsdp.py --only limit --limit-kind as     # ... under ulimit -v

Every configuration runs in fresh processes (``run_workers``: real processes, TCP backend with
its same-host shared-memory transport, one BLAS thread each). Memory runs fix
``MALLOC_MMAP_THRESHOLD_`` and turn tensorbrain's own glibc tuning off (``TB_MALLOC_TUNING=0``:
it keeps freed blocks in the heap) so that freed arrays go back to the OS and RSS means
something; the step-time run keeps the default allocator, as a user would. Figures per rank
(rank 0 shown; the ranks agree to within a few pages):

* persistent: bytes of parameters + gradients + optimizer state that live between steps, summed
  over the arrays the model and optimizer hold (``p._data``, ``p.grad``, Adam's two moments);
* traced between steps: what Python's ``tracemalloc`` counts as allocated after two steps and
  ``gc`` (NumPy reports its array buffers to it), minus nothing: tracing starts just before the
  model is built, so everything the model, the wrapper, the optimizer and their buffers hold is
  in it and nothing else is (the issue-31 measure: 1/N of parameters, gradients and optimizer
  state plus bounded buffers);
* RSS between steps: resident memory after a step minus resident memory before the model was
  built (after ``gc`` and ``malloc_trim``), so FSDP's freed all-gather buffers count only if
  their pages are really resident;
* peak in step: the highest resident memory a sampling thread saw during the timed steps,
  minus the same baseline (activations, unsharded parameters, gradient buffers);
* step: median time of ``zero_grad; loss.backward(); step()`` over blocks of steps; DDP and
  FSDP run in the same processes in interleaved blocks, so the machine's load hits both alike;
* CPU time per step: process CPU time (all threads) per step; on a machine shared with other
  jobs it shows the work each variant adds, without the time spent waiting for a core;
* largest model under a limit (``--only limit``): each of 4 ranks sets ``RLIMIT_DATA`` (the
  kernel's limit on private writable memory, ``ulimit -d``; ``--limit-kind as``: ``RLIMIT_AS``,
  ``ulimit -v``) to its size before the model plus ``--limit-mib``, after one step of a tiny
  model of the same kind (so lazy imports and the backend's threads are in the baseline), then
  builds the MLP and trains ``--limit-steps`` Adam steps; a run counts if every rank finishes
  with finite losses. A rank over the limit gets MemoryError and the others fail naming it
  (each row says so; a hang would show as one, killed at ``--limit-timeout``). Width is
  searched at 4 layers and depth at width 1024, stepping up by doubling, then bisecting.
  ``FULL_SHARD+per_layer`` wraps each Linear as it is built, so the whole model never exists
  unsharded on one rank.

Goals (figures, not asserted): FULL_SHARD persistent <= (1/N + 0.1) x DDP's at N = 2 and 4 and
FSDP step <= 1.3 x DDP's at 2 ranks (issue 16); FULL_SHARD traced between steps <= 0.6 x DDP's
at 2 ranks and <= 0.35 x at 4 (issue 31).
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

# memory runs: freed arrays go back to the OS, so resident and data sizes mean something
# (TB_MALLOC_TUNING=0: tensorbrain's import would otherwise raise glibc's mmap threshold to 32 MiB
# and keep 64 MiB of freed heap, overriding MALLOC_MMAP_THRESHOLD_)
MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072", "TB_MALLOC_TUNING": "0"}
ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
       **MEMORY_ENV}


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
    import tracemalloc

    import numpy as np
    import tensorbrain as tb
    _trim()
    base = _rss()
    tracemalloc.start()
    tb.manual_seed(0)
    model = _wrap(tb, _model(tb, width, layers), kind)
    optim = tb.optim.Adam(model.parameters(), lr=1e-4)
    x = tb.tensor(np.random.RandomState(rank).randn(batch, width).astype(np.float32))

    def step():
        optim.zero_grad()
        (model(x) ** 2).mean().backward()
        optim.step()
    step()   # Adam's state exists after the first step
    step()
    _trim()
    traced = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()   # its own bookkeeping would otherwise count in the RSS figures
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
    return {"persistent": _persistent(model, optim), "traced": traced, "rss_between": between,
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


# ***** the largest model under an enforced memory limit *****
def _vm(key: str) -> int:
    """One ``Vm*`` figure of /proc/self/status, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _build(tb, kind, width, layers):
    """The model for ``kind``; ``+per_layer``: each Linear is wrapped (sharded) as it is built,
    so a rank never holds more than one unsharded layer -- the way to build a model that does
    not fit one process when there is no meta device."""
    if not kind.endswith("+per_layer"):
        return _wrap(tb, _model(tb, width, layers), kind)
    from tensorbrain.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
    from tensorbrain.distributed.fsdp.wrap import enable_wrap, wrap
    strategy = ShardingStrategy[kind.partition("+")[0]]
    with enable_wrap(wrapper_cls=FSDP, sharding_strategy=strategy):
        mods = []
        for _ in range(layers):
            mods += [wrap(tb.nn.Linear(width, width)), tb.nn.ReLU()]
        return FSDP(tb.nn.Sequential(*mods), sharding_strategy=strategy)


LIMITS = {"data": ("RLIMIT_DATA", "VmData", "ulimit -d"),
          "as": ("RLIMIT_AS", "VmSize", "ulimit -v")}


def cap_worker(rank, world, kind, width, layers, batch, steps, cap, limit="data"):
    """Build and train ``kind`` with ``RLIMIT_DATA`` (``limit="as"``: ``RLIMIT_AS``) set to this
    process's data size (address-space size) before the model plus ``cap`` bytes; a rank that
    needs more gets MemoryError from the kernel's limit.
    A tiny model of the same kind trains one step first, so that what every run pays once
    (lazy imports, the backend's threads and their stacks) is in the baseline."""
    import resource

    import numpy as np
    import tensorbrain as tb

    def train(model, width, steps):
        optim = tb.optim.Adam(model.parameters(), lr=1e-4)
        x = tb.tensor(np.random.RandomState(rank).randn(batch, width).astype(np.float32))
        losses = []
        for _ in range(steps):
            optim.zero_grad()
            loss = (model(x) ** 2).mean()
            loss.backward()
            optim.step()
            losses.append(float(loss.item()))
        return losses, _vm(field)
    rlimit, field, _ = LIMITS[limit]
    rlimit = getattr(resource, rlimit)
    train(_build(tb, kind, 64, 2), 64, 1)
    _trim()
    base = _vm(field)
    resource.setrlimit(rlimit, (base + int(cap), resource.getrlimit(rlimit)[1]))
    tb.manual_seed(0)
    losses, data = train(_build(tb, kind, width, layers), width, steps)
    if not np.all(np.isfinite(losses)):
        raise FloatingPointError(f"rank {rank}: losses {losses}")
    return {"losses": losses, "data": data - base}


def _outcome(results) -> tuple[bool, str]:
    """``(trained, what happened)`` for one capped run's ``WorkerResult`` list."""
    if all(r.ok for r in results):
        return True, "trained"
    oom = [r.rank for r in results if r.error_type == "MemoryError" or
           (r.exitcode is not None and r.exitcode < 0) or   # killed (the OOM killer, say)
           f"on rank {r.rank} failed: MemoryError" in (r.message or "")]   # in a collective
    hung = [r.rank for r in results if r.timed_out]
    others = [r for r in results if not r.ok and r.rank not in oom]
    named = all(any(f"rank {o}" in (r.message or "") for o in oom) for r in others)
    text = f"MemoryError on rank{'s' if len(oom) > 1 else ''} {oom}" if oom else \
        "failed: " + "; ".join(r.describe().splitlines()[0] for r in results if not r.ok)
    if others:
        text += f"; ranks {[r.rank for r in others]} " + (
            f"failed naming rank {oom[0]}" if named and oom and not hung else
            f"{'hung (killed at the timeout)' if hung else 'failed'} without naming it: "
            f"{others[0].describe().splitlines()[0][:200]}")
    return False, text


def _trial(me, env, kind, width, layers, args, cap, log):
    from tensorbrain.testing.distributed import run_workers
    t0 = time.perf_counter()
    res = run_workers(f"{me}:cap_worker", 4, kind, width, layers, args.batch, args.limit_steps,
                      cap, args.limit_kind, timeout=args.limit_timeout, env=env,
                      raise_on_error=False)
    ok, what = _outcome(res)
    n = layers * (width * width + width)
    data = max(r.value["data"] for r in res) / (1 << 20) if ok else float("nan")
    log.append({"kind": kind, "width": width, "layers": layers, "params": n, "trained": ok,
                "what": what, "used_mib": data, "wall_s": time.perf_counter() - t0})
    print(f"| {kind} | {layers} x {width} | {n / 1e6:.2f} M | "
          f"{'yes' if ok else 'no'} | {f'{data:.0f}' if ok else ''} | {what} |", flush=True)
    return ok


def _search(try_size, lo, hi, step):
    """The largest size in ``lo, lo+step, ...`` for which ``try_size`` holds: step up by
    doubling from ``lo`` until it fails (or ``hi``), then bisect. None if ``lo`` fails."""
    good, bad = None, None
    size = lo
    while size <= hi:
        if try_size(size):
            good = size
            size = lo + 2 * (size - lo) + step
        else:
            bad = size
            break
    if good is None:
        return None
    bad = bad if bad is not None else hi + step
    while bad - good > step:
        mid = good + (bad - good) // (2 * step) * step
        if try_size(mid):
            good = mid
        else:
            bad = mid
    return good


def largest_under_cap(args, env, me, layers=4):
    """The largest MLP each configuration trains at 4 ranks under an enforced per-process
    limit (``RLIMIT_DATA`` or ``RLIMIT_AS``): width searched at ``layers`` layers, depth at
    width 1024."""
    cap = int(args.limit_mib * (1 << 20))
    kinds = ("DDP", "FULL_SHARD", "FULL_SHARD+per_layer")
    rlimit, field, shell = LIMITS[args.limit_kind]
    from benchmarks._common import cpu_model
    print(f"# largest MLP (Adam, batch {args.batch}/rank, {args.limit_steps} steps) that trains "
          f"at 4 ranks with {rlimit} ({shell}) = each rank's {field} before the model + "
          f"{args.limit_mib:.0f} MiB; TCP backend; {cpu_model()}")
    print(f"| config | layers x width | parameters | trained | {field} used (MiB) | outcome |")
    print("| --- | --- | ---: | --- | ---: | --- |")
    log, best = [], {}
    for kind in kinds:
        w = _search(lambda w: _trial(me, env, kind, w, layers, args, cap, log), 256, 8192, 64)
        d = _search(lambda d: _trial(me, env, kind, 1024, d, args, cap, log), 1, 256, 1)
        best[kind] = {"width": w, "layers": d}
    print(f"\n| config | widest at {layers} layers | parameters | deepest at width 1024 | "
          f"parameters |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for kind, b in best.items():
        pw = layers * (b["width"] ** 2 + b["width"]) if b["width"] else 0
        pd = b["layers"] * (1024 ** 2 + 1024) if b["layers"] else 0
        print(f"| {kind} | {b['width']} | {pw / 1e6:.2f} M | {b['layers']} | {pd / 1e6:.2f} M |")
    return {"limit": rlimit, "cap_mib": args.limit_mib, "best": best, "trials": log}


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
                    help="the limit above each rank's size before the model (largest-model "
                         "search)")
    ap.add_argument("--limit-kind", choices=sorted(LIMITS), default="data",
                    help="data: RLIMIT_DATA (ulimit -d); as: RLIMIT_AS (ulimit -v)")
    ap.add_argument("--limit-steps", type=int, default=3, help="Adam steps per capped run")
    ap.add_argument("--limit-timeout", type=float, default=300.0,
                    help="seconds before a capped run's ranks count as hung")
    args = ap.parse_args(argv)
    from tensorbrain.testing.distributed import run_workers
    from benchmarks._common import cpu_model
    width, layers = (256, 4) if args.quick else (args.width, args.layers)
    steps, blocks = (3, 2) if args.quick else (5, 5)
    me = "benchmarks.fsdp"
    env = {**ENV, "PYTHONPATH": ROOT}
    if args.only == "limit":
        out = largest_under_cap(args, env, me)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
        return out
    print(f"# FSDP vs DDP: {layers} x Linear({width}, {width}) + ReLU, Adam, batch {args.batch}"
          f"/rank, TCP backend; {cpu_model()}")
    rows = []
    print("\n| ranks | config | persistent (MiB) | x DDP | traced between steps (MiB) | x DDP "
          "| goal (traced) | RSS between steps (MiB) | peak in step (MiB) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    memory_runs = () if args.only == "speed" else (
        (2, ["DDP", "FULL_SHARD", "SHARD_GRAD_OP", "FULL_SHARD+CPUOffload", "NO_SHARD"]),
        (4, ["DDP", "FULL_SHARD"]))
    for world, kinds in memory_runs:
        ddp = None
        for kind in kinds:
            r = run_workers(f"{me}:memory_worker", world, kind, width, layers, args.batch, steps,
                            timeout=600, env=env)[0]
            ddp = r if kind == "DDP" else ddp
            ratio = r["persistent"] / ddp["persistent"]
            traced_ratio = r["traced"] / ddp["traced"]
            goal = {2: "<= 0.60", 4: "<= 0.35"}.get(world, "") if kind == "FULL_SHARD" else ""
            mib = 1 << 20
            print(f"| {world} | {kind} | {r['persistent'] / mib:.1f} | {ratio:.3f} | "
                  f"{r['traced'] / mib:.1f} | {traced_ratio:.3f} | {goal} | "
                  f"{r['rss_between'] / mib:.1f} | {r['peak'] / mib:.1f} |", flush=True)
            rows.append({"world": world, "kind": kind, **r, "ratio": ratio,
                         "traced_ratio": traced_ratio})
    if args.only == "memory":
        return
    kinds = ["DDP", "FULL_SHARD", "FULL_SHARD+forward_prefetch", "SHARD_GRAD_OP"]
    speed_env = {k: v for k, v in env.items() if k not in MEMORY_ENV}
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
