"""The table of ``tb-collectives``: the size loop for one (datatype, reduction op) and the plot."""
from __future__ import annotations

import socket

import numpy as np

import tensorbrain.distributed as dist

from ._cases import ROOTED, Case, bus_factor, time_case

_NO_INPLACE = ("all_to_all", "gather", "scatter", "sendrecv")


def header(out, torch_ok, mpi_ok):
    """The column titles (nccl-tests'), plus the baseline's when one is compared."""
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
    out("#")
    out(head1)
    out(head2)
    out(head3)


def run_sizes(args, sizes, dtype, redop, rank, n, out, records, reduce_time, torch_ok, head):
    """Time every size for one datatype and reduction op; print rows, append JSON records.
    ``head()`` prints the column titles before the first row of the run (once).

    Returns:
        tuple: (#wrong summed over the rows, the busbw figures printed).
    """
    op = args.collective
    mpi_ok = args.compare == "mpi4py"
    root = args.root if op in ROOTED else -1
    redop_name = redop if redop != "none" else "none"
    case_redop = redop if redop != "none" else "sum"
    factor = bus_factor(op, n)
    blocking = bool(args.blocking)
    cputime = bool(args.report_cputime)
    wrong_total, busbws = 0, []
    for size in sizes:
        row, times, tts = {}, {False: [], True: []}, []
        for rnd in range(args.rounds):
            for inplace in (False, True):
                if inplace and op in _NO_INPLACE:
                    row[inplace] = None  # no in-place form
                    continue
                case = Case("tb", op, size, dtype, case_redop, max(root, 0), rank, n, inplace,
                            blocking=blocking)
                times[inplace].append(time_case(case, args.iters, args.warmup_iters,
                                                dist.barrier, reduce_time, args.stat, cputime))
                if rnd == args.rounds - 1:
                    wrong = int(_max(float(case.wrong()))) if args.check else 0
                    row[inplace] = (case, float(np.median(times[inplace])), wrong)
            tt = _baseline(args, op, size, dtype, case_redop, root, rank, n, reduce_time,
                           torch_ok, out)
            if tt is not None:
                tts.append(tt)
        tt = float(np.median(tts)) if tts else None
        base = row[True] or row[False]
        case = base[0]
        line = (f"{case.nbytes:>12} {case.count:>12} {_type_name(case.dtype):>8} "
                f"{redop_name:>6} {root:>5}")
        for inplace in (False, True):
            if row[inplace] is None:
                line += f" {'N/A':>9} {'N/A':>7} {'N/A':>7} {'N/A':>6}"
                continue
            c, t, wrong = row[inplace]
            algbw = c.nbytes / t / 1e9 if t > 0 else float("inf")
            line += f" {t * 1e6:>9.1f} {algbw:>7.3f} {algbw * factor:>7.3f} {wrong:>6}"
            wrong_total += wrong
            busbws.append(algbw * factor)
            records.append({"kind": "result", "op": op, "size": c.nbytes, "count": c.count,
                            "type": _type_name(c.dtype), "redop": redop_name, "root": root,
                            "inplace": inplace, "time_us": t * 1e6, "algbw": algbw,
                            "busbw": algbw * factor, "wrong": wrong, "ranks": n,
                            "backend": args.backend, "lib": "tensorbrain"})
        if (torch_ok or mpi_ok) and tt is not None:
            tbw = case.nbytes / tt / 1e9 * factor
            line += f" | {tt * 1e6:>9.1f} {tbw:>7.3f} {tt / base[1]:>7.2f}"
            records.append({"kind": "result", "op": op, "size": case.nbytes,
                            "count": case.count, "type": _type_name(case.dtype),
                            "redop": redop_name, "root": root, "inplace": True,
                            "time_us": tt * 1e6, "algbw": tbw / factor, "busbw": tbw, "ranks": n,
                            "backend": "gloo" if torch_ok else "mpi",
                            "lib": "torch" if torch_ok else "mpi4py"})
        head()
        out(line)
    return wrong_total, busbws


def _type_name(dtype) -> str:
    """nccl-tests' type column: float, double, half, bfloat16, int8, ..."""
    names = {"float32": "float", "float64": "double", "float16": "half"}
    return names.get(np.dtype(dtype).name, np.dtype(dtype).name)


def _max(x: float) -> float:
    """The largest ``x`` over the ranks (#wrong counts every rank's errors)."""
    import tensorbrain as tb
    t = tb.Tensor._wrap(np.array([x]))
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t._data[0])


def _baseline(args, op, size, dtype, redop, root, rank, n, reduce_time, torch_ok, out):
    """The baseline's in-place time for one size (``--compare``), or None."""
    inplace = op in ("all_reduce", "broadcast", "reduce")
    if args.compare == "mpi4py":
        from mpi4py import MPI
        tcase = Case("mpi4py", op, size, dtype, redop, max(root, 0), rank, n, inplace=inplace)
        return time_case(tcase, args.iters, args.warmup_iters, MPI.COMM_WORLD.Barrier,
                         reduce_time, args.stat, bool(args.report_cputime))
    if torch_ok:
        import torch.distributed as tdist
        try:
            tcase = Case("torch", op, size, dtype, redop, max(root, 0), rank, n, inplace=inplace)
            return time_case(tcase, args.iters, args.warmup_iters, tdist.barrier, reduce_time,
                             args.stat, bool(args.report_cputime))
        except (RuntimeError, TypeError) as exc:  # an op or dtype gloo does not implement
            out(f"# torch gloo: {op} {_type_name(dtype)} failed: {str(exc).splitlines()[0]}")
    return None


def plot(records, path, op, n) -> None:
    """A PNG of busbw against size for each variant (matplotlib)."""
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
               if r.get("kind") == "result" and r["lib"] == lib and r["inplace"] == inplace]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"{op}, {n} ranks, {socket.gethostname()}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"# plot written to {path}")
