"""Finding 11: launch mistakes are reported, not silent.

* tbrun warns when placement variables it overrides (RANK, WORLD_SIZE, MASTER_PORT, ...) are
  already set, and says when WORLD_SIZE disagrees with the job it launches.
* init_process_group(world_size=3) in a 2-process job: rank 0 reports, every TB_WAIT_REPORT_S
  (1 s here, 30 s by default), which ranks joined and which are missing, then times out naming
  the missing rank within the timeout.
"""
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import tensorbrain.distributed as dist

ROOT = Path(__file__).resolve().parents[3]
HERE = "tests.distributed.faults.test_launch_mistakes"


def test_tbrun_warns_about_placement_variables_it_overrides(tmp_path):
    script = tmp_path / "show.py"
    script.write_text("import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RANK": "0", "WORLD_SIZE": "8",
           "MASTER_PORT": "29999"}
    out = subprocess.run([sys.executable, "-m", "tensorbrain.distributed.run", "--standalone",
                          "--nproc_per_node", "2", str(script)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "RANK=0, WORLD_SIZE=8, MASTER_PORT=29999 are set" in out.stderr, out.stderr
    assert "WORLD_SIZE=8 differs from this job's world size 2" in out.stderr, out.stderr
    assert "--nnodes 4" in out.stderr, out.stderr


def too_big_world_worker(rank, size):
    t0 = time.monotonic()
    try:
        dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}",
                                rank=rank, world_size=size + 1, timeout=timedelta(seconds=4))
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return {"type": type(exc).__name__, "msg": str(exc), "secs": time.monotonic() - t0}
    return {"type": None}


def test_waiting_group_reports_joined_and_missing_ranks(workers):
    res = workers(f"{HERE}:too_big_world_worker", 2, timeout=60, init=None,
                  raise_on_error=False, env={"TB_WAIT_REPORT_S": "1"})
    r0 = res[0]
    assert "joined [0, 1], missing [2]" in r0.output, r0.output
    for r in res:
        assert r.value["type"] is not None and r.value["secs"] < 4 + 1.5, r.value
    assert "rank(s) [2] of world_size 3 did not join" in r0.value["msg"], r0.value
