"""tensorbrain.horovod: a Horovod-style program (tests/frontdoors/programs) run unchanged under
tbrun --as-torch at 2 ranks ends with the weights one process reaches on the full batch; the
collectives against their definitions at 2 ranks."""
import numpy as np
import pytest

from tensorbrain.testing.distributed import run_workers

from ._run import assert_close, run, weights

PROG = "horovod_train.py"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One process on the full batch (16); the 2-rank runs use 8 each and lr * hvd.size()."""
    tmp = tmp_path_factory.mktemp("hvd_ref")
    run(PROG, "--lr", "0.1", "--batch", "16", "--out", str(tmp / "one.st"))
    return weights(tmp / "one.st")


@pytest.mark.parametrize("extra", [[], ["--backward-passes", "2"]], ids=["plain", "bpps2"])
def test_two_ranks_match_one_process_on_the_full_batch(tmp_path, reference, extra):
    run(PROG, "--lr", "0.05", "--batch", "8", *extra, "--out", str(tmp_path / "two.st"), nproc=2)
    assert_close(reference, weights(tmp_path / "two.st"))


def test_horovod_timeline_writes_the_timeline(tmp_path, reference):
    """HOROVOD_TIMELINE, as Horovod programs set it: rank 0's Chrome trace at the path itself,
    rank 1's beside it; both record the gradient all-reduces, and training is unchanged."""
    import json
    path = tmp_path / "timeline.json"
    run(PROG, "--lr", "0.05", "--batch", "8", "--out", str(tmp_path / "two.st"), nproc=2,
        env={"HOROVOD_TIMELINE": str(path)})
    assert_close(reference, weights(tmp_path / "two.st"))
    for rank, file in ((0, path), (1, tmp_path / "timeline.rank1.json")):
        events = json.loads(file.read_text())["traceEvents"]
        reduces = [e for e in events if e.get("name") == "all_reduce" and e["ph"] == "X"]
        assert reduces and all(e["pid"] == rank for e in reduces), file


def test_small_fusion_buffers_still_match(tmp_path, reference):
    run(PROG, "--lr", "0.05", "--batch", "8", "--out", str(tmp_path / "two.st"), nproc=2,
        env={"HOROVOD_FUSION_THRESHOLD": "64"})
    assert_close(reference, weights(tmp_path / "two.st"))


def test_fp16_compression_stays_finite_and_close(tmp_path, reference):
    run(PROG, "--lr", "0.05", "--batch", "8", "--fp16-allreduce", "--out",
        str(tmp_path / "fp16.st"), nproc=2)
    low = weights(tmp_path / "fp16.st")
    for v in low.values():
        assert np.isfinite(v).all()
    assert_close(reference, low, rtol=0, atol=5e-3)


def test_collectives_at_two_ranks():
    r0, r1 = run_workers("tests.frontdoors._hvd_cases:collectives", 2, timeout=60)
    assert r0["avg"] == r1["avg"] == [1.5, 15.0]
    assert r0["sum"] == [3.0, 30.0] and r0["max"] == [2.0, 20.0] and r0["x_kept"] == [1.0, 10.0]
    assert r0["inplace"] == [3.0, 30.0] and r1["async"] == [1.5, 15.0]
    assert r0["fp16"] == [1.5, 15.0]
    assert r0["gather"] == r1["gather"] == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]
    assert r0["bcast"] == [2.0, 20.0]
    # rank 0 sent [0] to 0 and [1] to 1; rank 1 sent [100, 101] to 0 and [102] to 1
    assert r0["alltoall"] == [0.0, 100.0, 101.0] and r0["splits"] == [1, 2]
    assert r1["alltoall"] == [1.0, 102.0] and r1["splits"] == [1, 1]
    assert r0["even_alltoall"] == [0.0, 1.0, 10.0, 11.0]
    assert r0["rs"] == [[0.0, 3.0], [6.0, 9.0]] and r1["rs"] == [[12.0, 15.0]]
    assert r0["obj"] == {"a": [1, 1]} and r0["objs"] == ["r0", "r1"]
    assert "Adasum is not supported" in r0["adasum"]
    assert r0["join"] == r1["join"]


def test_tensor_fusion_launches_from_hooks_during_backward():
    r0, _ = run_workers("tests.frontdoors._hvd_cases:fusion_buckets", 2, 10 ** 9, timeout=60)
    assert r0["buckets"] == [[3, 2, 1, 0]] and r0["launched"] == 1   # one fused all-reduce
    assert r0["raced"] and r0["is_sgd"]
    r0, _ = run_workers("tests.frontdoors._hvd_cases:fusion_buckets", 2, 64, timeout=60)
    assert len(r0["buckets"]) > 1 and r0["launched"] == len(r0["buckets"])


def test_the_program_runs_under_mpiexec(tmp_path, reference):
    """Horovod's usual launcher: ``mpiexec -n 2`` (skipped when it is not installed)."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from ._run import PROGRAMS, ROOT
    mpiexec = Path(sys.executable).parent / "mpiexec"
    mpiexec = str(mpiexec) if mpiexec.exists() else shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec is not installed")
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
              "MASTER_PORT", "TENSORBRAIN_AS_TORCH"):
        env.pop(k, None)
    out = subprocess.run([mpiexec, "-n", "2", sys.executable, "-m", "tensorbrain.as_torch",
                          "--quiet", os.path.join(PROGRAMS, PROG), "--lr", "0.05", "--batch", "8",
                          "--out", str(tmp_path / "mpi.st")], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert_close(reference, weights(tmp_path / "mpi.st"))


def test_the_program_runs_under_tbruns_horovodrun_options(tmp_path, reference):
    """horovodrun's command with the launcher's name changed: ``tbrun -np 2 -H localhost:2``
    (a host list naming only this machine runs locally, no ssh)."""
    import os
    import subprocess
    import sys

    from ._run import PROGRAMS, ROOT
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
              "MASTER_PORT", "TENSORBRAIN_AS_TORCH"):
        env.pop(k, None)
    out = subprocess.run([sys.executable, "-m", "tensorbrain.distributed.run", "--as-torch",
                          "-np", "2", "-H", "localhost:2", "python",
                          os.path.join(PROGRAMS, PROG), "--lr", "0.05", "--batch", "8",
                          "--out", str(tmp_path / "hvdrun.st")], env=env, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert_close(reference, weights(tmp_path / "hvdrun.st"))
