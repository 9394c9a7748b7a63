"""Where a TensorBrain training step spends its time on the GPU: host time, device time, and the
Python functions and CuPy launches behind them.

    python benchmarks/gpu/profile_step.py [--workloads mlp,resnet18,gpt] [--amp fp32] [--top 25]

For each workload (the models of ``train_step.py``) it prints

* ms/step with a device synchronisation after every step, and the host's own time for the same
  steps without one (the step is host-bound, launches and Python, when the two are close);
* a ``cProfile`` of five steps sorted by own time, which names the Python functions (CuPy's
  array operators run inside the function that calls them);
* with ``--kernels``, instead: the GPU kernels of three steps by device time, through torch's
  profiler (CUPTI sees CuPy's kernels too), and the launches per step.

``--device cpu`` runs the same on NumPy (how tests/test_gpu_prep.py checks it without a GPU).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import Runner  # noqa: E402


def profile(name: str, device: str, amp: str, top: int, steps: int = 5) -> None:
    r = Runner("tb", name, device, amp)
    for _ in range(3):
        r.step()
    r.sync()
    t = time.perf_counter()
    for _ in range(steps):
        r.step()
        r.sync()
    synced = (time.perf_counter() - t) / steps
    t = time.perf_counter()
    for _ in range(steps):
        r.step()
    host = (time.perf_counter() - t) / steps
    r.sync()
    print(f"\n## {name} {amp} on {device}: {synced * 1e3:.2f} ms/step synchronised, "
          f"{host * 1e3:.2f} ms/step of host time unsynchronised")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        r.step()
    r.sync()
    prof.disable()
    s = io.StringIO()
    st = pstats.Stats(prof, stream=s)
    st.sort_stats("tottime").print_stats(top)
    print(s.getvalue()[-6000:])


def kernels(name: str, amp: str, top: int, fw: str = "tb", steps: int = 3) -> None:
    """The GPU kernels of ``steps`` steps of ``fw`` (tb or torch) by total device time, through torch's
    profiler: CUPTI records every kernel of the process, CuPy's included."""
    from torch.profiler import ProfilerActivity, profile as tprofile
    r = Runner(fw, name, "cuda", amp)
    for _ in range(3):
        r.step()
    r.sync()
    t = time.perf_counter()
    with tprofile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            r.step()
        r.sync()
    wall = (time.perf_counter() - t) / steps
    try:
        _kernel_table(prof, f"{fw} {name}", amp, top, steps, wall)
    except Exception as exc:  # noqa: BLE001 - another torch's attribute names: its own table
        print(f"\n## kernels of {name} {amp} ({type(exc).__name__}: {exc}); torch's table:")
        print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=top))


def _kernel_table(prof, name, amp, top, steps, wall):
    events = [e for e in prof.key_averages() if getattr(e, "device_type", None) is not None
              and str(e.device_type).endswith("CUDA")]
    total = sum(e.self_device_time_total for e in events) / steps / 1e3
    print(f"\n## kernels of {name} {amp}: {total:.2f} ms of GPU time per step, {wall * 1e3:.2f} ms "
          f"wall per step under the profiler; {sum(e.count for e in events) // steps} launches "
          "per step")
    for e in sorted(events, key=lambda e: -e.self_device_time_total)[:top]:
        print(f"{e.self_device_time_total / steps / 1e3:8.3f} ms {e.count // steps:5d}x  {e.key[:110]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="mlp,resnet18,gpt")
    ap.add_argument("--amp", default="fp32")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--kernels", action="store_true",
                    help="list the GPU kernels by device time (torch's profiler) instead")
    args = ap.parse_args(argv)
    for name in args.workloads.split(","):
        for amp in args.amp.split(","):
            try:
                if args.kernels:
                    for fw in ("tb", "torch"):
                        kernels(name, amp, args.top, fw)
                else:
                    profile(name, args.device, amp, args.top)
            except Exception as exc:  # one workload's failure must not hide the others'
                print(f"\n## {name} {amp}: {type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
