"""benchmarks/gemm.py runs end to end (one call per product) and prints a line per product of
every shape plus the total, naming the GEMM it timed. No timing is asserted."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_runs_and_prints_every_product():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "gemm.py"), "--reps", "1"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import gemm
    lines = out.stdout.splitlines()
    assert "tb GEMM: " in lines[1]
    for m, k, n in gemm.SHAPES:
        for name in ("x@W.T", "g@W", "g.T@x"):
            assert sum(f"{m}x{k}x{n}" in line and name in line for line in lines) == 1, (m, k, n, name)
    assert lines[-1].split()[0] == "all"
