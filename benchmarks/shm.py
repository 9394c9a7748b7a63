"""all_reduce over shared memory against the same op over sockets, MPICH and torch Gloo, one run.

    python benchmarks/shm.py --nproc 2 --rounds 3 --json /tmp/shm2.json --plot docs/img/shm_busbw_2.png

For every round, each implementation runs on all sizes in its own fresh set of ``--nproc`` ranks,
the order of implementations rotating from round to round so that none always runs on a hotter
or quieter machine; a size's figure is the best (lowest time) of its rounds. Implementations:

* ``shm``: ``tb.distributed.all_reduce`` (tcp backend, same-host ranks -> shared memory), in place;
* ``tcp``: the same with ``TB_SHM=0`` (Unix/TCP sockets);
* ``shm-general``: the same with ``TB_FASTPATH=0``: the general process-group path (argument
  checks, ``Work``, the op queue) instead of the one-call fast path (``TCPBackend.fast_all_reduce``);
* ``shm-raw``: ``tensorbrain._C.ShmGroup.all_reduce`` called directly: the transport without the
  process-group layer (Tensor unwrap, Work, sequence numbers);
* ``mpi``: mpi4py ``comm.Allreduce(a, b)`` under ``mpiexec`` (the mpich wheel), out of place (MPI's
  usual form, as osu_allreduce calls it);
* ``gloo``: ``torch.distributed.all_reduce`` with the gloo backend (when torch is installed).

Timing per size: ``-w`` warm-up calls, a barrier, then calls for at least ``--min-time`` seconds
(at least 3); each rank's mean time per call, the slowest rank's reported (nccl-tests' busbw =
algbw x 2(n-1)/n, GB = 1e9 B). float32, op sum. Prints hardware, the table, and busbw ratios
against MPICH.
``--crossover`` instead A/B-tests the shm transport's two all_reduce algorithms at each size in one
group (the measurement behind the thresholds in csrc/shm/shm.cpp).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

from _common import parse_size  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SIZES = [8, 128, 1 << 10, 8 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20,
         256 << 20]
IMPLS = ["shm", "shm-general", "shm-raw", "tcp", "mpi", "gloo"]


def hardware_line() -> str:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) / (1 << 20)
        load = os.getloadavg()[0]
    except (OSError, StopIteration):
        mem, load = float("nan"), float("nan")
    return (f"# Hardware: {cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}, NumPy {np.__version__}, "
            f"load average {load:.1f} at start")


# ***** the workers: one process per rank, one implementation *****
def _time_loop(call, barrier, agree, warmup, min_time) -> float:
    """Mean seconds per call. The iteration count comes from the warm-up's pace and is agreed
    (max over ranks) so that every rank issues the same collectives."""
    t0 = time.perf_counter()
    for _ in range(warmup):
        call()
    per = (time.perf_counter() - t0) / max(warmup, 1)
    iters = agree(max(3, min(100_000, int(min_time / max(per, 1e-7)))))
    barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    return (time.perf_counter() - t0) / iters


def worker(impl: str, sizes, warmup: int, min_time: float, out_path: str) -> None:
    rank, n = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    # the first size is measured twice and its first figure dropped: a fresh group's first calls
    # pay for page faults, lazy imports and ranks still starting up
    sizes = [sizes[0]] + list(sizes)
    results = []
    if impl == "mpi":
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        rank, n = comm.rank, comm.size
        for s in sizes:
            a, b = np.ones(max(1, s // 4), np.float32), np.empty(max(1, s // 4), np.float32)
            t = _time_loop(lambda: comm.Allreduce(a, b), comm.Barrier,
                           lambda k: comm.allreduce(k, op=MPI.MAX), warmup, min_time)
            results.append(comm.allreduce(t, op=MPI.MAX))
    elif impl == "gloo":
        import torch
        import torch.distributed as tdist
        torch.set_num_threads(1)
        tdist.init_process_group("gloo", init_method="env://", rank=rank, world_size=n)
        for s in sizes:
            x = torch.ones(max(1, s // 4), dtype=torch.float32)
            def agree(k):
                kk = torch.tensor([k])
                tdist.all_reduce(kk, op=tdist.ReduceOp.MAX)
                return int(kk[0])
            t = _time_loop(lambda: tdist.all_reduce(x), tdist.barrier, agree, warmup, min_time)
            tt = torch.tensor([t], dtype=torch.float64)
            tdist.all_reduce(tt, op=tdist.ReduceOp.MAX)
            results.append(float(tt[0]))
        tdist.destroy_process_group()
    else:
        import tensorbrain as tb
        import tensorbrain.distributed as dist
        dist.init_process_group("tcp", init_method="env://", rank=rank, world_size=n)

        def agree(k):
            kk = tb.tensor([k], dtype=tb.int64)
            dist.all_reduce(kk, op=dist.ReduceOp.MAX)
            return int(kk.numpy()[0])
        if impl == "shm-raw":
            from tensorbrain.distributed import distributed_c10d as c10d
            g = c10d._world().default.backend._shm.group
            for s in sizes:
                a = np.ones(max(1, s // 4), np.float32)
                t = _time_loop(lambda: g.all_reduce(a, a, "sum"), g.barrier, agree, warmup,
                               min_time)
                tt = np.array([t])
                g.all_reduce(tt, tt, "max")
                results.append(float(tt[0]))
        else:
            for s in sizes:
                x = tb.ones(max(1, s // 4), dtype=tb.float32)
                t = _time_loop(lambda: dist.all_reduce(x), dist.barrier, agree, warmup, min_time)
                tt = tb.tensor([t], dtype=tb.float64)
                dist.all_reduce(tt, op=dist.ReduceOp.MAX)
                results.append(float(tt.numpy()[0]))
        dist.destroy_process_group()
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(results[1:], f)


# ***** the driver *****
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_impl(impl, n, sizes, args, timeout=900):
    """Start ``n`` ranks of ``impl``; returns the per-size times or None if unavailable."""
    fd, out = tempfile.mkstemp(prefix=f"tb-shm-bench-{impl}-", suffix=".json")
    os.close(fd)
    wargs = [os.path.abspath(__file__), "--worker", impl, "--sizes", ",".join(map(str, sizes)),
             "-w", str(args.warmup), "--min-time", str(args.min_time), "--out", out]
    env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()), PYTHONPATH=ROOT, TB_RUN_ID=f"bench{os.getpid()}",
               TB_SHM="0" if impl == "tcp" else "1",
               TB_FASTPATH="0" if impl == "shm-general" else "1")
    try:
        if impl == "mpi":
            mpiexec = shutil.which("mpiexec")
            if mpiexec is None:
                return None
            procs = [subprocess.Popen([mpiexec, "-n", str(n), sys.executable, *wargs], env=env)]
        else:
            if impl == "gloo":
                try:
                    import torch  # noqa: F401
                except ImportError:
                    return None
            procs = [subprocess.Popen([sys.executable, *wargs],
                                      env=dict(env, RANK=str(r), WORLD_SIZE=str(n),
                                               LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(n)))
                     for r in range(n)]
        deadline = time.monotonic() + timeout
        for p in procs:
            p.wait(max(1.0, deadline - time.monotonic()))
        if any(p.returncode for p in procs):
            print(f"# {impl}: a rank failed (exit codes {[p.returncode for p in procs]})")
            return None
        with open(out) as f:
            return json.load(f)
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        print(f"# {impl}: timed out")
        return None
    finally:
        os.unlink(out)


def human(s: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if s >= 1 << k and s % (1 << k) == 0:
            return f"{s >> k} {unit}"
    return f"{s} B"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="bytes, comma separated")
    p.add_argument("--impls", default=",".join(IMPLS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("-w", "--warmup", type=int, default=3)
    p.add_argument("--min-time", type=float, default=0.2, help="seconds timed per size")
    p.add_argument("--json", default=None)
    p.add_argument("--plot", default=None)
    p.add_argument("--crossover", action="store_true")
    p.add_argument("--from-json", default=None, help="only plot: records of earlier --json runs "
                   "(comma separated files), one panel per rank count")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    if a.worker:
        worker(a.worker, sizes, a.warmup, a.min_time, a.out)
        return 0
    if a.crossover:
        return crossover(a.nproc, sizes, a.rounds)
    if a.from_json:
        records = []
        for path in a.from_json.split(","):
            with open(path) as f:
                records += json.load(f)
        markdown(records)
        if a.plot:
            plot(records, a.plot, None)
        return 0
    impls = a.impls.split(",")
    print(hardware_line())
    print(f"# all_reduce float32 sum, {a.nproc} ranks, best of {a.rounds} rounds, "
          f"{a.min_time} s per size; busbw = size/time x 2(n-1)/n")
    best: dict = {}
    for rnd in range(a.rounds):
        order = impls[rnd % len(impls):] + impls[:rnd % len(impls)]
        for impl in order:
            times = run_impl(impl, a.nproc, sizes, a)
            if times is None:
                continue
            prev = best.get(impl, [float("inf")] * len(sizes))
            best[impl] = [min(x, y) for x, y in zip(prev, times)]
    factor = 2 * (a.nproc - 1) / a.nproc
    cols = [i for i in impls if i in best]
    head = f"{'size':>9} |" + "|".join(f" {i + ' us':>10} {i + ' GB/s':>10} " for i in cols)
    if "mpi" in best and "shm" in best:
        head += "| shm/mpi busbw"
    print(head)
    records = []
    for k, s in enumerate(sizes):
        line = f"{human(s):>9} |"
        for i in cols:
            t = best[i][k]
            bw = s / t * factor / 1e9
            records.append({"impl": i, "nproc": a.nproc, "size": s, "time_us": t * 1e6,
                            "busbw": bw})
            line += f" {t * 1e6:10.1f} {bw:10.3f} |"
        if "mpi" in best and "shm" in best:
            line += f" {best['mpi'][k] / best['shm'][k]:6.2f}x"
        print(line)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(records, f, indent=0)
    if a.plot:
        plot(records, a.plot, a.nproc)
    return 0


def markdown(records) -> None:
    """Tables for docs/shm.md: time (us) and busbw (GB/s) per implementation, per rank count."""
    impls = [i for i in IMPLS if any(r["impl"] == i for r in records)]
    for k in sorted({r["nproc"] for r in records}):
        rows = {(r["impl"], r["size"]): r for r in records if r["nproc"] == k}
        sizes = sorted({s for _, s in rows})
        print(f"\n{k} ranks: time in us / busbw in GB/s; last column shm busbw / MPICH busbw\n")
        print("| size | " + " | ".join(impls) + " | shm / MPICH |")
        print("| ---: |" + " ---: |" * (len(impls) + 1))
        for s in sizes:
            cells = []
            for i in impls:
                r = rows.get((i, s))
                cells.append("-" if r is None else
                             f"{r['time_us']:.1f} / {r['busbw']:.3g}" if s >= 1024 else
                             f"{r['time_us']:.1f} / -")
            ratio = (rows[("mpi", s)]["time_us"] / rows[("shm", s)]["time_us"]
                     if ("mpi", s) in rows and ("shm", s) in rows else float("nan"))
            print(f"| {human(s)} | " + " | ".join(cells) + f" | {ratio:.2f}x |")


def plot(records, path, n) -> None:
    """busbw against size, one line per implementation, one panel per rank count."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# --plot needs matplotlib: pip install tensorbrain[plot]")
        return
    counts = sorted({r["nproc"] for r in records}) if n is None else [n]
    fig, axes = plt.subplots(1, len(counts), figsize=(4.2 * len(counts), 3.6), squeeze=False,
                             sharey=True)
    labels = {"shm": "tb shm (tb.distributed)", "shm-general": "tb shm (TB_FASTPATH=0)",
              "shm-raw": "tb shm (transport only)",
              "tcp": "tb tcp (TB_SHM=0)", "mpi": "MPICH (mpi4py)", "gloo": "torch gloo"}
    for ax, k in zip(axes[0], counts):
        for impl in labels:
            pts = [(r["size"], r["busbw"]) for r in records
                   if r["impl"] == impl and r["nproc"] == k and r["busbw"] > 0]
            if pts:
                ax.plot(*zip(*pts), marker="o", markersize=3, label=labels[impl])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes)")
        ax.set_title(f"all_reduce float32, {k} ranks")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("busbw (GB/s)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"one host, {os.cpu_count()} cores", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=140)   # 70 dpi made the legends unreadable in the docs site
    print(f"# plot written to {path}")


# ***** the flat / reduce-scatter crossover *****
def _crossover_rank(rank, n, name, sizes, rounds, q):
    from tensorbrain.distributed import _shm
    deadline = time.monotonic() + 30
    while rank and not os.path.exists("/dev/shm/" + name) and time.monotonic() < deadline:
        time.sleep(0.01)  # rank 0 creates the segment
    g = _shm.open_group(name, rank, n, rank == 0, timeout=60, native=True)
    g.wait_attached()

    def agree(k):
        kk = np.array([k], np.int64)
        g.all_reduce(kk, kk, "max")
        return int(kk[0])
    res = {}
    for s in sizes:
        x = np.ones(max(1, s // 4), np.float32)
        for _ in range(rounds):
            for flat in (0, 1 << 62):  # 0: always rs/ag; huge: always flat
                g.flat_max_bytes = flat
                t = _time_loop(lambda: g.all_reduce(x, x, "sum"), g.barrier, agree, 2, 0.05)
                res.setdefault(f"{s}/{flat}", []).append(t)
    q.put((rank, res))


def crossover(n, sizes, rounds) -> int:
    import multiprocessing as mp
    from tensorbrain.distributed import _shm
    ctx = mp.get_context("fork")
    q, name = ctx.Queue(), _shm.segment_name()
    ps = [ctx.Process(target=_crossover_rank, args=(r, n, name, sizes, rounds, q))
          for r in range(n)]
    for p in ps:
        p.start()
    res = dict(q.get(timeout=600) for _ in range(n))[0]
    for p in ps:
        p.join()
    print(hardware_line())
    print(f"# shm all_reduce, {n} ranks: min of {rounds} interleaved rounds, us per call")
    print(f"{'size':>9} | {'flat':>9} | {'rs/ag':>9} | winner")
    for s in sizes:
        f, r = min(res[f"{s}/{1 << 62}"]) * 1e6, min(res[f"{s}/0"]) * 1e6
        print(f"{human(s):>9} | {f:9.1f} | {r:9.1f} | {'flat' if f < r else 'rs/ag'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
