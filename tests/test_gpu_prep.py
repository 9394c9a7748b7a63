"""The GPU run's entry point and benchmarks stay runnable on machines without a GPU.

The device machine is lent rarely and only for minutes, so its one command
(benchmarks/gpu/run_all.sh) must not fail on a typo. These checks run the scripts' CPU paths:
the training-step benchmark on NumPy (the same code as on CuPy), the no-GPU exits of the others,
and the summary on files in the formats the benchmarks write.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tensorbrain as tb

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "benchmarks" / "gpu"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _run(*args, timeout=180):
    return subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def test_run_all_is_valid_bash():
    proc = subprocess.run(["bash", "-n", str(GPU / "run_all.sh")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_train_step_runs_its_cpu_path(tmp_path):
    out = tmp_path / "t.json"
    proc = _run(GPU / "train_step.py", "--device", "cpu", "--workloads", "mlp", "--rounds", "1",
                "--steps", "1", "--no-torch", "--amp", "fp32,bf16", "--json", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [(r["workload"], r["amp"]) for r in rows] == [("mlp", "fp32"), ("mlp", "bf16")]
    assert all(r["tb_ms"] > 0 and "error" not in r for r in rows)
    assert not (tmp_path / "t.json.tmp").exists()


def test_train_step_rejects_an_unknown_precision():
    proc = _run(GPU / "train_step.py", "--device", "cpu", "--amp", "fp8", timeout=60)
    assert proc.returncode == 2 and "fp8" in proc.stderr


@pytest.mark.skipif(tb.cuda.is_available(), reason="checks the no-GPU exit")
@pytest.mark.parametrize("script", ["nccl_overhead.py", "copy_bandwidth.py", "train_step.py",
                                    "host_cost.py"])
def test_gpu_benchmarks_say_why_they_cannot_run(script):
    proc = _run(GPU / script, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cannot run here" in proc.stdout or "no GPU" in proc.stdout


def test_summary_reads_what_the_benchmarks_write(tmp_path):
    (tmp_path / "train.rc").write_text("0\n")
    (tmp_path / "train-step.json").write_text(json.dumps({"rows": [
        {"workload": "mlp", "amp": "fp32", "tb_ms": 2.0, "torch_ms": 1.0, "ratio": 2.0,
         "throughput_vs_torch": 0.5, "tb_peak_bytes": 3 << 20, "torch_peak_bytes": None},
        {"workload": "gpt", "error": "ValueError: boom"}]}))
    (tmp_path / "nccl-overhead.json").write_text(json.dumps({"device": "H100", "rows": [
        {"bytes": 8, "tb_us": 12.5, "bare_us": 4.0, "wrong": 0}]}))
    (tmp_path / "conv-train.json").write_text(json.dumps({"rows": [
        {"workload": "resnet18", "amp": "fp32", "tb_ms": 3.0, "torch_ms": 1.5, "ratio": 2.0,
         "throughput_vs_torch": 0.5, "tb_peak_bytes": None, "torch_peak_bytes": None}]}))
    proc = _run(GPU / "summarize.py", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "With TB_CUDA_CONV=1" in proc.stdout and "| resnet18 | fp32 | 3.00 | 1.50 |" in proc.stdout
    assert "| mlp | fp32 | 2.00 | 1.00 | 2.00 | 0.50 | 3 | - |" in proc.stdout
    assert "| gpt | fp32 | error: ValueError: boom" in proc.stdout
    assert "| 8 | 12.50 | 4.00 | - | - | 0 |" in proc.stdout
    assert "train exit 0" in proc.stdout


def _run_all(tmp_path, *args, **env):
    full = {**ENV, "OUT": str(tmp_path / "out"), "TB_GPU_STATE": str(tmp_path / "state"),
            "PYTHON": sys.executable, **env}
    return subprocess.run(["bash", str(GPU / "run_all.sh"), *args], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=120)


def test_run_all_skips_what_its_budget_cannot_fit(tmp_path):
    proc = _run_all(tmp_path, "--quick", TB_GPU_BUDGET="10")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for step in ("env", "install", "tests", "train"):
        assert f"{step}: SKIPPED" in proc.stdout
        assert (tmp_path / "out" / f"{step}.rc").read_text().startswith("skipped")
    assert "nccl" not in proc.stdout   # --quick runs one benchmark only
    assert (tmp_path / "out" / "summary.md").exists()


def test_run_all_runs_a_step_once_and_resumes(tmp_path):
    first = _run_all(tmp_path, TB_GPU_ONLY="env")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "env: exit 0" in first.stdout and "install" not in first.stdout
    assert "python" in (tmp_path / "out" / "env.log").read_text()
    again = _run_all(tmp_path, TB_GPU_ONLY="env")
    assert "env: done in an earlier call, skipped" in again.stdout
    assert (tmp_path / "out" / "env.log").exists()   # copied to $OUT again


def test_run_all_packs_its_results_into_one_file(tmp_path):
    import tarfile
    proc = _run_all(tmp_path, TB_GPU_ONLY="env", TB_GPU_PACK="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gpu-results.tgz", "summary.md"]
    with tarfile.open(tmp_path / "out" / "gpu-results.tgz") as tar:
        assert "./env.log" in tar.getnames()


def test_profile_step_runs_its_cpu_path():
    proc = _run(GPU / "profile_step.py", "--device", "cpu", "--workloads", "mlp", "--top", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "## mlp fp32 on cpu:" in proc.stdout and "ms/step synchronised" in proc.stdout
    assert "Ordered by: internal time" in proc.stdout


def test_run_all_refuses_an_unknown_argument(tmp_path):
    proc = _run_all(tmp_path, "--fast")
    assert proc.returncode == 2 and "--fast" in proc.stderr
