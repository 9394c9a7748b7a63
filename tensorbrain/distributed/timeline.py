"""``python -m tensorbrain.distributed.timeline merge|plot``: the ranks' timelines as one.

Timelines are the per-rank Chrome-trace files ``TB_TIMELINE`` writes (collectives and DDP
buckets) and those ``tb.profiler``'s ``export_chrome_trace`` writes (ops, backward and
collectives); both use the rank as ``pid`` and wall-clock microseconds, so they line up::

    python -m tensorbrain.distributed.timeline merge -o merged.json /tmp/tl.rank0.json /tmp/tl.rank1.json
    python -m tensorbrain.distributed.timeline plot -o timeline.png /tmp/tl.rank*.json

``merge`` joins them into one file (open it in https://ui.perfetto.dev or ``chrome://tracing``)
and adds ``wait_us`` to each collective: how long that rank waited for the last rank to arrive
(matched by group and sequence number). ``plot`` draws them as a PNG (matplotlib, the
``tensorbrain[plot]`` extra): one row per (rank, track), one bar per event.
"""
from __future__ import annotations

import argparse
import os
import sys

from ._observe import merge

__all__ = ["merge", "plot", "main"]


def plot(paths, out_path: str, title: str | None = None) -> str:
    """Draw the timelines in ``paths`` as a PNG at ``out_path``; returns the path.

    Args:
        paths: the ranks' trace files (``TB_TIMELINE`` or ``export_chrome_trace`` output).
        out_path: the PNG to write.
        title: the figure's title; default names the files' ranks.

    Raises:
        ImportError: matplotlib is not installed (``pip install tensorbrain[plot]``).
    """
    try:
        import matplotlib
    except ImportError:
        raise ImportError("timeline plot needs matplotlib: pip install matplotlib (or "
                          "tensorbrain[plot])") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    doc = _merged(paths)
    events = doc["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    if not spans:
        raise ValueError(f"no events to plot in {', '.join(map(str, paths))}")
    t0 = min(e["ts"] for e in spans)
    rows = sorted({(e["pid"], e["tid"]) for e in spans})
    colors: dict = {}
    palette = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(11, 0.7 * len(rows) + 1.6))
    for y, key in enumerate(rows):
        for e in (e for e in spans if (e["pid"], e["tid"]) == key):
            label = e["name"] if not e["name"].startswith("bucket") else "DDP bucket"
            c = colors.setdefault(label, palette(len(colors) % 10))
            start, dur = (e["ts"] - t0) / 1e3, max(e["dur"] / 1e3, 0.02)
            ax.barh(y, dur, left=start, height=0.6, color=c, edgecolor="black", linewidth=0.3)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"rank {pid}: {names.get((pid, tid), tid)}" for pid, tid in rows])
    ax.invert_yaxis()
    ax.set_xlabel("time (ms from the first event)")
    ax.set_title(title or f"timeline of {len({p for p, _ in rows})} rank(s)")
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()],
              labels=list(colors), loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=6,
              fontsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return out_path


def _merged(paths) -> dict:
    import tempfile
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        return merge(paths, tmp)
    finally:
        os.unlink(tmp)


def main(argv=None) -> int:
    """The command line (see the module docstring); returns the exit status.

    Args:
        argv: the arguments after the program name; None for ``sys.argv[1:]``.
    """
    p = argparse.ArgumentParser(prog="python -m tensorbrain.distributed.timeline",
                                description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name, what in (("merge", "the merged trace (JSON)"), ("plot", "the picture (PNG)")):
        s = sub.add_parser(name, help=f"write {what}")
        s.add_argument("files", nargs="+", help="the ranks' trace files")
        s.add_argument("-o", "--output", required=True, help=f"where to write {what}")
        if name == "plot":
            s.add_argument("--title", default=None)
    args = p.parse_args(argv)
    missing = [f for f in args.files if not os.path.exists(f)]
    if missing:
        p.error(f"no such file: {', '.join(missing)}")
    try:
        if args.command == "merge":
            doc = merge(args.files, args.output)
            n = sum(1 for e in doc["traceEvents"] if e.get("ph") == "X")
            print(f"merged {len(args.files)} file(s), {n} events, into {args.output}")
        else:
            plot(args.files, args.output, args.title)
            print(f"wrote {args.output}")
    except (ImportError, ValueError, KeyError) as exc:
        print(f"timeline {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
