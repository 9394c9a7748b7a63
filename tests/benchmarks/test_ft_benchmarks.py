"""Smoke runs of the live-recovery and slow-link benchmarks (figures are in
docs/fault_tolerance.md; nothing here asserts a speed)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_ft_benchmark_prints_the_quorum_overhead():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks/ft.py"), "--batch", "32",
                          "--blocks", "1", "--steps", "2"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "quorum overhead" in out.stdout and "ft hook" in out.stdout, out.stdout


def test_diloco_benchmark_sends_h_times_less_over_the_shaped_link():
    from tensorbrain.testing.shaped_link import why_unavailable
    if why_unavailable():
        pytest.skip(why_unavailable())
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks/diloco.py"), "--steps", "100",
                          "--sync-every", "50"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    line = next(s for s in out.stdout.splitlines() if s.startswith("diloco vs ddp"))
    ratio = float(line.split("traffic ")[1].split("x")[0])
    assert ratio >= 40, out.stdout  # 100 all_reduces against 2, plus start-up traffic
