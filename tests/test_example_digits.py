"""examples/train_digits.py: it learns (>= 95% test accuracy in a few epochs), a resumed run
ends with exactly the parameters of an uninterrupted one, and it runs as a plain script."""
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("tqdm")
pytest.importorskip("safetensors")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "train_digits.py")


@pytest.fixture(scope="module")
def digits():
    spec = importlib.util.spec_from_file_location("train_digits", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cnn_reaches_95_percent_in_three_epochs(digits):
    trainer = digits.main(["--epochs", "3", "--no-progress"])
    accs = [h["test_acc"] for h in trainer.history]
    assert len(accs) == 3 and accs[-1] >= 0.95, accs
    assert trainer.history[-1]["train_loss"] < trainer.history[0]["train_loss"]


def test_resumed_run_matches_uninterrupted_run(digits, tmp_path):
    common = ["--model", "mlp", "--batch-size", "128", "--no-progress", "--save-every", "1"]
    full = digits.main(common + ["--epochs", "3", "--snapshot", str(tmp_path / "full.st")])
    snap = str(tmp_path / "resumed.st")
    digits.main(common + ["--epochs", "2", "--snapshot", snap])  # "crashes" after epoch 2
    resumed = digits.main(common + ["--epochs", "3", "--snapshot", snap])
    assert [h["epoch"] for h in resumed.history] == [3]  # only the missing epoch ran
    ref, got = full.model.state_dict(), resumed.model.state_dict()
    assert list(ref) == list(got)
    for key in ref:
        np.testing.assert_array_equal(got[key]._data, ref[key]._data, err_msg=key)
    assert resumed.history[0]["test_acc"] == full.history[-1]["test_acc"]
    # the optimizer state came back too (Adam's step counts and moments)
    s_ref, s_got = full.optimizer.state_dict(), resumed.optimizer.state_dict()
    assert s_ref["param_groups"] == s_got["param_groups"]


def test_runs_as_a_plain_script_with_progress_bar(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.run([sys.executable, SCRIPT, "--model", "mlp", "--epochs", "1",
                           "--snapshot", str(tmp_path / "s.st"), "--save-every", "1"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "epoch   1/1" in proc.stdout and "final test accuracy" in proc.stdout
    assert "batch/s" in proc.stderr or "it/s" in proc.stderr  # tqdm drew its bar
    assert (tmp_path / "s.st").exists()
