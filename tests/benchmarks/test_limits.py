"""benchmarks/limits.py, the one command for issue 22's figures: it runs end to end (no DDP
part, one short round), writes its JSON and a plot per figure, and its summary compares each
figure with the right anchor in the right direction. No timing is asserted."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import limits  # noqa: E402
import limits_netns  # noqa: E402


def test_summary_ratios_and_goals():
    sizes = [8, 64 << 10, 4 << 20]
    times = {"shm": [2e-6, 10e-6, 400e-6], "mpi": [2e-6, 40e-6, 600e-6],
             "tcp": [50e-6, 100e-6, 2e-3], "gloo": [250e-6, 500e-6, 4e-3]}
    ddp = {"tb": {"eff": 0.96, "N": 0.019}, "torch": {"eff": 0.9, "N": 0.025}}
    rows = {r["figure"]: r for r in limits.summarize(times, sizes, {"tcp": 2.5}, ddp)}
    lat = rows["8 B all_reduce, tb.distributed"]
    assert lat["ratio"] == pytest.approx(1.0) and lat["met"]
    mid = rows["64 KiB busbw, tb.distributed"]
    assert mid["ratio"] == pytest.approx(4.0) and mid["met"]
    assert not rows["4 MiB busbw, tb.distributed"]["met"]  # 1.5x < 2x
    sock = rows["8 B all_reduce, sockets (TB_SHM=0)"]
    assert sock["ratio"] == pytest.approx(0.2) and sock["met"]
    stream = rows["4 MiB busbw, sockets (TB_SHM=0)"]
    assert stream["ours"] == pytest.approx(limits.busbw(4 << 20, 2e-3))
    assert stream["ratio"] == pytest.approx(stream["ours"] / 2.5) and not stream["met"]
    assert rows["DDP efficiency, 2 ranks, MLP B=512"]["met"]
    assert rows["DDP step, 2 ranks, MLP B=512"]["ratio"] == pytest.approx(0.76)


def test_missing_anchor_is_not_a_met_goal():
    rows = limits.summarize({"shm": [2e-6]}, [8], {}, None)
    assert rows[0]["anchor"] is None and rows[0]["ratio"] is None and not rows[0]["met"]


def test_stream_limit_moves_the_bytes():
    for family in ("tcp", "unix"):
        assert limits.stream_limit(family, total=8 << 20, chunk=1 << 20) > 0
        assert limits.duplex_limit(family, total=8 << 20, chunk=1 << 20) > 0


def test_one_command_end_to_end(tmp_path):
    out = tmp_path / "limits.json"
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "limits.py"),
                           "--quick", "--no-ddp", "--plots", str(tmp_path), "--json", str(out)],
                          capture_output=True, text=True, timeout=400, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert set(data["times"]) >= {"shm", "shm-general", "shm-raw", "tcp"}
    assert all(len(v) == len(data["sizes"]) for v in data["times"].values())
    assert "| 8 B all_reduce, tb.distributed |" in proc.stdout
    # the part across two network namespaces ran, or said why not
    netns = data["netns"]
    if "skipped" in netns:
        assert "across network namespaces (veth): skipped" in proc.stdout
    else:
        assert netns["limit"] > 0 and len(netns["times"]["tcp"]) == 4
        assert "| 4 MiB busbw, sockets across netns |" in proc.stdout
    pytest.importorskip("matplotlib")
    for name in ("limits_latency.png", "limits_mid_sizes.png", "limits_sockets.png"):
        assert (tmp_path / name).stat().st_size > 0


def test_netns_rows_compare_with_the_veth_limit_and_gloo(capsys):
    sizes = [8, 4 << 20]
    res = {"limit": 2.0, "times": {"tcp": [50e-6, 4e-3], "gloo": [400e-6, 8e-3]}}
    rows = {r["figure"]: r for r in limits_netns.report(res, sizes, 4 << 20)}
    lat = rows["8 B all_reduce, sockets across netns"]
    assert lat["ratio"] == pytest.approx(0.125) and lat["met"]
    bw = rows["4 MiB busbw, sockets across netns"]
    assert bw["ours"] == pytest.approx((4 << 20) / 4e-3 / 1e9)
    assert bw["ratio"] == pytest.approx(bw["ours"] / 2.0) and not bw["met"]
    assert limits_netns.report({"skipped": "needs root"}, sizes, 4 << 20) == []
    assert "skipped, needs root" in capsys.readouterr().out
