"""The data-parallel examples run and check what they claim, in real processes."""
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
for _v in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
    ENV.pop(_v, None)


def _run(args, timeout=120):
    """Run to completion; on timeout kill the whole process group (tbrun and its workers)."""
    p = subprocess.Popen(args, cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise AssertionError(f"{args} still running after {timeout} s (killed):\n"
                             f"{out[-2000:]}{err[-3000:]}") from None
    assert p.returncode == 0, out[-2000:] + err[-3000:]
    return out + err


def _tbrun(*args):
    return [sys.executable, "-m", "tensorbrain.distributed.run", "--standalone",
            "--nproc_per_node", "2", *args]


def test_ddp_accumulate_equals_one_big_batch():
    out = _run([sys.executable, "examples/ddp_accumulate.py", "--steps", "2"])
    assert float(re.search(r"one big batch of 32: (\S+)", out).group(1)) < 1e-6
    out = _run(_tbrun("examples/ddp_accumulate.py", "--steps", "2"))
    assert float(re.search(r"one big batch of 64: (\S+)", out).group(1)) < 1e-6


def test_data_parallel_example_matches_one_module():
    out = _run([sys.executable, "examples/data_parallel.py", "--steps", "2", "--batch", "64"])
    assert float(re.search(r"vs single module: (\S+)", out).group(1)) < 1e-5


def _figures(out):
    """(train loss, test accuracy) per epoch from the digits example's log."""
    return [(float(m.group(1)), float(m.group(2))) for m in
            re.finditer(r"train loss (\S+) .*test loss \S+ acc\s+(\S+)%", out)]


@pytest.mark.slow
def test_train_digits_two_processes_with_a_restart_match_one_process(tmp_path):
    """The main job: 2 ranks (DDP, SyncBatchNorm, sharded global batch), rank 1 killed at the
    start of epoch 2, tbrun restarts both, they resume from rank 0's snapshot; the figures
    equal one process's."""
    common = ["--model", "cnn", "--epochs", "2", "--no-progress"]
    single = _figures(_run([sys.executable, "examples/train_digits.py", *common], 300))
    snap = tmp_path / "digits.safetensors"
    out = _run(_tbrun("--max_restarts", "1", "examples/train_digits.py", *common,
                      "--save-every", "1", "--snapshot", str(snap), "--crash-at-epoch", "2"),
               300)
    assert "restarting all workers" in out and "resuming training from snapshot" in out
    assert "world size 2" in out
    multi = _figures(out)
    assert len(single) == 2 and len(multi) == 2
    for (l1, a1), (l2, a2) in zip(single, multi):
        assert abs(l1 - l2) < 2e-3 and abs(a1 - a2) <= 0.3  # one test image is 0.28%
