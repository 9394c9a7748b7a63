"""python -m tensorbrain.distributed.timeline merge|plot, and TB_TIMELINE saying where it wrote."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _trace(path, rank, start):
    path.write_text(json.dumps({"traceEvents": [
        {"name": "thread_name", "ph": "M", "pid": rank, "tid": 1,
         "args": {"name": "collectives default"}},
        {"name": "all_reduce", "cat": "collectives", "ph": "X", "pid": rank, "tid": 1,
         "ts": start, "dur": 300.0, "args": {"group": "default", "seq": 0, "bytes": 64}}]}))
    return str(path)


def _cli(*argv):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tensorbrain.distributed.timeline", *argv],
                          capture_output=True, text=True, timeout=120, env=env, cwd="/")


def test_merge_from_the_command_line(tmp_path):
    files = [_trace(tmp_path / "a.json", 0, 1000.0), _trace(tmp_path / "b.json", 1, 1250.0)]
    out = tmp_path / "m.json"
    proc = _cli("merge", "-o", str(out), *files)
    assert proc.returncode == 0, proc.stderr
    assert f"merged 2 file(s), 2 events, into {out}" in proc.stdout
    waits = {e["pid"]: e["args"]["wait_us"] for e in json.loads(out.read_text())["traceEvents"]
             if e["ph"] == "X"}
    assert waits == {0: 250.0, 1: 0.0}  # rank 0 waited for rank 1, 250 us later


def test_plot_from_the_command_line(tmp_path):
    pytest.importorskip("matplotlib")
    files = [_trace(tmp_path / "a.json", 0, 1000.0), _trace(tmp_path / "b.json", 1, 1250.0)]
    proc = _cli("plot", "-o", str(tmp_path / "t.png"), *files)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_file_is_a_usage_error(tmp_path):
    proc = _cli("merge", "-o", str(tmp_path / "m.json"), str(tmp_path / "nope.json"))
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_tb_timeline_says_where_it_wrote_at_exit(tmp_path):
    code = ("import tensorbrain as tb, tensorbrain.distributed as dist\n"
            "dist.init_process_group('tcp', init_method='env://')\n"
            "dist.all_reduce(tb.ones(2))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env.update(PYTHONPATH=str(ROOT), TB_TIMELINE=str(tmp_path / "tl.json"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, cwd="/")
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / "tl.rank0.json"
    assert f"tensorbrain: timeline written to {path}" in proc.stderr
    names = [e["name"] for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    assert "all_reduce" in names
