"""tb-collectives: every nccl-tests flag with nccl-tests' meaning (2 ranks, small sizes).

Timing goals are not asserted; the #wrong counts (exact references) and the structure are."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tensorbrain.benchmarks import collectives as cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = "tests.benchmarks.test_collectives_cli"


def _env():
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    env.pop("TB_RAW_ESCAPE", None)
    return env


def _run(*argv, timeout=150):
    return subprocess.run([sys.executable, "-m", "tensorbrain.benchmarks.collectives", *argv],
                          capture_output=True, text=True, timeout=timeout, env=_env(), cwd=ROOT)


# ***** parsing: nccl-tests' names and meanings *****
def test_datatype_names_follow_nccl_tests():
    assert cli.numpy_dtype(cli.parse_args(["-d", "float"]).datatypes[0]) == np.float32
    assert cli.numpy_dtype(cli.parse_args(["--dtype", "float"]).datatypes[0]) == np.float32
    assert cli.numpy_dtype(cli.parse_args(["-d", "double"]).datatypes[0]) == np.float64
    assert cli.numpy_dtype(cli.parse_args(["-d", "half"]).datatypes[0]) == np.float16
    assert cli.parse_args(["-d", "all"]).datatypes == [
        "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
        "bfloat16"]
    pytest.importorskip("ml_dtypes")
    assert cli.numpy_dtype("bfloat16").name == "bfloat16"


def test_ops_and_collective_selection():
    assert cli.parse_args(["-o", "all"]).redops == ["sum", "prod", "min", "max", "avg"]
    assert cli.parse_args(["-o", "max"]).redops == ["max"]
    assert cli.parse_args(["all_gather"]).collective == "all_gather"
    assert cli.parse_args(["--collective", "reduce"]).collective == "reduce"
    assert cli.parse_args([]).collective == "all_reduce"
    old = cli.parse_args(["--op", "gather", "--redop", "min"])  # the old spelling still works
    assert old.collective == "gather" and old.redops == ["min"]


@pytest.mark.parametrize("argv,message", [
    (["-g", "2"], "-g 2: tb-collectives drives one device per process"),
    (["-d", "float128"], "unknown datatype 'float128'; nccl-tests' names: int8"),
    (["-o", "mean"], "unknown reduction op 'mean'"),
    (["-f", "2", "-i", "8"], "give -f (step factor) or -i (step bytes), not both"),
    (["all_reduce", "--collective", "broadcast"], "two collectives given"),
    (["-a", "4"], "invalid choice: 4"),
    (["-z", "2"], "invalid choice: 2"),
    (["-b", "8X"], "-b 8X: not a size"),
    (["-e", "lots"], "-e lots: not a size"),
    (["-b", "1M", "-e", "8"], "-b 1M is larger than -e 8: no size to run"),
    (["-J", "out.txt"], "-J out.txt: nccl-tests infers the format from the suffix"),
    (["-t", "2"], "-t/--nthreads 2: an nccl-tests flag tb-collectives does not support"),
    (["-m", "4"], "-m/--agg_iters 4: an nccl-tests flag"),
    (["-N", "0"], "-N/--run_cycles 0: an nccl-tests flag"),
    (["-G", "1"], "-G/--cudagraph 1: an nccl-tests flag"),
    (["-S", "1"], "-S/--report_timestamps 1: an nccl-tests flag"),
    (["-I", "1"], "-I/--per_iter_timing 1: an nccl-tests flag"),
])
def test_bad_flags_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_nccl_tests_flags_at_their_default_are_accepted():
    args = cli.parse_args(["-t", "1", "-m", "1", "-N", "1", "-G", "0", "-S", "0", "-I", "0",
                           "-J", "r.json", "all_gather"])
    assert args.collective == "all_gather" and args.output_file == "r.json"


def test_plot_without_matplotlib_is_a_usage_error_before_anything_runs(tmp_path):
    shim = tmp_path / "matplotlib.py"  # an environment whose matplotlib does not import
    shim.write_text("raise ImportError('no matplotlib here')\n")
    env = dict(_env(), PYTHONPATH=f"{tmp_path}:{ROOT}")
    proc = subprocess.run([sys.executable, "-m", "tensorbrain.benchmarks.collectives", "--plot",
                           str(tmp_path / "p.png")], capture_output=True, text=True, timeout=60,
                          env=env, cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "--plot needs matplotlib" in proc.stderr


def test_sizes_step_factor_and_step_bytes():
    assert cli.sizes_of(cli.parse_args(["-b", "8", "-e", "64", "-f", "2"])) == [8, 16, 32, 64]
    assert cli.sizes_of(cli.parse_args(["-b", "8", "-e", "40", "-i", "16"])) == [8, 24, 40]
    assert cli.sizes_of(cli.parse_args(["-b", "1K", "-e", "4K"])) == [1024, 2048, 4096]
    assert cli.parse_args(["-g", "1"]).ngpus == 1


# ***** -a: how ranks' times are combined *****
def _combined(rank, world):
    return [cli._combine(mode, world)(float(rank + 1)) for mode in (0, 1, 2, 3)]


def test_average_flag_combines_as_nccl_tests(workers):
    # rank r reports r + 1: rank 0's value, the mean, the minimum, the maximum
    assert workers(f"{HERE}:_combined", 2) == [[1.0, 1.5, 1.0, 2.0]] * 2


# ***** real runs *****
def test_run_every_reduction_two_dtypes_nonblocking_cputime_json(tmp_path):
    out = tmp_path / "r.jsonl"
    proc = _run("all_reduce", "-b", "8", "-e", "48", "-i", "16", "-n", "2", "-w", "1",
                "-d", "float,int8", "-o", "all", "-a", "1", "-z", "0", "-C", "1",
                "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "# Out of bounds values : 0 OK" in proc.stdout
    assert "blocking: 0 time: cpu" in proc.stdout and "average of ranks" in proc.stdout
    # -b/-e as given, as nccl-tests prints them (the rows stop at 40, below -e 48)
    assert "minBytes 8 maxBytes 48 step: 16(bytes)" in proc.stdout
    assert "[rank" not in proc.stdout
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    meta = lines[0]
    assert meta["kind"] == "metadata" and meta["world_size"] == 2 and meta["backend"] == "tcp"
    for key in ("host", "date", "python", "numpy", "tensorbrain", "argv", "platform"):
        assert meta[key], key
    assert meta["argv"][:1] == ["all_reduce"] and meta["blocking"] is False
    assert meta["average"] == "average" and meta["time"] == "cpu" and meta["stat"] == "mean"
    rows = [r for r in lines[1:] if r["kind"] == "result"]
    # the tcp backend averages floating-point types only: int8/avg is reported, not run
    want = {(t, o) for t in ("float", "int8") for o in ("sum", "prod", "min", "max", "avg")}
    want.discard(("int8", "avg"))
    assert {(r["type"], r["redop"]) for r in rows} == want
    assert [(r["type"], r["redop"]) for r in lines if r["kind"] == "skipped"] == [("int8", "avg")]
    assert "# int8 avg: not supported by the tcp backend" in proc.stdout
    assert {r["size"] for r in rows} == {8, 24, 40}
    assert all(r["wrong"] == 0 for r in rows)
    table = [x.split() for x in proc.stdout.splitlines() if x and not x.startswith("#")]
    assert {(t[2], t[3]) for t in table} == want


def test_size_error_under_tbrun_is_one_usage_error():
    # it printed both ranks' tracebacks interleaved
    proc = subprocess.run(
        [sys.executable, "-m", "tensorbrain.distributed.run", "--standalone", "--nproc_per_node",
         "2", "-m", "tensorbrain.benchmarks.collectives", "-b", "8X"], capture_output=True,
        text=True, timeout=150, env=_env(), cwd=ROOT)
    assert proc.returncode == 1  # tbrun: a worker failed (with code 2)
    assert "Traceback" not in proc.stderr
    # said by rank 0 only (tbrun's summary quotes it once more, as the failing rank's stderr)
    assert proc.stderr.count("[rank 0] tb-collectives: error: -b 8X: not a size") == 1
    assert "[rank 1] tb-collectives: error" not in proc.stderr, proc.stderr
    assert "exited with code 2" in proc.stderr


def test_nccl_tests_json_output(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("kept")  # as nccl-tests: an existing file is not replaced, .0 is written
    proc = _run("all_reduce", "-b", "8", "-e", "32", "-n", "1", "-w", "0", "-d", "float,int8",
                "-o", "avg", "-J", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"# Writing JSON output to {out}.0" in proc.stdout and out.read_text() == "kept"
    doc = json.loads((tmp_path / "r.json.0").read_text())
    assert doc["version"] == 3 and doc["args"][1:4] == ["all_reduce", "-b", "8"]
    assert {"start_time", "end_time", "env", "nccl_version"} <= set(doc)
    cfg = doc["config"]
    assert (cfg["minimum_bytes"], cfg["maximum_bytes"], cfg["step_factor"], cfg["iterations"],
            cfg["warmup_iters"], cfg["blocking_collectives"]) == (8, 32, 2, 1, 0, "true")
    assert [d["rank"] for d in cfg["devices"]] == [0, 1]
    # int8/avg is not supported: float rows only, one per size, both placements
    assert [(r["size"], r["type"], r["redop"], r["root"]) for r in doc["results"]] == [
        (8, "float", "avg", "    -1"), (16, "float", "avg", "    -1"),
        (32, "float", "avg", "    -1")]
    for r in doc["results"]:
        assert r["count"] == r["size"] // 4 and r["actual_iterations"] == 1
        for place in ("out_of_place", "in_place"):
            p = r[place]
            assert set(p) == {"time", "alg_bw", "bus_bw", "nwrong"} and p["nwrong"] == 0
            assert abs(p["alg_bw"] - r["size"] / p["time"] / 1e3) < 1e-9 * max(1, p["alg_bw"])
            assert abs(p["bus_bw"] - p["alg_bw"]) < 1e-12  # all_reduce on 2 ranks: factor 1
    assert doc["out_of_bounds"] == {"count": 0, "okay": "true"}
    assert doc["average_bus_bandwidth"]["okay"] == "unchecked"
    # the skipped pair is listed once, after the table, with one column header for the run
    assert proc.stdout.count("#       size") == 1
    tail = proc.stdout[proc.stdout.index("# skipped 1 datatype/op pair(s):"):]
    assert "# int8 avg: not supported by the tcp backend" in tail


def test_nothing_to_run_exits_2():
    proc = _run("all_reduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "-d", "int8", "-o",
                "avg")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "# nothing ran" in proc.stdout and "#       size" not in proc.stdout


def test_unsupported_dtype_is_reported_not_a_traceback():
    pytest.importorskip("ml_dtypes")
    proc = _run("all_reduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "-d", "bfloat16")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "# bfloat16 sum: not supported by the tcp backend" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_rooted_collective_with_root_flag_and_bfloat16_broadcast():
    pytest.importorskip("ml_dtypes")
    proc = _run("--collective", "broadcast", "-b", "8", "-e", "16", "-n", "1", "-w", "0",
                "-r", "1", "-d", "bfloat16,double")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [x.split() for x in proc.stdout.splitlines() if x and not x.startswith("#")]
    assert {r[2] for r in rows} == {"bfloat16", "double"}
    assert all(r[3] == "none" and r[4] == "1" and r[8] == "0" and r[12] == "0" for r in rows)


def test_under_tbrun_rows_have_no_rank_prefix():
    proc = subprocess.run(
        [sys.executable, "-m", "tensorbrain.distributed.run", "--standalone", "--nproc_per_node",
         "2", "-m", "tensorbrain.benchmarks.collectives", "all_gather", "-b", "8", "-e", "8",
         "-n", "1", "-w", "0"], capture_output=True, text=True, timeout=150, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [x for x in proc.stdout.splitlines() if x.strip() and not x.startswith("#")]
    assert len(rows) == 1 and rows[0].split()[0] == "8", proc.stdout
    assert "[rank" not in proc.stdout and "\x1e" not in proc.stdout
    assert proc.stdout.count("# Out of bounds values : 0 OK") == 1


@pytest.mark.parametrize("backend", ["tcp", "mpi"])
def test_check_cost_prints_what_the_always_on_check_costs(backend, tmp_path):
    # issue 13: the cost of the collective fingerprint, printed by the collective benchmark
    # (figures are not asserted; the table and its records are)
    if backend == "mpi":
        pytest.importorskip("mpi4py")
    out = tmp_path / "r.jsonl"
    proc = _run("all_reduce", "-b", "8", "-e", "8", "-n", "2", "-w", "1", "--backend", backend,
                "--check-cost", "--json", str(out), timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    how = "in band" if backend == "tcp" else "one MPI reduction that carries small all_reduces"
    assert f"# always-on collective check ({how})" in proc.stdout, proc.stdout
    costs = [json.loads(x) for x in out.read_text().splitlines()]
    if backend == "mpi":  # the MPI share of the inline check, raw mpi4py
        assert "# MPI's share (raw mpi4py" in proc.stdout, proc.stdout
        assert [r["size"] for r in costs if r["kind"] == "check_cost_mpi_share"] == ["8 B"]
    costs = [r for r in costs if r["kind"] == "check_cost"]
    assert [r["size"] for r in costs] == ["8 B", "4 MiB"]
    for r in costs:
        assert r["with_us"] > 0 and r["without_us"] > 0
        assert f"#   {r['size']:>4}" in proc.stdout or f"# {r['size']:>6}" in proc.stdout
