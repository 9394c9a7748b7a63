"""The mpi backend in real MPI jobs: ``mpiexec -n 2/3/4`` running ``mpi_worker.py``.

Each world runs the shared collective suite (the same ``check_*`` functions as the tcp backend)
plus the MPI-specific checks in one job, so the cost of starting MPI is paid once per world size.
Skipped cleanly when mpi4py or ``mpiexec`` is missing (``pip install tensorbrain[mpi]`` brings
both: mpi4py and the mpich wheel). Every job has a hard timeout; ``mpiexec`` is killed with its
process group if it passes it.
"""
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tensorbrain.distributed.backends import mpi as mpi_backend

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().parent / "mpi_worker.py"


def _mpiexec() -> str | None:
    sibling = Path(sys.executable).parent / "mpiexec"  # the mpich wheel installs it next to python
    return str(sibling) if sibling.exists() else shutil.which("mpiexec")


MPIEXEC = _mpiexec()
pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not mpi_backend.is_available(), reason=str(mpi_backend.why_unavailable())),
    pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH (pip install mpich)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(n: int | None, scenario: str, timeout: float = 60.0, out_dir=None, **env):
    """``mpiexec -n n python mpi_worker.py scenario`` (``n=None``: plain python, a singleton).
    Returns (exit status, combined output, seconds); with ``out_dir`` each rank also writes its
    PASS lines to ``out_dir/rank<r>.txt``."""
    cmd = [sys.executable, str(WORKER), scenario]
    if n is not None:
        cmd = [MPIEXEC, "-n", str(n)] + cmd
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(_free_port()), "OMP_NUM_THREADS": "1", **env}
    if out_dir is not None:
        full_env["TB_MPI_TEST_OUT"] = str(out_dir)
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        full_env.pop(key, None)  # a torchrun-style variable would outrank MPI's
    before = _mpich_segments()
    try:
        return run_cmd(cmd, full_env, timeout, cwd=ROOT)
    finally:
        # MPICH does not unlink its shared-memory segment when a job ends through MPI_Abort (the
        # dead-rank and timeout jobs do so on purpose): remove what this job left behind, so the
        # suite leaves /dev/shm clean. The job's processes are gone by now.
        for path in _mpich_segments() - before:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def _mpich_segments() -> set:
    return set(glob.glob("/dev/shm/mpich_shm_*"))


