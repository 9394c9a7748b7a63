"""benchmarks/ddp_arrivals.py runs (a few steps) and reports every figure its docstring names;
without the resident arena (no native module) it says so instead of printing nonsense."""
import os
import subprocess
import sys

import pytest

from tensorbrain.distributed._shm import native_available
from tensorbrain.distributed._shm.arena import CHUNK_BYTES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args, env=None):
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "ddp_arrivals.py"),
                           "--steps", "6", "--batch", "16", *args], capture_output=True,
                          text=True, timeout=240, env={**os.environ, **(env or {})})


@pytest.mark.skipif(not native_available(), reason="needs the native module")
def test_reports_the_exposed_reduction():
    r = _run()
    assert r.returncode == 0, r.stderr
    line = r.stdout.splitlines()[-1]
    for what in ("step ", "arrival gap median", "exposed median rank 0", "rank 1",
                 "chunks by rank 0 median"):
        assert what in line, line
    chunks = int(line.rsplit(" of ", 1)[1])
    assert chunks == -(-669_706 * 4 // CHUNK_BYTES), line  # the MLP's arena in 128 KiB chunks


def test_without_the_native_module_it_says_so():
    r = _run(env={"TB_NATIVE": "0"})
    assert r.returncode != 0 and "no resident arena" in r.stderr, (r.stdout, r.stderr)


def test_solo_prints_the_step_percentiles():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "ddp_arrivals.py"),
                        "--solo", "--steps", "10", "--batch", "16"], capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    ms = [float(v) for v in r.stdout.splitlines()[-1].split()[2].split("/")]
    assert len(ms) == 4 and 0 < ms[0] <= ms[1] <= ms[2] <= ms[3], r.stdout


@pytest.mark.skipif(not native_available(), reason="needs the native module")
def test_nodes_tables_every_backward_node():
    r = _run("--nodes")
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| ") and "---" not in ln]
    names = [ln.split("|")[1].split()[1] for ln in rows[1:-1]]
    # the MLP's backward, newest node first: the loss, then Linear, ReLU, Linear, ReLU, Linear
    assert names == ["CrossEntropyLossBackward", "AddmmBackward", "ReluBackward",
                     "AddmmBackward", "ReluBackward", "AddmmBackward"], r.stdout
    total = rows[-1].split("|")
    assert rows[-1].startswith("| every node") and float(total[2]) > 0, r.stdout
