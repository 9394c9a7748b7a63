"""``tb-collectives``: the collective benchmark in the style of nccl-tests, for tb.distributed.

Run under the launcher (every rank runs it; the table comes from rank 0 without tbrun's
``[rank N]`` prefix)::

    tbrun --standalone --nproc_per_node 2 -m tensorbrain.benchmarks.collectives all_reduce -b 8 -e 256M -f 2

or let it start its own ranks on this machine (``--nproc``, default 2)::

    tb-collectives all_reduce -b 8 -e 64M -d float -o sum
    python -m tensorbrain.benchmarks.collectives --collective all_gather -d all

nccl-tests' flags keep nccl-tests' meaning: ``-b -e -f -i`` sizes, ``-n -w`` iterations, ``-d``
datatype (``float`` is float32), ``-o`` reduction op, ``-r`` root, ``-c`` check, ``-a`` how
ranks' times are combined, ``-z`` blocking, ``-C`` CPU time, ``-g`` GPUs per process (1 only).
Columns as nccl-tests (doc/PERFORMANCE.md): size in bytes (the whole buffer: the output of
all_gather, the input of reduce_scatter), count, type, redop, root (-1 when none), then for
out-of-place and in-place: time per op (us), algbw = size / time (GB = 1e9 B), busbw = algbw x
the op's factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all, gather, scatter
(n-1)/n; broadcast, reduce 1) and #wrong (elements that differ from the exact reference).
``-J file.json`` writes nccl-tests' own JSON layout (version 3: ``config``, ``results`` with
``out_of_place``/``in_place`` objects, ``out_of_bounds``, ``average_bus_bandwidth``), so tools
written for nccl-tests read it; ``--json`` writes our JSON lines (one record per row).
nccl-tests flags for what tb-collectives does not do (``-t -m -N -G -S -I -p -y -T -R -x -D -V
-M -u -K``) are accepted at nccl-tests' default value and a usage error naming them otherwise.
``--compare torch`` times torch.distributed's gloo on the same sizes in the same run;
``--check-cost`` adds what the always-on collective check costs an all_reduce (8 B, 4 MiB).

Usage errors (a bad size, flag or value, sizes that select nothing, ``--plot`` without
matplotlib) exit 2 before anything runs, printed once (by rank 0 under a launcher); a run in
which nothing was supported exits 2 too; #wrong > 0 exits 1.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time

import numpy as np

import tensorbrain as tb
import tensorbrain.distributed as dist

from ._cases import (OPS, REDOPS, REDUCING, ROOTED, Case, bus_factor, hardware_line,  # noqa: F401
                     parse_size, time_case)  # noqa: F401  (re-exported for old importers)

#: nccl-tests' -d names -> NumPy dtypes (``float`` is float32, ``double`` float64, as there)
DATATYPES = {"int8": "int8", "uint8": "uint8", "int32": "int32", "uint32": "uint32",
             "int64": "int64", "uint64": "uint64", "half": "float16", "float": "float32",
             "double": "float64", "bfloat16": "bfloat16"}
#: NumPy spellings accepted too (older commands used them)
_ALIASES = {"float16": "half", "float32": "float", "float64": "double", "char": "int8",
            "int": "int32", "bf16": "bfloat16"}
AVERAGE = {0: "rank 0", 1: "average", 2: "minimum", 3: "maximum"}


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a ``-d`` name; bfloat16 comes from ml_dtypes."""
    np_name = DATATYPES[name]
    if np_name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise SystemExit("tb-collectives: -d bfloat16 needs the ml_dtypes package "
                             "(pip install ml_dtypes); NumPy has no bfloat16") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(np_name)


def _datatypes(text: str) -> list:
    names: list = []
    for part in text.split(","):
        part = part.strip().lower()
        if part == "all":
            names.extend(DATATYPES)
            continue
        part = _ALIASES.get(part, part)
        if part not in DATATYPES:
            raise argparse.ArgumentTypeError(
                f"unknown datatype {part!r}; nccl-tests' names: {', '.join(DATATYPES)}, all "
                f"(float is float32)")
        names.append(part)
    return names


def _redops(text: str) -> list:
    text = text.strip().lower()
    if text == "all":
        return list(REDOPS)
    if text in OPS:  # the old meaning of --op (the collective): kept so old commands work
        return ["collective:" + text]
    if text not in REDOPS:
        raise argparse.ArgumentTypeError(f"unknown reduction op {text!r}; nccl-tests' names: "
                                         f"{', '.join(REDOPS)}, all")
    return [text]


