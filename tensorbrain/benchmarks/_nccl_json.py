"""``tb-collectives -J file.json``: the run in nccl-tests' own JSON layout.

nccl-tests 2.19 (``src/util.cu``, ``JSON_FILE_VERSION 3``) writes one object: ``version``,
``start_time``, ``args``, ``env`` (``"NAME=value"`` strings), ``nccl_version``, ``config`` (the
sizes, iterations and ``devices``, one object per rank), ``results`` (one object per size with
``size``, ``count``, ``type``, ``redop``, ``root`` and an ``out_of_place`` and an ``in_place``
object holding ``time`` (or ``cpu_time`` with ``-C 1``) in us, ``alg_bw``, ``bus_bw`` and
``nwrong``), ``out_of_bounds``, ``average_bus_bandwidth`` and ``end_time``. We keep its types,
quirks included: booleans are the strings ``"true"``/``"false"`` (its ``jsonBool``), ``root`` is
a string padded to six characters, ``nwrong`` a number or null with ``-c 0``, a missing in-place
form is null. Additions, which nccl-tests readers ignore: ``tool``, ``tensorbrain_version``,
``backend``. ``nccl_version`` is 0 (no NCCL here unless ``--backend nccl``). Values of
environment variables whose name says they are secret (``TB_STORE_SECRET``, ``*TOKEN*``,
``*PASSWORD*``, ``*KEY*``) are written as ``<redacted>``; nccl-tests writes them as they are.

As nccl-tests, an existing file is never overwritten: ``path.0``, ``path.1``, ... are tried.
"""
from __future__ import annotations

import datetime
import json
import os
import re

_TIME = "%Y-%m-%d %H:%M:%S"  # nccl-tests' TIME_STRING_FORMAT
_SECRET = re.compile(r"SECRET|TOKEN|PASSWORD|PASSWD|KEY", re.I)


def _bool(value) -> str:
    return "true" if value else "false"  # nccl-tests' jsonBool writes strings


def _env() -> list:
    return [f"{k}={'<redacted>' if _SECRET.search(k) else v}" for k, v in os.environ.items()]


def document(args, argv, records, devices, avg_busbw, start: str) -> dict:
    """The nccl-tests object for a run: ``records`` are tb-collectives' JSON-lines records,
    ``devices`` one ``[rank, pid, host]`` per rank."""
    from ._cases import parse_size
    import tensorbrain as tb
    time_key = "cpu_time" if args.report_cputime else "time"
    rows: dict = {}
    for r in records:
        if r.get("kind") != "result" or r.get("lib") != "tensorbrain":
            continue
        row = rows.setdefault((r["type"], r["redop"], r["size"]), {
            "size": r["size"], "count": r["count"], "type": r["type"], "redop": r["redop"],
            "root": f"{r['root']:6d}", "out_of_place": None, "in_place": None})
        row["in_place" if r["inplace"] else "out_of_place"] = {
            time_key: r["time_us"], "alg_bw": r["algbw"], "bus_bw": r["busbw"],
            "nwrong": float(r["wrong"]) if args.check else None}
    for row in rows.values():
        row.update(actual_iterations=args.iters, experiment_name="")
    step = ({"step_bytes": parse_size(args.stepbytes)} if args.stepbytes is not None
            else {"step_factor": int(args.stepfactor or 2)})
    wrong = int(sum((row[k] or {}).get("nwrong") or 0 for row in rows.values()
                    for k in ("out_of_place", "in_place")))
    return {
        "version": 3, "start_time": start, "args": ["tb-collectives", *argv], "env": _env(),
        "nccl_version": 0, "tool": "tb-collectives", "tensorbrain_version": tb.__version__,
        "backend": args.backend,
        "config": {"nthreads": 1, "ngpus": 1, "minimum_bytes": parse_size(args.minbytes),
                   "maximum_bytes": parse_size(args.maxbytes), **step,
                   "warmup_iters": args.warmup_iters, "iterations": args.iters,
                   "aggregated_iterations": 1, "validation": args.check, "graph": 0,
                   "blocking_collectives": _bool(args.blocking), "per_iter_timing": _bool(0),
                   "per_iter_skip": 0, "parallel_init": _bool(0),
                   "devices": [{"rank": r, "group": 0, "pid": pid, "hostname": host,
                                "device": -1, "device_hex": "", "device_info": "cpu"}
                               for r, pid, host in devices]},
        "results": list(rows.values()),
        "out_of_bounds": {"count": wrong, "okay": _bool(wrong == 0)},
        "average_bus_bandwidth": {"bandwidth": avg_busbw, "okay": "unchecked"},
        "end_time": datetime.datetime.now().strftime(_TIME),
    }


def write(args, argv, records, devices, avg_busbw) -> str:
    """Write the document next to ``args.output_file`` without replacing a file; returns the
    path written (``file.json``, else ``file.json.0``, ``.1``, ...)."""
    start = records[0].get("date", "") if records else ""
    if start:
        start = datetime.datetime.fromisoformat(start).astimezone().strftime(_TIME)
    text = json.dumps(document(args, argv, records, devices, avg_busbw, start), indent=1)
    path, tmp = args.output_file, f"{args.output_file}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text + "\n")
    try:
        for i in range(-1, 1000):
            target = path if i < 0 else f"{path}.{i}"
            try:
                os.link(tmp, target)  # atomic, and never over an existing file (nccl-tests' "wx")
                return target
            except FileExistsError:
                continue
        raise FileExistsError(f"{path} and {path}.0 .. {path}.999 all exist")
    finally:
        os.unlink(tmp)
