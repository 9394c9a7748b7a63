"""``tbrun --fault_tolerant``: a failed worker is replaced alone and the replacement joins the
running workers; with ``--nnodes MIN:MAX`` a node that arrives after the round closed adds its
workers to the running job. Real tbrun processes, real SIGKILL, hard timeouts."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from tensorbrain.testing.distributed import free_port

ROOT = Path(__file__).resolve().parents[3]


def _env(**ft):
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env.update(PYTHONPATH=str(ROOT), **{k: str(v) for k, v in ft.items()})
    return env


def _tbrun(args, env, log_dir):
    return subprocess.Popen([sys.executable, "-m", "tensorbrain.distributed.run", *args, "-m",
                             "tests.distributed.ft.replica",
                             str(log_dir / "r${local_rank}.jsonl")], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _by_process(path):
    """The JSON lines of one log file, per process (a replacement appends to its slot's file)."""
    runs, cur = [], None
    for line in path.read_text().splitlines():
        e = json.loads(line)
        if "start" in e:
            cur = []
            runs.append(cur)
        cur.append(e)
    return runs


def test_tbrun_replaces_a_killed_worker_and_it_joins_live(tmp_path):
    env = _env(FT_STEPS=50, FT_PAUSE=0.15, FT_SEED=7, FT_TIMEOUT=5, FT_KILL_AT=8, FT_VICTIM=1)
    p = _tbrun(["--standalone", "--nproc_per_node", "3", "--fault_tolerant",
                "--max_restarts", "1"], env, tmp_path)
    out, _ = p.communicate(timeout=180)
    assert p.returncode == 0, out
    assert "starting a replacement" in out and "SIGKILL" in out, out
    slot1 = _by_process(tmp_path / "r1.jsonl")
    assert len(slot1) == 2, out  # the victim, then its replacement
    victim, repl = slot1
    assert not any("final" in e for e in victim)
    finals = [next(e for e in _by_process(tmp_path / f"r{i}.jsonl")[-1] if "final" in e)
              for i in (0, 1, 2)]
    for f in finals[1:]:
        for a, b in zip(finals[0]["final"], f["final"]):
            assert np.array_equal(np.asarray(a), np.asarray(b))
    survivor = [e for e in _by_process(tmp_path / "r0.jsonl")[0] if "loss" in e]
    assert survivor[-1]["world"] == 3 and any(e["world"] == 2 for e in survivor), survivor
    joined = next(e for e in repl if "joined_at" in e)
    assert joined["joined_at"] - joined["start"] <= 10.0, joined


def test_a_late_node_joins_the_running_job(tmp_path):
    port = free_port()
    env = _env(FT_STEPS=60, FT_PAUSE=0.15, FT_SEED=7, FT_TIMEOUT=5)
    common = ["--nnodes", "1:2", "--master_addr", "127.0.0.1", "--master_port", str(port),
              "--fault_tolerant", "--rdzv_conf", "last_call_timeout=1"]
    first = _tbrun([*common, "--nproc_per_node", "2"], dict(env, WORLD_SIZE="2"), tmp_path)
    try:
        (tmp_path / "late").mkdir()
        end = time.monotonic() + 60
        log = tmp_path / "r0.jsonl"
        while time.monotonic() < end and not (log.exists() and "loss" in log.read_text()):
            time.sleep(0.1)
        late = _tbrun([*common, "--nproc_per_node", "1"], env, tmp_path / "late")
        out_late, _ = late.communicate(timeout=180)
        out, _ = first.communicate(timeout=180)
    finally:
        for proc in (first,):
            if proc.poll() is None:
                proc.kill()
    assert late.returncode == 0 and first.returncode == 0, out + out_late
    assert "join the running ones" in out_late, out_late
    steps = [e for e in _by_process(tmp_path / "r0.jsonl")[0] if "loss" in e]
    assert steps[0]["world"] == 2 and steps[-1]["world"] == 3, steps
    finals = [next(e for e in _by_process(p)[-1] if "final" in e)
              for p in (tmp_path / "r0.jsonl", tmp_path / "late" / "r0.jsonl")]
    for a, b in zip(finals[0]["final"], finals[1]["final"]):
        assert np.array_equal(np.asarray(a), np.asarray(b))