#: nccl-tests flags for what tb-collectives does not do: (short, long, nccl-tests' default, why)
UNSUPPORTED = [
    ("-t", "--nthreads", "1", "one thread per process: start more ranks (--nproc, tbrun)"),
    ("-m", "--agg_iters", "1", "each timed call is one operation"),
    ("-N", "--run_cycles", "1", "one cycle; use --rounds to repeat and take the median"),
    ("-p", "--parallel_init", "0", "one process group per process"),
    ("-y", "--stream_null", "0", "no CUDA streams are chosen here"),
    ("-T", "--timeout", "0", "the process group's timeout applies"),
    ("-G", "--cudagraph", "0", "no CUDA graphs"),
    ("-S", "--report_timestamps", "0", "no timestamp column"),
    ("-R", "--local_register", "0", "no buffer registration"),
    ("-x", "--cta_policy", "-1", "no NCCL CTA policy"),
    ("-D", "--device_implementation", "0", "no device implementations"),
    ("-V", "--device_cta_count", "16", "no device implementations"),
    ("-M", "--memory", "0", "no memory report"),
    ("-u", "--unalign", "0", "buffers are aligned"),
    ("-I", "--per_iter_timing", "0", "no per-iteration report"),
    ("-K", "--per_iter_skip", "0", "no per-iteration report"),
]


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 2 as argparse's do, printed by one rank only under a launcher.

    Every rank parses the same command line, so rank 0 says it. The other ranks wait up to
    ``PEER_USAGE_WAIT_S`` first: rank 0 exits meanwhile and the launcher stops them (tbrun and
    torchrun both stop the other workers when one fails). Exiting at once raced rank 0: the
    launcher could stop rank 0 before it printed, leaving only "rank 1 exited with code 2".
    A rank still alive after the wait says it too, so the message is never lost.
    """

    PEER_USAGE_WAIT_S = 10.0

    def error(self, message):
        if os.environ.get("RANK", "0") != "0":
            time.sleep(self.PEER_USAGE_WAIT_S)
        super().error(message)


def parser() -> argparse.ArgumentParser:
    """The command line (nccl-tests' flags; see the module docstring)."""
    p = _Parser(prog="tb-collectives", description=__doc__.split("\n")[0],
                usage="%(prog)s [COLLECTIVE] [-b MINBYTES] [-e MAXBYTES] [-f FACTOR | -i STEP] "
                      "[-n ITERS] [-w WARMUP] [-d TYPES] [-o OPS] [-r ROOT] [-a 0-3] [-z 0|1] "
                      "[-C 0|1] [-c 0|1] [-J FILE.json] [options] (all: --help)")
    p.add_argument("collective_pos", nargs="?", choices=OPS, metavar="COLLECTIVE",
                   help=f"the collective: {', '.join(OPS)} (default all_reduce)")
    p.add_argument("--collective", choices=OPS, default=None, help="the collective, as a flag")
    p.add_argument("-b", "--minbytes", default="8")
    p.add_argument("-e", "--maxbytes", default="32M")
    p.add_argument("-f", "--stepfactor", type=float, default=None,
                   help="multiply the size by this each step (default 2 unless -i is given)")
    p.add_argument("-i", "--stepbytes", default=None,
                   help="add this many bytes each step instead of multiplying (nccl-tests' -i)")
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup_iters", type=int, default=5)
    p.add_argument("-d", "--datatype", "--dtype", dest="datatypes", type=_datatypes,
                   default=["float"], help="int8 uint8 int32 uint32 int64 uint64 half float "
                   "double bfloat16, comma-separated, or all (float = float32)")
    p.add_argument("-o", "--op", dest="redops", type=_redops, default=["sum"],
                   help="reduction op: sum prod min max avg, or all")
    p.add_argument("--redop", dest="redop_alias", type=_redops, default=None,
                   help="the old spelling of -o (older commands used --op for the collective)")
    p.add_argument("-r", "--root", type=int, default=0)
    p.add_argument("-g", "--ngpus", type=int, default=1,
                   help="GPUs per process: only 1 (start one process per GPU with tbrun)")
    p.add_argument("-a", "--average", type=int, choices=sorted(AVERAGE), default=3,
                   help="combine ranks' times: 0 rank 0, 1 average, 2 min, 3 max (default 3, "
                        "the slowest rank; nccl-tests' default is 1)")
    p.add_argument("-z", "--blocking", type=int, choices=[0, 1], default=1,
                   help="1: every call waits (default); 0: issue -n ops async, then wait")
    p.add_argument("-C", "--report_cputime", type=int, choices=[0, 1], default=0,
                   help="1: report this process's CPU time per op instead of wall time")
    p.add_argument("-c", "--check", type=int, default=1, help="count #wrong (0: skip)")
    p.add_argument("--backend", default="tcp")
    p.add_argument("--compare", choices=["torch", "mpi4py"], default=None,
                   help="torch: torch.distributed gloo; mpi4py: raw mpi4py calls (--backend mpi)")
    p.add_argument("--json", default=None, help="JSON lines: the run's metadata, then one "
                   "object per (size, variant)")
    p.add_argument("-J", "--output_file", default=None, help="nccl-tests' JSON file (the path "
                   "must end in .json; an existing file is kept and .0, .1, ... are tried)")
    for short, long, default, why in UNSUPPORTED:
        p.add_argument(short, long, dest="unsupported_" + long[2:], default=None,
                       help=f"nccl-tests' flag, accepted only as {default} ({why})")
    p.add_argument("--plot", default=None, help="PNG of busbw against size (needs matplotlib)")
    p.add_argument("--check-cost", action="store_true",
                   help="also time all_reduce at 8 B and 4 MiB with and without the always-on "
                        "collective check (the fingerprint) and print what it costs")
    p.add_argument("--nproc", type=int, default=2, help="ranks to start when not under tbrun")
    p.add_argument("--rounds", type=int, default=1,
                   help="alternate ours and the baseline this many times per size; report the "
                        "median of the rounds")
    p.add_argument("--stat", choices=["median", "mean"], default="median",
                   help="blocking time per op: median of the per-call times (default) or the "
                        "mean of back-to-back calls (nccl-tests)")
    return p


def parse_args(argv):
    """Parsed and cross-checked arguments (a mistake exits with a usage error)."""
    p = parser()
    args = p.parse_args(argv)
    collective = [r[len("collective:"):] for r in args.redops if r.startswith("collective:")]
    args.redops = [r for r in args.redops if not r.startswith("collective:")] or ["sum"]
    if args.redop_alias is not None:
        args.redops = [r for r in args.redop_alias if not r.startswith("collective:")] or ["sum"]
    chosen = {c for c in (args.collective_pos, args.collective, *collective) if c}
    if len(chosen) > 1:
        p.error(f"two collectives given: {sorted(chosen)}; give one (subcommand or --collective)")
    args.collective = chosen.pop() if chosen else "all_reduce"
    if args.ngpus != 1:
        p.error(f"-g {args.ngpus}: tb-collectives drives one device per process (-g 1); start "
                f"one process per GPU instead (tbrun --nproc_per_node N)")
    if args.stepbytes is not None and args.stepfactor is not None:
        p.error("give -f (step factor) or -i (step bytes), not both")
    if args.stepfactor is not None and args.stepfactor <= 1 and args.stepbytes is None:
        p.error(f"-f {args.stepfactor:g}: the factor must be > 1 (or use -i for fixed steps)")
    if args.iters < 1 or args.warmup_iters < 0:
        p.error("-n must be >= 1 and -w >= 0")
    for short, long, default, why in UNSUPPORTED:
        value = getattr(args, "unsupported_" + long[2:])
        if value is not None and value.strip() != default:
            p.error(f"{short}/{long} {value}: an nccl-tests flag tb-collectives does not support "
                    f"({why}); only {short} {default} is accepted")
    for flag, text in (("-b", args.minbytes), ("-e", args.maxbytes), ("-i", args.stepbytes)):
        if text is None:
            continue
        try:
            if parse_size(text) < 0:
                raise ValueError
        except (ValueError, IndexError):
            p.error(f"{flag} {text}: not a size; use bytes with an optional K, M or G suffix "
                    f"(powers of 1024), e.g. 8, 64K, 32M, 1.5G")
    if args.stepbytes is not None and parse_size(args.stepbytes) <= 0:
        p.error(f"-i {args.stepbytes}: the step must be at least 1 byte")
    if parse_size(args.minbytes) > parse_size(args.maxbytes):
        p.error(f"-b {args.minbytes} is larger than -e {args.maxbytes}: no size to run")
    if args.output_file is not None and not args.output_file.lower().endswith(".json"):
        p.error(f"-J {args.output_file}: nccl-tests infers the format from the suffix and "
                f"writes only .json; name the file *.json")
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            p.error("--plot needs matplotlib: pip install matplotlib (or tensorbrain[plot])")
    return args


def sizes_of(args) -> list:
    """The sizes in bytes, nccl-tests' rule: ``-b`` to ``-e`` by ``-f`` x or ``-i`` +."""
    lo, hi = parse_size(args.minbytes), parse_size(args.maxbytes)
    out, s = [], lo
    step = parse_size(args.stepbytes) if args.stepbytes is not None else None
    factor = args.stepfactor or 2.0
    while s <= hi:
        out.append(s)
        s = s + step if step is not None else max(int(s * factor), s + 1)
    return out


def metadata(args, argv, n, transports) -> dict:
    """What a JSON reader needs to know about the run."""
    meta = {"kind": "metadata", "tool": "tb-collectives", "argv": list(argv),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname(), "platform": platform.platform(),
            "python": platform.python_version(), "numpy": np.__version__,
            "tensorbrain": tb.__version__, "backend": args.backend, "transports": transports,
            "world_size": n, "collective": args.collective, "datatypes": args.datatypes,
            "redops": args.redops, "iters": args.iters, "warmup_iters": args.warmup_iters,
            "average": AVERAGE[args.average], "blocking": bool(args.blocking),
            "time": "cpu" if args.report_cputime else "wall",
            "stat": args.stat if args.blocking else "mean",
            "cpu_count": os.cpu_count(), "load_average": list(os.getloadavg())}
    if args.compare == "torch":
        try:
            import torch
            meta["torch"] = torch.__version__
        except ImportError:
            pass
    return meta


def _printer(rank):
    """Rank 0 prints; under tbrun each line carries the escape that drops the [rank 0] prefix."""
    if rank != 0:
        return lambda *a, **k: None
    from .. import _config
    raw = _config.get("TB_RAW_ESCAPE")

    def out(text=""):
        for line in str(text).split("\n"):
            sys.stdout.write(("\x1e" if raw else "") + line + "\n")
        sys.stdout.flush()
    return out


def _combine(mode, n):
    """``-a``: how a per-rank time becomes the reported one."""
    def reduce_time(x):
        t = tb.Tensor._wrap(np.array([x]))
        if mode == 0:
            dist.broadcast(t, src=0)
        elif mode == 1:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
            t._data /= n
        else:
            dist.all_reduce(t, op=dist.ReduceOp.MIN if mode == 2 else dist.ReduceOp.MAX)
        return float(t._data[0])
    return reduce_time


def main(argv=None) -> int:
    """Run the benchmark (starting ``--nproc`` ranks when not launched); returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    for name in args.datatypes:
        numpy_dtype(name)  # ml_dtypes missing for bfloat16: say so before starting ranks
    if args.backend == "mpi":  # rank and size come from mpiexec (docs/mpi.md)
        from tensorbrain.distributed._env import current
        if current().source == "single":
            return spawn_mpi(args.nproc, argv)
    elif "RANK" not in os.environ:
        return spawn(args.nproc, argv)
    dist.init_process_group(args.backend)
    try:
        return _run(args, argv)
    finally:
        dist.destroy_process_group()


def _run(args, argv) -> int:
    from ._report import header, run_sizes
    rank, n = dist.get_rank(), dist.get_world_size()
    out = _printer(rank)
    torch_ok = False
    if args.compare == "torch":
        try:
            import torch
            import torch.distributed as tdist
            torch.set_num_threads(1)
            tdist.init_process_group("gloo", init_method=_torch_url(), rank=rank, world_size=n)
            torch_ok = True
        except ImportError:
            out("# --compare torch: torch is not installed; comparing nothing")
    if args.compare == "mpi4py" and args.backend != "mpi":
        raise SystemExit("--compare mpi4py compares the mpi backend: add --backend mpi")
    sizes = sizes_of(args)
    be = dist.distributed_c10d._default("bench").backend
    transports = sorted({c.transport for c in getattr(be, "conns", []) if c is not None})
    if getattr(be, "_shm", None) is not None:
        transports.append("shm for same-host ranks")
    step = (f"{parse_size(args.stepbytes)}(bytes)" if args.stepbytes is not None
            else f"{args.stepfactor or 2:g}(factor)")
    # minBytes/maxBytes as given (-b/-e), as nccl-tests prints them; the rows show the sizes run
    out(f"# nThread 1 nGpus 1 minBytes {parse_size(args.minbytes)} "
        f"maxBytes {parse_size(args.maxbytes)} step: {step} "
        f"warmup iters: {args.warmup_iters} iters: {args.iters} validation: {args.check} "
        f"blocking: {args.blocking} time: {'cpu' if args.report_cputime else 'wall'}, "
        f"{args.stat if args.blocking else 'mean'} per call, {AVERAGE[args.average]} of ranks")
    out(hardware_line())
    out(f"# tb.distributed backend {args.backend} ({'/'.join(transports) or 'local'}), {n} ranks, "
        f"op {args.collective}" + (f"; baseline: torch {__import__('torch').__version__} gloo"
                                   if torch_ok else ""))
    records = [metadata(args, argv, n, transports)]
    wrong_total, busbws, ran, skipped = 0, [], 0, []
    redops = args.redops if args.collective in REDUCING else ["none"]
    shown: list = []

    def head():  # the column titles once, before the first row (none for skipped pairs)
        if not shown:
            shown.append(header(out, torch_ok, args.compare == "mpi4py"))
    for dname in args.datatypes:
        dtype = numpy_dtype(dname)
        for redop in redops:
            try:
                w, bws = run_sizes(args, sizes, dtype, redop, rank, n, out, records,
                                   _combine(args.average, n), torch_ok, head)
            except TypeError as exc:
                # the backend refuses the dtype/op before any rank sends a byte (its own
                # check, the same on every rank): listed once at the end, the run goes on
                skipped.append(f"# {dname} {redop}: not supported by the {args.backend} "
                               f"backend: {exc}")
                records.append({"kind": "skipped", "type": dname, "redop": redop,
                                "reason": str(exc)})
                continue
            ran += 1
            wrong_total += w
            busbws += bws
    if args.check_cost:
        from ._check_cost import report
        records += report(out)
    if skipped:
        out("#")
        out(f"# skipped {len(skipped)} datatype/op pair(s):")
        for line in skipped:
            out(line)
    avg_busbw = float(np.mean(busbws)) if busbws else 0.0
    out(f"# Out of bounds values : {wrong_total} {'OK' if wrong_total == 0 else 'FAILED'}")
    out(f"# Avg bus bandwidth    : {avg_busbw:.4f}")
    out("#")
    if args.output_file:
        from ._nccl_json import write
        devices = [None] * n
        dist.all_gather_object(devices, [rank, os.getpid(), socket.gethostname()])
        if rank == 0:
            out(f"# Writing JSON output to {write(args, argv, records, devices, avg_busbw)}")
    if rank == 0 and args.json:
        tmp = f"{args.json}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            for rec in records:
                f.write(json.dumps(rec) + "\n")
        os.replace(tmp, args.json)
    if rank == 0 and args.plot:
        from ._report import plot
        plot(records[1:], args.plot, args.collective, n)
    if torch_ok:
        import torch.distributed as tdist
        tdist.destroy_process_group()
    if not ran:
        out("# nothing ran: every datatype/op asked for is unsupported by this backend")
        return 2
    return 1 if wrong_total else 0


def _torch_url() -> str:
    return f"tcp://{os.environ['MASTER_ADDR']}:{int(os.environ['TB_BENCH_TORCH_PORT'])}" \
        if "TB_BENCH_TORCH_PORT" in os.environ else \
        f"tcp://{os.environ['MASTER_ADDR']}:{int(os.environ['MASTER_PORT']) + 1}"


def _command():
    return [sys.executable, "-m", "tensorbrain.benchmarks.collectives"]


def _env_with_package(env):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def spawn_mpi(nproc: int, argv) -> int:
    """--backend mpi outside mpiexec: rerun as ``mpiexec -n nproc``."""
    import shutil
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpiexec = beside if os.path.exists(beside) else shutil.which("mpiexec")
    if mpiexec is None:
        print("# --backend mpi needs mpiexec: pip install tensorbrain[mpi]")
        return 2
    env = _env_with_package(dict(os.environ, OMP_NUM_THREADS="1"))
    return subprocess.call([mpiexec, "-n", str(nproc), *_command(), *argv], env=env)


def spawn(nproc: int, argv) -> int:
    """Start ``nproc`` ranks on this machine (when not launched by tbrun)."""
    def free():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    port, tport = free(), free()
    procs = []
    for r in range(nproc):
        env = _env_with_package(dict(
            os.environ, RANK=str(r), WORLD_SIZE=str(nproc), LOCAL_RANK=str(r),
            LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
            TB_BENCH_TORCH_PORT=str(tport), OMP_NUM_THREADS="1"))
        env.pop("TB_RAW_ESCAPE", None)  # these ranks write straight to the terminal
        procs.append(subprocess.Popen([*_command(), *argv], env=env))
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
