"""8 B all_reduce time and 4 MiB busbw of several TensorBrain source trees, side by side.

The check behind "no slowdown" for a refactor: each tree (a checkout with its own built
``tensorbrain/_C*.so``, e.g. from ``git worktree add``) runs two ranks of the same loop, in
rotating order, for ``--rounds`` rounds, so the trees see the same machine load. Each rank is
pinned to its own core (``taskset``) when there are two cores or more. A tree may carry
environment settings after a comma: ``/tmp/head,TB_FASTPATH=0``.

Shared-memory busbw on a 2-core VM is bimodal per launch (whether the scheduler keeps the two
ranks on separate cores): read the upper-mode median and the best, not one launch.

Example::

    git worktree add --detach /tmp/before cfaa6f2^     # then build its _C (docs/install.md)
    python benchmarks/compare_trees.py /tmp/before . .,TB_FASTPATH=0 --rounds 11
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys

# One rank's loop: the median of 5 timed blocks per size, after a warm-up.
RANK = r"""
import json, time
import numpy as np
import tensorbrain as tb
import tensorbrain.distributed as dist
dist.init_process_group("gloo")
out = {}
for nbytes, iters in ((8, 20000), (4 << 20, 200)):
    t = tb.tensor(np.ones(nbytes // 4, np.float32))
    for _ in range(iters // 10):
        dist.all_reduce(t)
    blocks = []
    for _ in range(5):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        blocks.append((time.perf_counter() - t0) / iters)
    out[nbytes] = sorted(blocks)[2]
if dist.get_rank() == 0:
    print(json.dumps({"us_8B": out[8] * 1e6, "busbw_4MiB": (4 << 20) / out[4 << 20] / 1e9}))
dist.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_tree(spec: str, timeout: float = 120.0) -> dict:
    """Two ranks of the loop with the tree ``spec`` (``path[,VAR=value...]``) on PYTHONPATH.

    Returns:
        ``{"us_8B": float, "busbw_4MiB": float}`` from rank 0.
    Raises:
        RuntimeError: a rank failed (its stderr is in the message).
    """
    path, *settings = spec.split(",")
    port = _free_port()
    pin = shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "PYTHONPATH": os.path.abspath(path), "RANK": str(rank),
               "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        env.update(s.split("=", 1) for s in settings)
        cmd = [sys.executable, "-c", RANK]
        if pin:
            cmd = ["taskset", "-c", str(rank)] + cmd
        # cwd is the tree: ``python -c`` puts the working directory first on sys.path
        procs.append(subprocess.Popen(cmd, env=env, cwd=path, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=timeout) for p in procs]
    for p, (_, err) in zip(procs, outs):
        if p.returncode:
            raise RuntimeError(f"{spec}: a rank exited with {p.returncode}:\n{err[-2000:]}")
    return json.loads(outs[0][0].strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Run every tree ``--rounds`` times in rotating order and print the summary table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+", help="source trees, each path[,VAR=value...]")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"# {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start, "
          f"{args.rounds} rounds, 2 ranks, float32 sum")
    got: dict[str, list[dict]] = {t: [] for t in args.trees}
    for r in range(args.rounds):
        for t in args.trees[r % len(args.trees):] + args.trees[:r % len(args.trees)]:
            got[t].append(run_tree(t))
    print("| tree | 8 B best / median (us) | 4 MiB busbw best / median / upper-mode median (GB/s) |")
    print("| --- | --- | --- |")
    for t, rows in got.items():
        lat = [x["us_8B"] for x in rows]
        bw = [x["busbw_4MiB"] for x in rows]
        upper = [b for b in bw if b >= 0.6 * max(bw)]
        print(f"| {t} | {min(lat):.2f} / {statistics.median(lat):.2f} | {max(bw):.2f} / "
              f"{statistics.median(bw):.2f} / {statistics.median(upper):.2f} "
              f"({len(upper)} of {len(bw)}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
