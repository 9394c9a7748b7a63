"""The cases of ``tb-collectives``: buffers, one call of each op for tb / torch / mpi4py, the
exact reference (#wrong) and the timing loop. The command line is ``collectives.py``."""
from __future__ import annotations

import os
import platform
import socket
import time

import numpy as np

import tensorbrain as tb
import tensorbrain.distributed as dist

OPS = ["all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all",
       "gather", "scatter", "sendrecv"]
REDOPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
          "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
ROOTED = {"broadcast", "reduce", "gather", "scatter"}
REDUCING = {"all_reduce", "reduce", "reduce_scatter"}


def parse_size(text: str) -> int:
    """A size argument in bytes: ``8``, ``1K``, ``64KB``, ``32M``, ``1.5G`` (powers of 1024)."""
    text = text.strip().upper().rstrip("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(float(text[:-1] if text[-1:] in "KMG" else text) * mult)


def _exact(fn):
    """A reduction in the dtype itself (wrapping integer overflow as the collective does)."""
    def reduce(stack, axis):
        return fn(stack, axis=axis, dtype=stack.dtype)
    return reduce


def bus_factor(op: str, n: int) -> float:
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        return (n - 1) / n
    return 1.0


def hardware_line() -> str:
    """The ``# Hardware:`` header line (CPU, cores, memory, OS, versions, host, load)."""
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

    def __init__(self, lib, op, nbytes, dtype, redop, root, rank, n, inplace, blocking=True):
        self.lib, self.op, self.rank, self.n, self.root = lib, op, rank, n, root
        self.blocking = blocking
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

    def run_blocking(self):
        """One op, waited for (warm-up and the #wrong check in every -z mode)."""
        out = self.run()
        for w in (out if isinstance(out, list) else [out]):
            if w is not None and hasattr(w, "wait"):
                w.wait()

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
        """tb's call; with ``blocking=False`` it returns the op's Work(s) (``-z 0``)."""
        op, W, a = self.op, tb.Tensor._wrap, not self.blocking
        inp, out = W(self.inp), W(self.out)
        red = REDOPS[self.redop]
        if op == "all_reduce":
            if self.inplace:
                return lambda: dist.all_reduce(inp, op=red, async_op=a)
            return lambda: (np.copyto(self.out, self.inp),
                            dist.all_reduce(out, op=red, async_op=a))[1]
        if op == "broadcast":
            if self.inplace:
                return lambda: dist.broadcast(inp, src=self.root, async_op=a)
            return lambda: (np.copyto(self.out, self.inp),
                            dist.broadcast(out, src=self.root, async_op=a))[1]
        if op == "reduce":
            if self.inplace:
                return lambda: dist.reduce(inp, dst=self.root, op=red, async_op=a)
            return lambda: (np.copyto(self.out, self.inp),
                            dist.reduce(out, dst=self.root, op=red, async_op=a))[1]
        if op == "all_gather":
            return lambda: dist.all_gather_into_tensor(out, inp, async_op=a)
        if op == "reduce_scatter":
            return lambda: dist.reduce_scatter_tensor(out, inp, op=red, async_op=a)
        if op == "all_to_all":
            return lambda: dist.all_to_all_single(out, inp, async_op=a)
        if op == "gather":
            outs = [W(o) for o in self.outs]
            return lambda: dist.gather(inp, outs if self.rank == self.root else None,
                                       dst=self.root, async_op=a)
        if op == "scatter":
            ins = [W(o) for o in self.outs]
            return lambda: dist.scatter(out, ins if self.rank == self.root else None,
                                        src=self.root, async_op=a)
        if op == "sendrecv":
            right, left = (self.rank + 1) % self.n, (self.rank - 1) % self.n

            def sr():
                works = dist.batch_isend_irecv([dist.P2POp(dist.isend, inp, right),
                                                dist.P2POp(dist.irecv, out, left)])
                if a:
                    return works
                for w in works:
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
        n, r, m, dt = self.n, self.rank, self.m, self.dtype
        vals = [self._vals(j, self.count) for j in range(n)]
        self.run_blocking()
        def red(stacked):  # the reduction over ranks (axis 0), in dtype dt
            if self.redop == "avg":
                return stacked.astype(np.float64).mean(0).astype(dt)
            fn = {"sum": _exact(np.sum), "prod": _exact(np.prod), "min": np.min,
                  "max": np.max}[self.redop]
            return fn(stacked, axis=0).astype(dt)

        op = self.op
        if op == "all_reduce":
            want, got = red(np.stack(vals)), self.out
        elif op == "broadcast":
            want, got = vals[self.root], self.out
        elif op == "reduce":
            if r != self.root:
                return 0
            want, got = red(np.stack(vals)), self.out
        elif op == "all_gather":
            want = np.concatenate([self._vals(j, m) for j in range(n)])
            got = self.out
        elif op == "reduce_scatter":
            want = red(np.stack([v[r * m:(r + 1) * m] for v in vals]))
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


def time_case(case, iters, warmup, barrier, reduce_time, stat="median", cputime=False) -> float:
    """Seconds per op, combined across ranks by ``reduce_time`` (``-a``).

    Blocking (``-z 1``, the default): the median of the per-call times (``stat="median"``;
    a busy shared machine disturbs it far less) or the mean of ``iters`` back-to-back calls
    (``stat="mean"``, nccl-tests' definition). Non-blocking (``-z 0``): ``iters`` ops are issued
    with ``async_op=True``, then all are waited for: the mean per op (as nccl-tests, which
    synchronises the stream once after the loop). ``cputime`` (``-C 1``): this process's CPU time
    (every thread) instead of the wall clock.
    """
    for _ in range(warmup):
        case.run_blocking()
    barrier()
    clock = time.process_time if cputime else time.perf_counter
    if not case.blocking:
        t0 = clock()
        works = [case.run() for _ in range(iters)]
        for w in works:
            for x in (w if isinstance(w, list) else [w]):
                if x is not None:
                    x.wait()
        return reduce_time((clock() - t0) / iters)
    times = []
    t0 = clock()
    for _ in range(iters):
        t = clock()
        case.run()
        times.append(clock() - t)
    dt = (clock() - t0) / iters if stat == "mean" else float(np.median(times))
    return reduce_time(dt)
