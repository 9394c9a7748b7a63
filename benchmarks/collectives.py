"""Collective benchmark in the style of nccl-tests, for tb.distributed (and torch Gloo beside it).

Run under the launcher (every rank runs this script)::

    tbrun --standalone --nproc_per_node 2 benchmarks/collectives.py -b 8 -e 256M -f 2 --compare torch

or let it start its own ranks on this machine (``--nproc``, default 2)::

    python benchmarks/collectives.py -b 8 -e 64M --op all_reduce --dtype float32

Columns as nccl-tests (doc/PERFORMANCE.md): size in bytes (the whole buffer: the output of
all_gather, the input of reduce_scatter), count in elements, type, redop, root (-1 when none),
then for out-of-place and in-place the time per op in microseconds (the slowest rank's median
of ``-n`` calls after ``-w`` warm-ups; ``--stat mean`` gives nccl-tests' mean), algbw = size / time (GB = 1e9 B), busbw = algbw x the
op's factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all, gather, scatter
(n-1)/n; broadcast, reduce 1) and #wrong, the elements that differ from the exact reference
after the timed loop. ``--compare torch`` runs ``torch.distributed`` with the gloo backend on the
same sizes in the same run (interleaved size by size, so both see the same machine state) and
adds torch's in-place time and busbw and the ratio torch time / ours (>1: we are faster).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time

import numpy as np

from _common import parse_size  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tensorbrain as tb  # noqa: E402
import tensorbrain.distributed as dist  # noqa: E402

OPS = ["all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all",
       "gather", "scatter", "sendrecv"]
REDOPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
          "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
_ROOTED = {"broadcast", "reduce", "gather", "scatter"}
_REDUCING = {"all_reduce", "reduce", "reduce_scatter"}


def bus_factor(op: str, n: int) -> float:
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        return (n - 1) / n
    return 1.0


def hardware_line() -> str:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) / (1 << 20)
    except OSError:
        mem = float("nan")
    return (f"# Hardware: {cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, "
            f"{platform.system()} {platform.release()}, Python {platform.python_version()}, "
            f"NumPy {np.__version__}, host {socket.gethostname()}, load average "
            f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} (other processes share the cores)")


# ***** one op, for tb and for torch *****
class Case:
    """Buffers and a callable running one op once (out-of-place or in-place)."""

    def __init__(self, lib, op, nbytes, dtype, redop, root, rank, n, inplace):
        self.lib, self.op, self.rank, self.n, self.root = lib, op, rank, n, root
        itemsize = np.dtype(dtype).itemsize
        per = n if op in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter") else 1
        self.count = max(per, nbytes // itemsize // per * per)
        self.m = self.count // per
        self.dtype, self.redop, self.inplace = np.dtype(dtype), redop, inplace
        self.nbytes = self.count * itemsize
        self.fill()
        self.run = self._make()

    def _vals(self, r, count):
        return ((np.arange(count) + r) % 7 + 1).astype(self.dtype)

    def fill(self):
        op, r, n, m = self.op, self.rank, self.n, self.m
        if op == "all_gather":
            self.inp = self._vals(r, m)
            self.out = np.zeros(self.count, self.dtype)
            if self.inplace:
                self.out[r * m:(r + 1) * m] = self.inp
                self.inp = self.out[r * m:(r + 1) * m]
        elif op == "reduce_scatter":
            self.inp = self._vals(r, self.count)
            self.out = self.inp[r * m:(r + 1) * m] if self.inplace else np.zeros(m, self.dtype)
        elif op == "gather":  # size = the gathered total, m elements per rank
            self.inp = self.out = self._vals(r, m)
            self.outs = [np.zeros(m, self.dtype) for _ in range(n)]
        elif op == "scatter":  # the root's list holds every rank's m values
            self.outs = [self._vals(j, m) for j in range(n)]
            self.inp = self.out = np.zeros(m, self.dtype)
        else:
            self.inp = self._vals(r, self.count)
            self.out = self.inp if self.inplace else np.zeros(self.count, self.dtype)

    def _make(self):
        if self.lib == "tb":
            return self._make_tb()
        if self.lib == "mpi4py":
            return self._make_mpi4py()
        return self._make_torch()

    def _make_mpi4py(self):
        """Raw mpi4py buffer calls on COMM_WORLD (--compare mpi4py; in place where ours is)."""
        from mpi4py import MPI
        comm, op, inp, out = MPI.COMM_WORLD, self.op, self.inp, self.out
        red = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}[self.redop]
        if op == "all_reduce":
            return lambda: comm.Allreduce(MPI.IN_PLACE, inp, red)
        if op == "broadcast":
            return lambda: comm.Bcast(inp, self.root)
        if op == "reduce":
            if self.rank == self.root:
                return lambda: comm.Reduce(MPI.IN_PLACE, inp, red, self.root)
            return lambda: comm.Reduce(inp, None, red, self.root)
        if op == "all_gather":
            return lambda: comm.Allgather(inp, out)
        if op == "reduce_scatter":
            return lambda: comm.Reduce_scatter_block(inp, out, red)
        if op == "all_to_all":
            return lambda: comm.Alltoall(inp, out)
        raise ValueError(f"--compare mpi4py does not time {op}")

    def _make_tb(self):
        op, W = self.op, tb.Tensor._wrap
        inp, out = W(self.inp), W(self.out)
        red = REDOPS[self.redop]
        if op == "all_reduce":
            if self.inplace:
                return lambda: dist.all_reduce(inp, op=red)
            return lambda: (np.copyto(self.out, self.inp), dist.all_reduce(out, op=red))
        if op == "broadcast":
            if self.inplace:
                return lambda: dist.broadcast(inp, src=self.root)
            return lambda: (np.copyto(self.out, self.inp), dist.broadcast(out, src=self.root))
        if op == "reduce":
            if self.inplace:
                return lambda: dist.reduce(inp, dst=self.root, op=red)
            return lambda: (np.copyto(self.out, self.inp), dist.reduce(out, dst=self.root, op=red))
        if op == "all_gather":
            return lambda: dist.all_gather_into_tensor(out, inp)
        if op == "reduce_scatter":
            return lambda: dist.reduce_scatter_tensor(out, inp, op=red)
        if op == "all_to_all":
            return lambda: dist.all_to_all_single(out, inp)
        if op == "gather":
            outs = [W(o) for o in self.outs]
            return lambda: dist.gather(inp, outs if self.rank == self.root else None,
                                       dst=self.root)
        if op == "scatter":
            ins = [W(o) for o in self.outs]
            return lambda: dist.scatter(out, ins if self.rank == self.root else None, src=self.root)
        if op == "sendrecv":
            right, left = (self.rank + 1) % self.n, (self.rank - 1) % self.n

            def sr():
                for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, inp, right),
                                                 dist.P2POp(dist.irecv, out, left)]):
                    w.wait()
            return sr
        raise ValueError(op)

    def _make_torch(self):
        import torch
        import torch.distributed as tdist
        op = self.op
        inp, out = torch.from_numpy(self.inp), torch.from_numpy(self.out)
        red = getattr(tdist.ReduceOp, {"sum": "SUM", "prod": "PRODUCT", "min": "MIN",
                                       "max": "MAX", "avg": "AVG"}[self.redop])
        if op == "all_reduce":
            return lambda: tdist.all_reduce(inp, op=red)
        if op == "broadcast":
            return lambda: tdist.broadcast(inp, src=self.root)
        if op == "reduce":
            return lambda: tdist.reduce(inp, dst=self.root, op=red)
        if op == "all_gather":
            return lambda: tdist.all_gather_into_tensor(out, inp)
        if op == "reduce_scatter":
            return lambda: tdist.reduce_scatter_tensor(out, inp, op=red)
        if op == "all_to_all":
            return lambda: tdist.all_to_all_single(out, inp)
        if op == "gather":
            outs = [torch.from_numpy(o) for o in self.outs]
            return lambda: tdist.gather(inp, outs if self.rank == self.root else None,
                                        dst=self.root)
        if op == "scatter":
            ins = [torch.from_numpy(o) for o in self.outs]
            return lambda: tdist.scatter(out, ins if self.rank == self.root else None,
                                         src=self.root)
        if op == "sendrecv":
            right, left = (self.rank + 1) % self.n, (self.rank - 1) % self.n

            def sr():
                for w in tdist.batch_isend_irecv([tdist.P2POp(tdist.isend, inp, right),
                                                  tdist.P2POp(tdist.irecv, out, left)]):
                    w.wait()
            return sr
        raise ValueError(op)

    def wrong(self) -> int:
        """Elements that differ from the exact reference after one fresh op."""
        self.fill()
        self.run = self._make()
        self.run()
        n, r, m, dt = self.n, self.rank, self.m, self.dtype
        vals = [self._vals(j, self.count) for j in range(n)]
        red = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}.get(self.redop)
        op = self.op
        if op == "all_reduce":
            want = (red(np.stack(vals), axis=0).astype(dt) if self.redop != "avg"
                    else (np.stack(vals).astype(np.float64).mean(0)).astype(dt))
            got = self.out
        elif op == "broadcast":
            want, got = vals[self.root], self.out
        elif op == "reduce":
            if r != self.root:
                return 0
            want, got = red(np.stack(vals), axis=0).astype(dt), self.out
        elif op == "all_gather":
            want = np.concatenate([self._vals(j, m) for j in range(n)])
            got = self.out
        elif op == "reduce_scatter":
            want = red(np.stack([v[r * m:(r + 1) * m] for v in vals]), axis=0).astype(dt)
            got = self.out
        elif op == "all_to_all":
            want = np.concatenate([vals[j][r * m:(r + 1) * m] for j in range(n)])
            got = self.out
        elif op == "gather":
            if r != self.root:
                return 0
            want = np.concatenate([self._vals(j, m) for j in range(n)])
            got = np.concatenate(self.outs)
        elif op == "scatter":
            want, got = self._vals(r, m), self.out
        else:
            want, got = vals[(r - 1) % n], self.out
        return int(np.count_nonzero(got.reshape(-1) != want.reshape(-1)))


def time_case(case, iters, warmup, barrier, reduce_max, stat="median") -> float:
    """Seconds per op on the slowest rank: the mean over ``iters`` back-to-back calls
    (nccl-tests' definition, ``stat="mean"``) or the median of the per-call times, which a
    busy shared machine (other processes taking the cores for milliseconds) disturbs far less."""
    for _ in range(warmup):
        case.run()
    barrier()
    clock = time.perf_counter
    times = []
    t0 = clock()
    for _ in range(iters):
        t = clock()
        case.run()
        times.append(clock() - t)
    dt = (clock() - t0) / iters if stat == "mean" else float(np.median(times))
    return reduce_max(dt)


# ***** driver *****
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-b", "--minbytes", default="8")
    p.add_argument("-e", "--maxbytes", default="32M")
    p.add_argument("-f", "--stepfactor", type=float, default=2)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup_iters", type=int, default=5)
    p.add_argument("--op", default="all_reduce", choices=OPS)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--redop", default="sum", choices=list(REDOPS))
    p.add_argument("--root", type=int, default=0)
    p.add_argument("--backend", default="tcp")
    p.add_argument("--compare", choices=["torch", "mpi4py"], default=None,
                   help="torch: torch.distributed gloo; mpi4py: raw mpi4py calls (--backend mpi)")
    p.add_argument("--json", default=None, help="write one JSON object per line to this file")
    p.add_argument("--plot", default=None, help="PNG of busbw against size (needs matplotlib)")
    p.add_argument("--nproc", type=int, default=2, help="ranks to start when not under tbrun")
    p.add_argument("-c", "--check", type=int, default=1, help="count #wrong (0: skip)")
    p.add_argument("--rounds", type=int, default=1,
                   help="alternate ours and the baseline this many times per size; report the "
                        "median of the rounds")
    p.add_argument("--stat", choices=["median", "mean"], default="median",
                   help="time per op: median of the per-call times (default) or the mean of "
                        "back-to-back calls (nccl-tests)")
    args = p.parse_args(argv)

    if args.backend == "mpi":  # rank and size come from mpiexec (docs/mpi.md)
        from tensorbrain.distributed._env import current
        if current().source == "single":
            return spawn_mpi(args.nproc, sys.argv[1:] if argv is None else argv)
    elif "RANK" not in os.environ:
        return spawn(args.nproc, sys.argv[1:] if argv is None else argv)
    dist.init_process_group(args.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    torch_ok = False
    if args.compare == "torch":
        try:
            import torch
            import torch.distributed as tdist
            torch.set_num_threads(1)
            tdist.init_process_group("gloo", init_method=_torch_url(), rank=rank, world_size=n)
            torch_ok = True
        except ImportError:
            if rank == 0:
                print("# --compare torch: torch is not installed; comparing nothing")

    mpi_ok = args.compare == "mpi4py"
    if mpi_ok and args.backend != "mpi":
        raise SystemExit("--compare mpi4py compares the mpi backend: add --backend mpi")

    def reduce_max(x):
        t = tb.Tensor._wrap(np.array([x]))
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t._data[0])

    lo, hi = parse_size(args.minbytes), parse_size(args.maxbytes)
    sizes = []
    s = lo
    while s <= hi:
        sizes.append(s)
        s = int(s * args.stepfactor) if args.stepfactor > 1 else s + 1
    out = print if rank == 0 else (lambda *a, **k: None)
    be = dist.distributed_c10d._default("bench").backend
    transports = sorted({c.transport for c in getattr(be, "conns", []) if c is not None})
    if getattr(be, "_shm", None) is not None:
        transports.append("shm for same-host ranks")
    out(f"# nThread 1 nGpus 0 minBytes {lo} maxBytes {hi} step: {args.stepfactor:g}(factor) "
        f"warmup iters: {args.warmup_iters} iters: {args.iters} validation: {args.check} "
        f"time: {args.stat} per call, slowest rank")
    out(hardware_line())
    out(f"# tb.distributed backend {args.backend} ({'/'.join(transports) or 'local'}), {n} ranks, "
        f"op {args.op}" + (f"; baseline: torch {__import__('torch').__version__} gloo"
                           if torch_ok else ""))
    out("#")
    head1 = (f"#{'':>60}{'out-of-place':>34}{'in-place':>32}")
    head2 = (f"#{'size':>11} {'count':>12} {'type':>8} {'redop':>6} {'root':>5} "
             f"{'time':>9} {'algbw':>7} {'busbw':>7} {'#wrong':>6} "
             f"{'time':>9} {'algbw':>7} {'busbw':>7} {'#wrong':>6}")
    head3 = (f"#{'(B)':>11} {'(elements)':>12} {'':>8} {'':>6} {'':>5} "
             f"{'(us)':>9} {'(GB/s)':>7} {'(GB/s)':>7} {'':>6} {'(us)':>9} {'(GB/s)':>7} "
             f"{'(GB/s)':>7} {'':>6}")
    if torch_ok or mpi_ok:
        head2 += f" | {'gloo(us)' if torch_ok else 'mpi4py':>9} {'busbw':>7} {'speedup':>7}"
        head3 += f" | {'in-place':>9} {'(GB/s)':>7} {'x':>7}"
    out(head1)
    out(head2)
    out(head3)
    root = args.root if args.op in _ROOTED else -1
    redop = args.redop if args.op in _REDUCING else "none"
    factor = bus_factor(args.op, n)
    records, wrong_total, busbws = [], 0, []
    for size in sizes:
        # --rounds R alternates ours and the baseline R times and keeps the median of each, so
        # both see the same bursts of load from other processes on a shared machine.
        row, times, tts = {}, {False: [], True: []}, []
        for rnd in range(args.rounds):
            for inplace in (False, True):
                if inplace and args.op in ("all_to_all", "gather", "scatter", "sendrecv"):
                    row[inplace] = None  # no in-place form
                    continue
                case = Case("tb", args.op, size, args.dtype, args.redop, max(root, 0), rank, n,
                            inplace)
                times[inplace].append(time_case(case, args.iters, args.warmup_iters,
                                                dist.barrier, reduce_max, args.stat))
                if rnd == args.rounds - 1:
                    wrong = int(reduce_max(float(case.wrong()))) if args.check else 0
                    row[inplace] = (case, float(np.median(times[inplace])), wrong)
            tt = None
            if mpi_ok:
                from mpi4py import MPI
                tcase = Case("mpi4py", args.op, size, args.dtype, args.redop, max(root, 0), rank,
                             n, inplace=args.op in ("all_reduce", "broadcast", "reduce"))
                tt = time_case(tcase, args.iters, args.warmup_iters, MPI.COMM_WORLD.Barrier,
                               reduce_max, args.stat)
            if torch_ok:
                import torch.distributed as tdist
                tcase = Case("torch", args.op, size, args.dtype, args.redop, max(root, 0), rank,
                             n, inplace=args.op in ("all_reduce", "broadcast", "reduce"))
                try:
                    tt = time_case(tcase, args.iters, args.warmup_iters, tdist.barrier,
                                   reduce_max, args.stat)
                except RuntimeError as exc:  # e.g. an op gloo does not implement
                    tt = None
                    out(f"# torch gloo: {args.op} failed: {str(exc).splitlines()[0]}")
            if tt is not None:
                tts.append(tt)
        tt = float(np.median(tts)) if tts else None
        base = row[True] or row[False]
        case = base[0]
        line = (f"{case.nbytes:>12} {case.count:>12} {case.dtype.name:>8} {redop:>6} "
                f"{root:>5}")
        for inplace in (False, True):
            if row[inplace] is None:
                line += f" {'N/A':>9} {'N/A':>7} {'N/A':>7} {'N/A':>6}"
                continue
            c, t, wrong = row[inplace]
            algbw = c.nbytes / t / 1e9
            line += f" {t * 1e6:>9.1f} {algbw:>7.3f} {algbw * factor:>7.3f} {wrong:>6}"
            wrong_total += wrong
            busbws.append(algbw * factor)
            records.append({"op": args.op, "size": c.nbytes, "count": c.count,
                            "type": c.dtype.name, "redop": redop, "root": root,
                            "inplace": inplace, "time_us": t * 1e6, "algbw": algbw,
                            "busbw": algbw * factor, "wrong": wrong, "ranks": n,
                            "backend": args.backend, "lib": "tensorbrain"})
        if (torch_ok or mpi_ok) and tt is not None:
            tbw = case.nbytes / tt / 1e9 * factor
            line += f" | {tt * 1e6:>9.1f} {tbw:>7.3f} {tt / base[1]:>7.2f}"
            records.append({"op": args.op, "size": case.nbytes, "count": case.count,
                            "type": case.dtype.name, "redop": redop, "root": root,
                            "inplace": True, "time_us": tt * 1e6, "algbw": tbw / factor,
                            "busbw": tbw, "ranks": n, "backend": "gloo" if torch_ok else "mpi",
                            "lib": "torch" if torch_ok else "mpi4py"})
        out(line)
        sys.stdout.flush()
    out(f"# Out of bounds values : {wrong_total} {'OK' if wrong_total == 0 else 'FAILED'}")
    out(f"# Avg bus bandwidth    : {np.mean(busbws) if busbws else 0:.4f}")
    out("#")
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            for rec in records:
                f.write(json.dumps(rec) + "\n")
    if rank == 0 and args.plot:
        plot(records, args.plot, args.op, n)
    if torch_ok:
        import torch.distributed as tdist
        tdist.destroy_process_group()
    dist.destroy_process_group()
    return 1 if wrong_total else 0


def _torch_url() -> str:
    return f"tcp://{os.environ['MASTER_ADDR']}:{int(os.environ['TB_BENCH_TORCH_PORT'])}" \
        if "TB_BENCH_TORCH_PORT" in os.environ else \
        f"tcp://{os.environ['MASTER_ADDR']}:{int(os.environ['MASTER_PORT']) + 1}"


def plot(records, path, op, n) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# --plot needs matplotlib: pip install tensorbrain[plot]")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for lib, inplace, label in (("tensorbrain", True, "tb.distributed (in-place)"),
                                ("tensorbrain", False, "tb.distributed (out-of-place)"),
                                ("torch", True, "torch gloo")):
        pts = [(r["size"], r["busbw"]) for r in records
               if r["lib"] == lib and r["inplace"] == inplace]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"{op}, {n} ranks, {socket.gethostname()}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"# plot written to {path}")


def spawn_mpi(nproc: int, argv) -> int:
    """--backend mpi outside mpiexec: rerun this script as ``mpiexec -n nproc``."""
    import shutil
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpiexec = mpiexec if os.path.exists(mpiexec) else shutil.which("mpiexec")
    if mpiexec is None:
        print("# --backend mpi needs mpiexec: pip install tensorbrain[mpi]")
        return 2
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.call([mpiexec, "-n", str(nproc), sys.executable, os.path.abspath(__file__),
                            *argv], env=env)


def spawn(nproc: int, argv) -> int:
    """Start ``nproc`` ranks of this script on this machine (when not launched by tbrun)."""
    def free():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    port, tport = free(), free()
    procs = []
    for r in range(nproc):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(nproc), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TB_BENCH_TORCH_PORT=str(tport), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), *argv], env=env))
    try:
        codes = [p.wait() for p in procs]
    except KeyboardInterrupt:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait()
        return 130
    return max(abs(c) for c in codes)


if __name__ == "__main__":
    sys.exit(main())
