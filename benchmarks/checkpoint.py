"""tb.load: peak memory against the file size, time against a plain read of the file.

Writes one float32 checkpoint of ``--size`` bytes (default 512M) to ``--dir`` (default the
system temp folder), then in fresh processes measures, each ``--repeat`` times:

* ``plain read``: ``open(path).read()`` into one bytes object (the floor: one copy);
* ``tb.load``: the checkpoint loaded to NumPy-backed tensors;
* ``safetensors``: ``safetensors.numpy.load_file`` (the library's own reader), for reference.

Peak is the process's peak RSS (``VmHWM``) minus its RSS before the call, as a multiple of
the file size; goal for tb.load: <= 1.1x, time close to the plain read::

    python benchmarks/checkpoint.py --size 1G
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import parse_size  # noqa: E402

CHILD = r"""
import os, sys, time
sys.path.insert(0, sys.argv[3])
import numpy as np, tensorbrain as tb, safetensors.numpy as stn
what, path = sys.argv[1], sys.argv[2]
def status_kib(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(field))
base = status_kib("VmRSS")
t0 = time.perf_counter()
if what == "read":
    with open(path, "rb") as f:
        out = f.read()
elif what == "tb":
    out = tb.load(path)
else:
    out = stn.load_file(path)
dt = time.perf_counter() - t0
peak = status_kib("VmHWM")  # not ru_maxrss: after fork+exec it can report the parent's peak
print(dt, (peak - base) * 1024)
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", default="512M")
    p.add_argument("--dir", default=tempfile.gettempdir())
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    nbytes = parse_size(args.size)
    import numpy as np

    import tensorbrain as tb
    path = os.path.join(args.dir, f"tb-bench-ckpt-{os.getpid()}.safetensors")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        tb.save({"w": tb.tensor(np.ones(nbytes // 8, np.float32)),
                 "v": tb.tensor(np.ones(nbytes // 8, np.float32))}, path)
        size = os.path.getsize(path)
        print(f"# tb.load vs a plain read, file {size / 2**20:.0f} MiB, best of {args.repeat} "
              "fresh processes (time) / largest peak")
        print(f"{'reader':>12} {'time s':>8} {'GB/s':>6} {'peak MiB':>9} {'peak/file':>9}")
        for what, label in (("read", "plain read"), ("tb", "tb.load"), ("st", "safetensors")):
            runs = []
            for _ in range(args.repeat):
                out = subprocess.run([sys.executable, "-c", CHILD, what, path, root],
                                     capture_output=True, text=True, check=True)
                t, peak = out.stdout.split()
                runs.append((float(t), int(peak)))
            t = min(r[0] for r in runs)
            peak = max(r[1] for r in runs)
            print(f"{label:>12} {t:8.3f} {size / t / 1e9:6.2f} {peak / 2**20:9.0f} "
                  f"{peak / size:9.2f}")
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
