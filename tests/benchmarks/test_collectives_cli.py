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
])
def test_bad_flags_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


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