def run_cmd(cmd, env, timeout, cwd):
    """Run ``cmd`` in its own session; on timeout kill the whole session (mpiexec, its proxies
    and every rank) and fail. Returns (exit status, combined output, seconds)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=str(cwd), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not finish within {timeout} s:\n{out}")
    return proc.returncode, out, time.monotonic() - start


def _passed(out_dir: Path, rank: int) -> list:
    path = out_dir / f"rank{rank}.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.split()[1] for line in lines if line.startswith("PASS ")]


@pytest.mark.parametrize("n", [2, 3, pytest.param(4, marks=pytest.mark.slow)])
def test_collective_suite_and_mpi_checks_under_mpiexec(n, tmp_path):
    code, out, _ = run_job(n, "suite", out_dir=tmp_path)
    assert code == 0, out
    per_rank = [_passed(tmp_path, r) for r in range(n)]
    assert all(p == per_rank[0] for p in per_rank), (per_rank, out)  # every check on every rank
    names = per_rank[0]
    assert any(name.startswith("suite.") for name in names), out
    assert "mpi.check_float16_against_numpy" in names
    assert "mpi.check_mpi_error_becomes_dist_backend_error" in names


@pytest.mark.parametrize("env", [{"TB_MPI_INLINE_CHECK": "0"}, {"TB_FASTPATH": "0"}],
                         ids=["all-gather-check", "no-fast-path"])
def test_the_suite_with_the_all_gather_check_or_without_the_fast_path(env, tmp_path):
    # TB_MPI_INLINE_CHECK=0: the check all-gathers fingerprints beside each collective instead
    # of reducing one message that carries small all_reduces (the default, tested above);
    # TB_FASTPATH=0: dist.all_reduce takes the general path to the same inline check.
    code, out, _ = run_job(2, "suite", out_dir=tmp_path, **env)
    assert code == 0, out
    assert "PASS mpi.check_default_group_mismatch_last" in (tmp_path / "rank1.txt").read_text(), out


@pytest.mark.parametrize("setting, mode", [("TB_MPI_INLINE_CHECK=0", "inline"),
                                           ("TB_DISTRIBUTED_DEBUG=DETAIL", "detail")])
def test_ranks_agree_on_the_check_when_the_group_is_made(setting, mode, tmp_path):
    # The setting on rank 0 only (mpiexec's MPMD form): the inline check falls back to the
    # all-gather on every rank; DETAIL on some ranks only is an error on every rank.
    key, value = setting.split("=")
    cmd = [MPIEXEC, "-n", "1", "-env", key, value, sys.executable, str(WORKER), "modes", ":",
           "-n", "1", sys.executable, str(WORKER), "modes"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TB_MPI_MODES": mode,
           "TB_MPI_TEST_OUT": str(tmp_path), "TB_MPI_ABORT_ON_ERROR": "0"}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TB_MPI_INLINE_CHECK",
              "TB_DISTRIBUTED_DEBUG"):
        env.pop(k, None)
    code, out, _ = run_cmd(cmd, env, 60, ROOT)
    assert code == 0, out
    for rank in (0, 1):
        assert "PASS modes" in (tmp_path / f"rank{rank}.txt").read_text(), out


def test_without_mpiexec_is_a_world_of_one():
    code, out, _ = run_job(None, "suite")
    assert code == 0, out
    assert "PASS mpi.check_float16_against_numpy" in out


def test_a_dead_rank_ends_the_job_instead_of_hanging():
    code, out, elapsed = run_job(3, "dead", timeout=60)
    assert code != 0, out
    assert "rank 1 dies on purpose" in out and "MPI_Abort" in out, out
    assert "UNREACHABLE" not in out
    assert elapsed < 30, elapsed


def test_a_missing_peer_times_out_with_dist_timeout_error(tmp_path):
    code, out, _ = run_job(2, "timeout", timeout=60, out_dir=tmp_path)
    assert "PASS timeout after" in out, out
    for rank in (0, 1):  # the late rank is named on rank 0 and told so on rank 1
        assert "PASS monitored_barrier" in (tmp_path / f"rank{rank}.txt").read_text()
    assert "did not finish within the group timeout of 1 s" in out
    assert "PASS Work.wait timeout" in (tmp_path / "rank0.txt").read_text()


def test_a_lower_thread_level_is_respected(tmp_path):
    code, out, _ = run_job(2, "thread_levels", timeout=60, out_dir=tmp_path)
    assert code == 0, out
    for rank in (0, 1):
        assert "PASS funneled" in (tmp_path / f"rank{rank}.txt").read_text(), out


def test_import_tensorbrain_does_not_import_mpi4py():
    code = ("import sys, tensorbrain, tensorbrain.distributed as d; "
            "print(d.is_mpi_available(), 'mpi4py' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert out.stdout.split() == ["True", "False"], out.stderr


def test_mpi_backend_under_a_non_mpi_launcher_is_refused():
    # tbrun/torchrun-style variables say 2 ranks, but MPI sees a singleton: an error, not two
    # silent worlds of one.
    code = ("import tensorbrain.distributed as d\n"
            "try:\n    d.init_process_group('mpi')\nexcept RuntimeError as e:\n    print(e)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RANK": "1", "WORLD_SIZE": "2"}
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True,
                         env=env, timeout=60)
    assert "MPI sees a single process" in out.stdout and "mpiexec -n 2" in out.stdout, out


def test_the_docs_example_runs_under_mpiexec(tmp_path):
    # docs/mpi.md's first python block is train.py; tests/test_docs.py runs it as a singleton,
    # here it runs as the 3-rank job the page describes.
    text = (ROOT / "docs" / "mpi.md").read_text()
    block = text.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "train.py"
    script.write_text(block)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(key, None)
    code, out, _ = run_cmd([MPIEXEC, "-n", "3", sys.executable, str(script)], env, 60, tmp_path)
    assert code == 0, out
    # mpiexec merges the ranks' output and may join their lines: look for each rank's words
    assert sorted(re.findall(r"rank (\d) of 3: ok", out)) == ["0", "1", "2"], out


def test_backend_none_picks_mpi_when_asked(tmp_path):
    code = ("import tensorbrain.distributed as d\nd.init_process_group()\n"
            "print(f'backend {d.get_backend()} rank {d.get_rank()}')\nd.destroy_process_group()")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TB_DEFAULT_BACKEND": "mpi"}
    status, out, _ = run_cmd([MPIEXEC, "-n", "2", sys.executable, "-c", code], env, 60, tmp_path)
    assert status == 0, out
    assert sorted(re.findall(r"backend mpi rank (\d)", out)) == ["0", "1"], out
