"""benchmarks/collectives.py runs (starting its own 2 ranks), prints nccl-tests' table with zero
wrong values for every op, and writes JSON lines. Timing goals are not asserted here."""
import json
import pathlib
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "collectives.py"


# a reducing op and a rooted op without an in-place form keep CI short; every op's
# #wrong check is exercised by running the benchmark with --op
@pytest.mark.parametrize("op", ["all_reduce", "gather"])
def test_benchmark_table(tmp_path, op):
    out = tmp_path / "bench.jsonl"
    proc = subprocess.run([sys.executable, str(BENCH), "-b", "8", "-e", "2K", "-f", "16", "-n", "2",
                           "-w", "1", "--op", op, "--json", str(out)],
                          capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    assert "# Hardware:" in text and "busbw" in text and "#wrong" in text
    assert "# Out of bounds values : 0 OK" in text, text
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["kind"] == "metadata" and lines[0]["world_size"] == 2
    rows = [r for r in lines if r["kind"] == "result"]
    assert {r["size"] for r in rows if r["lib"] == "tensorbrain"} == {8, 128, 2048}
    assert all(r["wrong"] == 0 for r in rows)
