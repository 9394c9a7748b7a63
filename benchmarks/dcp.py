"""Distributed checkpoint save/load time against ``tb.save``/``tb.load`` of the same bytes.

    python benchmarks/dcp.py                   # 256 MiB of float32 in 8 tensors, 1 and 2 ranks
    python benchmarks/dcp.py --mib 64 --repeat 5 --dir /tmp

A state dict of ``--mib`` MiB (8 tensors, DTensor ``Shard(0)`` over the ranks) is saved with
``dcp.save`` at 1 and 2 ranks (every rank writes its half), then loaded at the same and at the
other world size (resharding). The baseline is one process writing the same tensors, whole, with
``tb.save`` (one safetensors file, also fsynced and renamed) and reading them with ``tb.load``.
A figure is the median over ``--repeat`` runs of the slowest rank's time; GB/s = bytes / time.
Every timed save or load starts after ``os.sync()``, so no earlier write is still being flushed
(files stay in the page cache: loads read memory, not the disk).
Files go to ``--dir`` (default: the system temp folder), and are deleted afterwards.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
N_TENSORS = 8


def _state(world, mib, fill):
    import numpy as np

    import tensorbrain as tb
    from tensorbrain.distributed.device_mesh import init_device_mesh
    from tensorbrain.distributed.tensor import Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (world,))
    rows = mib * 2**20 // 4 // N_TENSORS // 1024
    out = {}
    for i in range(N_TENSORS):
        full = np.full((rows, 1024), float(i + 1) if fill else 0.0, np.float32)
        out[f"layer{i}.weight"] = distribute_tensor(tb.from_numpy(full), mesh, [Shard(0)])
    return out


def worker(rank, world, path, mib, mode):
    import tensorbrain.distributed as dist
    import tensorbrain.distributed.checkpoint as dcp
    sd = _state(world, mib, mode == "save")
    if rank == 0:
        os.sync()  # start from a clean page cache: no earlier write still being flushed
    dist.barrier()
    t0 = time.perf_counter()
    if mode == "save":
        dcp.save(sd, checkpoint_id=path)
    else:
        dcp.load(sd, checkpoint_id=path)
    dist.barrier()
    return time.perf_counter() - t0


def _baseline(path, mib):
    import numpy as np

    import tensorbrain as tb
    rows = mib * 2**20 // 4 // N_TENSORS // 1024
    sd = {f"layer{i}.weight": tb.from_numpy(np.full((rows, 1024), float(i + 1), np.float32))
          for i in range(N_TENSORS)}
    os.sync()
    t0 = time.perf_counter()
    tb.save(sd, path)
    t_save = time.perf_counter() - t0
    os.sync()
    t0 = time.perf_counter()
    tb.load(path)
    return t_save, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args(argv)
    from tensorbrain.testing.distributed import run_workers
    base = tempfile.mkdtemp(prefix="tb-dcp-bench-", dir=a.dir)
    gb = a.mib * 2**20 / 1e9
    rows = {}
    try:
        for _ in range(a.repeat):
            s, l_ = _baseline(os.path.join(base, "one.safetensors"), a.mib)
            rows.setdefault("tb.save / tb.load, 1 process", []).append((s, l_))
            for save_w, load_w in ((1, 1), (2, 2), (2, 1), (1, 2)):
                path = os.path.join(base, f"ckpt{save_w}")
                shutil.rmtree(path, ignore_errors=True)
                t_save = max(run_workers("benchmarks.dcp:worker", save_w, path, a.mib, "save",
                                         timeout=600))
                t_load = max(run_workers("benchmarks.dcp:worker", load_w, path, a.mib, "load",
                                         timeout=600))
                rows.setdefault(f"dcp, save at {save_w}, load at {load_w}", []).append(
                    (t_save, t_load))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"# {a.mib} MiB float32 in {N_TENSORS} tensors, median of {a.repeat}, files in "
          f"{a.dir or tempfile.gettempdir()}\n")
    print("| what | save (s) | save GB/s | load (s) | load GB/s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, runs in rows.items():
        s = statistics.median(r[0] for r in runs)
        l_ = statistics.median(r[1] for r in runs)
        print(f"| {name} | {s:.3f} | {gb / s:.2f} | {l_:.3f} | {gb / l_:.2f} |")


if __name__ == "__main__":
    main()
