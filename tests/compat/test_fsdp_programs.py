"""Programs written for torch's FSDP, ZeroRedundancyOptimizer and distributed-checkpoint APIs
(tests/compat/programs: fsdp_lm.py, zero_ddp.py, fsdp2_dcp.py; ``import torch`` only) run
unchanged under ``tbrun --as-torch`` at 2 ranks (4 for HSDP) and end with the parameters of one
process trained on the whole batch; FSDP's per-rank memory is half of the model's.

The references are the same programs with ``--plain`` (no FSDP / ZeRO) in one process, also
through the alias. Tolerances: Adam turns tiny differences in summation order into
differences of up to ~1e-4 of a parameter's scale after a few steps.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = os.path.join(ROOT, "tests", "compat", "programs")


def _tb(tmp_path, prog, nproc, *args):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    env.pop("TENSORBRAIN_AS_TORCH", None)
    argv = [sys.executable, "-m", "tensorbrain.distributed.run", "--as-torch", "--standalone",
            "--nproc_per_node", str(nproc), os.path.join(PROGRAMS, prog), *args]
    out = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 0, f"{' '.join(argv)} failed:\n{text[-4000:]}"
    return text


def _close(a_path, b_path, rtol=2e-4):
    a, b = np.load(a_path), np.load(b_path)
    assert sorted(a) == sorted(b)
    for k in a:
        scale = max(float(np.abs(b[k]).max()), 1e-3)
        np.testing.assert_allclose(a[k], b[k], atol=rtol * scale, rtol=0, err_msg=k)


def test_fsdp1_program_matches_one_process_and_halves_memory(tmp_path):
    ref = _tb(tmp_path, "fsdp_lm.py", 1, "--out", "ref.npz", "--plain")
    out = _tb(tmp_path, "fsdp_lm.py", 2, "--out", "fsdp.npz")
    _close(tmp_path / "fsdp.npz", tmp_path / "ref.npz")
    assert "OPTIM_KEYS 41 ['exp_avg', 'exp_avg_sq', 'step']" in out
    (plain,) = [json.loads(m) for m in re.findall(r"MEM (\{.*\})", ref)]
    for mem in [json.loads(m) for m in re.findall(r"MEM (\{.*\})", out)]:
        # each rank keeps half of the parameters and half of Adam's state (+ padding)
        assert mem["local_params"] * 2 - mem["full_params"] in (0, 1)
        assert mem["optim_state_bytes"] * 2 - plain["optim_state_bytes"] in (0, 8)


@pytest.mark.parametrize("strategy,extra", [("SHARD_GRAD_OP", ["--offload"]),
                                            ("HYBRID_SHARD", [])])
def test_fsdp1_program_other_strategies(tmp_path, strategy, extra):
    _tb(tmp_path, "fsdp_lm.py", 1, "--out", "ref.npz", "--plain", "--steps", "3")
    _tb(tmp_path, "fsdp_lm.py", 2, "--out", "fsdp.npz", "--steps", "3", "--strategy", strategy,
        *extra)
    _close(tmp_path / "fsdp.npz", tmp_path / "ref.npz")


def test_zero_program_stops_resumes_and_matches_one_process(tmp_path):
    _tb(tmp_path, "zero_ddp.py", 1, "--out", "ref.npz", "--epochs", "4", "--plain")
    _tb(tmp_path, "zero_ddp.py", 2, "--out", "a.npz", "--epochs", "2", "--save", "ck.pt")
    _tb(tmp_path, "zero_ddp.py", 2, "--out", "b.npz", "--epochs", "2", "--start-epoch", "2",
        "--resume", "ck.pt")
    _close(tmp_path / "b.npz", tmp_path / "ref.npz", rtol=1e-5)


def test_fsdp2_dcp_program_saved_at_2_resumes_at_1(tmp_path):
    _tb(tmp_path, "fsdp2_dcp.py", 1, "--out", "ref.npz", "--steps", "6", "--plain")
    _tb(tmp_path, "fsdp2_dcp.py", 2, "--out", "a.npz", "--steps", "3", "--ckpt", "ck",
        "--ac", "wrapper")
    assert any(f.startswith("__1_") for f in os.listdir(tmp_path / "ck"))   # rank 1's shard
    _tb(tmp_path, "fsdp2_dcp.py", 1, "--out", "b.npz", "--steps", "3", "--first-step", "3",
        "--ckpt", "ck", "--resume", "--ac", "inner")
    _close(tmp_path / "b.npz", tmp_path / "ref.npz")


def test_fsdp2_program_hsdp_at_4_ranks(tmp_path):
    _tb(tmp_path, "fsdp2_dcp.py", 1, "--out", "ref.npz", "--steps", "4", "--plain")
    out = _tb(tmp_path, "fsdp2_dcp.py", 4, "--out", "h.npz", "--steps", "4", "--mesh", "2x2",
              "--ac", "inner")
    assert "(Replicate(), Shard(dim=0))" in out
    _close(tmp_path / "h.npz", tmp_path / "ref.npz")
