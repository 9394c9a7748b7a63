"""Draw a TB_TIMELINE trace (one or more ranks' files) as a PNG, the way a trace viewer shows it.

chrome://tracing and https://ui.perfetto.dev open the JSON itself; this script is for a picture
in the docs (no browser here): one row per (rank, track), one bar per event, labelled by op.

    TB_TIMELINE=/tmp/tl.json tbrun --standalone --nproc_per_node 2 examples/ddp_timeline.py
    python benchmarks/plot_timeline.py /tmp/tl.rank0.json /tmp/tl.rank1.json -o docs/img/timeline.png
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--title", default="TB_TIMELINE: collectives and DDP buckets per rank")
    args = p.parse_args(argv)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from tensorbrain.distributed._observe import merge
    doc = merge(args.files, args.output + ".merged.json")
    os.unlink(args.output + ".merged.json")
    events = doc["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X"]
    t0 = min(e["ts"] for e in spans)
    rows = sorted({(e["pid"], e["tid"]) for e in spans})
    colors = {}
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
    ax.set_title(args.title)
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()],
              labels=list(colors), loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=6,
              fontsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output} ({len(spans)} events)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
