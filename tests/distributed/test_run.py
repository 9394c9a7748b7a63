"""tbrun with real processes: variables, output, failures, restarts, signals, two nodes, logs."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tensorbrain.distributed.run import UsageError, cleanup_shm, parse_args

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
               "MASTER_ADDR", "MASTER_PORT", "TB_RESTART_COUNT", "TB_USE_AGENT_STORE",
               "OMP_NUM_THREADS", "TB_RUN_ID", "TB_MAX_RESTARTS")


def env(**extra):
    e = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    e["PYTHONPATH"] = str(ROOT)
    e.update(extra)
    return e


def script(tmp_path, body, name="worker.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def tbrun(*args, timeout=40, extra_env=None, **kw):
    """Run tbrun to completion; returns CompletedProcess (hard timeout)."""
    return subprocess.run([sys.executable, "-m", "tensorbrain.distributed.run",
                           "--stop_timeout", "3", *args], env=env(**(extra_env or {})),
                          capture_output=True, text=True, timeout=timeout, **kw)


def start_tbrun(*args, extra_env=None):
    return subprocess.Popen([sys.executable, "-m", "tensorbrain.distributed.run",
                             "--stop_timeout", "3", *args], env=env(**(extra_env or {})),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def two_tbruns(first_args, second_args, delay=0.0, timeout=30):
    """Start tbrun ``first_args`` in the background, after ``delay`` s run tbrun ``second_args``
    to the end, then wait for the first (at most ``timeout`` s; killed if still running).
    Returns ``(first Popen, its stdout, its stderr, second CompletedProcess)``."""
    first = start_tbrun(*first_args)
    try:
        time.sleep(delay)
        second = tbrun(*second_args)
        out, err = first.communicate(timeout=timeout)
    finally:
        if first.poll() is None:
            first.kill()
    return first, out, err, second


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


ENV_DUMP = """
import json, os
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
        "MASTER_ADDR", "MASTER_PORT", "TB_RESTART_COUNT", "TB_MAX_RESTARTS", "TB_RUN_ID",
        "OMP_NUM_THREADS", "TB_USE_AGENT_STORE", "PYTHONUNBUFFERED"]
print("ENV " + json.dumps({k: os.environ.get(k) for k in keys}))
"""


def parse_env_lines(out):
    found = {}
    for line in out.splitlines():
        m = re.fullmatch(r"\[rank (\d+)\] ENV (.*)", line)
        if m:
            found[int(m.group(1))] = json.loads(m.group(2))
    return found


def test_workers_see_the_launch_variables(tmp_path):
    w = script(tmp_path, ENV_DUMP)
    r = tbrun("--standalone", "--nproc-per-node", "3", "--max_restarts", "2", w)
    assert r.returncode == 0, r.stderr
    envs = parse_env_lines(r.stdout)
    assert sorted(envs) == [0, 1, 2]
    run_ids = {e["TB_RUN_ID"] for e in envs.values()}
    ports = {e["MASTER_PORT"] for e in envs.values()}
    assert len(run_ids) == 1 and len(ports) == 1 and ports.pop() != "0"
    for rank, e in envs.items():
        assert e["RANK"] == e["LOCAL_RANK"] == str(rank)
        assert (e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["GROUP_RANK"], e["NODE_RANK"]) == \
            ("3", "3", "0", "0")
        assert (e["MASTER_ADDR"], e["TB_RESTART_COUNT"], e["TB_MAX_RESTARTS"]) == \
            ("127.0.0.1", "0", "2")
        assert (e["OMP_NUM_THREADS"], e["TB_USE_AGENT_STORE"], e["PYTHONUNBUFFERED"]) == \
            ("1", "1", "1")
    assert "OMP_NUM_THREADS=1" in r.stderr  # the notice
    # a user's OMP_NUM_THREADS is kept, and no notice
    r = tbrun("--standalone", "--nproc_per_node", "2", w, extra_env={"OMP_NUM_THREADS": "3"})
    assert {e["OMP_NUM_THREADS"] for e in parse_env_lines(r.stdout).values()} == {"3"}
    assert "OMP_NUM_THREADS=1" not in r.stderr


def test_output_lines_are_prefixed_and_never_interleaved(tmp_path):
    w = script(tmp_path, """
        import os, sys
        r = os.environ["RANK"]
        for i in range(300):
            sys.stdout.write(f"line-{r}-{i} " + "x" * 3000 + "\\n")
        sys.stderr.write(f"err-{r}\\n")
        sys.stdout.write(f"tail-{r}-without-newline")
    """)
    r = tbrun("--standalone", "--nproc_per_node", "3", w)
    assert r.returncode == 0, r.stderr
    counts = {}
    for line in r.stdout.splitlines():
        m = re.fullmatch(r"\[rank (\d)\] (?:line-\1-\d+ x{3000}|tail-\1-without-newline)", line)
        assert m, f"mangled line: {line[:120]!r}"
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    assert counts == {"0": 301, "1": 301, "2": 301}
    for rank in range(3):
        assert f"[rank {rank}] err-{rank}" in r.stderr.splitlines()


def test_module_mode_and_script_args(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text("import os, sys\nprint('args', os.environ['RANK'], sys.argv[1:])\n")
    r = tbrun("--standalone", "--nproc_per_node", "2", "-m", "mypkg.train", "--lr", "0.1", "-x",
              extra_env={"PYTHONPATH": f"{ROOT}:{tmp_path}"})
    assert r.returncode == 0, r.stderr
    for rank in range(2):
        assert f"[rank {rank}] args {rank} ['--lr', '0.1', '-x']" in r.stdout


FAILING = """
import os, signal, sys, time
rank = int(os.environ["RANK"])
print("pid", os.getpid(), flush=True)
if rank == 1:
    time.sleep(0.5)
    print("something went wrong in rank 1", file=sys.stderr)
    print("ValueError: boom", file=sys.stderr, flush=True)
    if sys.argv[1:] == ["segv"]:
        os.kill(os.getpid(), signal.SIGSEGV)
    sys.exit(3)
time.sleep(60)
"""


def test_a_failing_worker_stops_the_others_and_the_summary_names_it(tmp_path):
    w = script(tmp_path, FAILING)
    t0 = time.monotonic()
    r = tbrun("--standalone", "--nproc_per_node", "3", "--stop_timeout", "30", w)
    took = time.monotonic() - t0
    assert r.returncode == 1
    # well under the 30 s grace: SIGTERM itself stopped them, SIGKILL was not needed
    assert took < 15, f"the others were not stopped promptly ({took:.1f} s)"
    assert re.search(r"first failure: rank 1 \(local rank 1 on node 0, .*\) exited with code 3",
                     r.stderr), r.stderr
    assert "    ValueError: boom" in r.stderr and "something went wrong in rank 1" in r.stderr
    pids = [int(x) for x in re.findall(r"\] pid (\d+)", r.stdout)]
    assert len(pids) == 3 and not any(alive(p) for p in pids)


RAISING = """
import os, sys, time
import tensorbrain.distributed  # installs the hook that writes TORCHELASTIC_ERROR_FILE
rank = int(os.environ["RANK"])
print("about to fail", file=sys.stderr, flush=True)
if rank == 1:
    raise ValueError("boom in rank 1")
time.sleep(60)
"""


def test_the_summary_shows_a_traceback_once(tmp_path):
    # it printed the error file's traceback, then the same lines again from the stderr tail
    r = tbrun("--standalone", "--nproc_per_node", "2", script(tmp_path, RAISING))
    assert r.returncode == 1
    summary = r.stderr[r.stderr.index("tbrun: worker failure"):]
    assert summary.count('raise ValueError("boom in rank 1")') == 1, summary
    assert "its uncaught exception (TORCHELASTIC_ERROR_FILE): ValueError: boom in rank 1" in summary
    assert "its other last lines on stderr:\n    about to fail" in summary  # what it printed first
    # streamed once while it ran, once in the summary
    assert r.stderr.count('raise ValueError("boom in rank 1")') == 2


def test_a_bad_environment_value_stops_tbrun_before_any_worker(tmp_path):
    w = script(tmp_path, "print('started', flush=True)\n")
    r = tbrun("--standalone", "--nproc_per_node", "2", w, extra_env={"TB_SHM": "maybe"})
    assert r.returncode != 0 and "started" not in r.stdout
    assert r.stderr.splitlines() == [
        "tensorbrain: error: environment variable TB_SHM='maybe' is invalid: expected a boolean "
        "(1/0, true/false, yes/no, on/off), got 'maybe'"]


def test_a_misspelt_variable_is_named_once_per_job(tmp_path):
    w = script(tmp_path, "import tensorbrain\nprint('started', flush=True)\n")  # workers import it too
    r = tbrun("--standalone", "--nproc_per_node", "2", w, extra_env={"TB_TIMLINE": "t.json"})
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("TB_TIMLINE is not a TensorBrain environment variable and is ignored: "
                          "did you mean TB_TIMELINE?") == 1, r.stderr


def test_a_signal_death_is_named(tmp_path):
    w = script(tmp_path, FAILING)
    r = tbrun("--standalone", "--nproc_per_node", "2", w, "segv")
    assert r.returncode == 1
    assert "rank 1" in r.stderr and "killed by signal SIGSEGV (11)" in r.stderr, r.stderr


def test_restart_increments_the_count_and_scopes_rendezvous(tmp_path):
    # attempt 0 and 1: rank 1 fails after publishing through the store; attempt 2 succeeds and
    # must not see the keys published by the earlier attempts.
    w = script(tmp_path, """
        import os, sys
        from datetime import timedelta
        from tensorbrain.distributed.rendezvous import rendezvous
        store, rank, world = next(rendezvous("env://", timeout=timedelta(seconds=20)))
        attempt = int(os.environ["TB_RESTART_COUNT"])
        stale = store.check(["marker"])  # only an earlier attempt can have set it by now
        print("attempt", attempt, "stale", stale, flush=True)
        store.set(f"addr/{rank}", f"attempt{attempt}")
        store.wait([f"addr/{r}" for r in range(world)])
        if rank == 1 and attempt < 2:
            store.set("marker", "set by a failed attempt")
            sys.exit(7)
    """)
    # with a store secret: tbrun's store and the workers' connections use the handshake
    r = tbrun("--standalone", "--nproc_per_node", "2", "--max_restarts", "3", w,
              extra_env={"TB_STORE_SECRET": "launcher-test"})
    assert r.returncode == 0, r.stderr
    seen = re.findall(r"\[rank 0\] attempt (\d) stale (\w+)", r.stdout)
    assert seen == [("0", "False"), ("1", "False"), ("2", "False")], r.stdout
    assert r.stderr.count("restarting all workers") == 2
    assert "restart 2 of 3" in r.stderr


def test_restarts_exhausted_exit_nonzero(tmp_path):
    w = script(tmp_path, "import sys; sys.exit(5)\n")
    r = tbrun("--standalone", "--nproc_per_node", "1", "--max_restarts", "1", w)
    assert r.returncode == 1 and "after 2 attempt(s)" in r.stderr and "exited with code 5" in r.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_tbrun_leaves_no_process(tmp_path, sig):
    pids = tmp_path / "pids"
    pids.mkdir()
    w = script(tmp_path, f"""
        import os, subprocess, time
        child = subprocess.Popen(["sleep", "60"])  # a grandchild of tbrun
        open(os.path.join({str(pids)!r}, os.environ["RANK"]), "w").write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(60)
    """)
    p = start_tbrun("--standalone", "--nproc_per_node", "2", w)
    try:
        deadline = time.monotonic() + 20
        while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        all_pids = [int(x) for f in pids.iterdir() for x in f.read_text().split()]
        assert len(all_pids) == 4 and all(alive(x) for x in all_pids)
        p.send_signal(sig)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + sig, err
    assert f"received {signal.Signals(sig).name}" in err
    deadline = time.monotonic() + 5
    while any(alive(x) for x in all_pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [x for x in all_pids if alive(x)], "processes outlived tbrun"


TWO_NODE = """
import os
from datetime import timedelta
from tensorbrain.distributed.rendezvous import rendezvous
store, rank, world = next(rendezvous("env://", timeout=timedelta(seconds=20)))
store.set(f"r/{rank}", os.environ["NODE_RANK"] + ":" + os.environ["LOCAL_RANK"])
store.wait([f"r/{r}" for r in range(world)])
print("world", world, [store.get(f"r/{r}").decode() for r in range(world)])
"""


def test_two_nodes_form_one_four_rank_world(tmp_path):
    w = script(tmp_path, TWO_NODE)
    port = str(free_port())
    common = ["--nnodes", "2", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
              "--master_port", port]
    # node 1 may start first
    node1, out1, err1, node0 = two_tbruns([*common, "--node_rank", "1", w],
                                          [*common, "--node-rank", "0", w])
    assert node0.returncode == 0 and node1.returncode == 0, node0.stderr + err1
    expected = "world 4 ['0:0', '0:1', '1:0', '1:1']"
    assert node0.stdout.splitlines() and out1.splitlines()
    for line in node0.stdout.splitlines():
        assert re.fullmatch(rf"\[rank [01]\] {re.escape(expected)}", line)
    for line in out1.splitlines():
        assert re.fullmatch(rf"\[rank [23]\] {re.escape(expected)}", line)


def test_a_failure_on_one_node_stops_the_other(tmp_path):
    w = script(tmp_path, FAILING)  # global rank 1 lives on node 0
    port = str(free_port())
    common = ["--nnodes", "2", "--nproc_per_node", "2", "--master_port", port]
    node1, out1, err1, node0 = two_tbruns([*common, "--node_rank", "1", w],
                                          [*common, "--node_rank", "0", w])
    assert node0.returncode == 1 and node1.returncode == 1
    for err in (node0.stderr, err1):
        assert re.search(r"first failure: rank 1 \(local rank 1 on node 0", err), err


RESTARTING = """
import os, sys
from datetime import timedelta
from tensorbrain.distributed.rendezvous import rendezvous
store, rank, world = next(rendezvous("env://", timeout=timedelta(seconds=20)))
attempt = int(os.environ["TB_RESTART_COUNT"])
store.set(f"r/{rank}", "x")
store.wait([f"r/{r}" for r in range(world)])
print("attempt", attempt, "world", world, flush=True)
if rank == 3 and attempt == 0:
    sys.exit(4)
"""


def test_a_failure_restarts_every_node(tmp_path):
    w = script(tmp_path, RESTARTING)  # global rank 3 lives on node 1 and fails once
    port = str(free_port())
    common = ["--nnodes", "2", "--nproc_per_node", "2", "--master_port", port,
              "--max_restarts", "1"]
    node1, out1, err1, node0 = two_tbruns([*common, "--node_rank", "1", w],
                                          [*common, "--node_rank", "0", w])
    assert node0.returncode == 0 and node1.returncode == 0, node0.stderr + err1
    for out in (node0.stdout, out1):
        assert sorted(re.findall(r"attempt (\d) world 4", out)) == ["0", "0", "1", "1"], out
    for err in (node0.stderr, err1):
        assert "rank 3 (local rank 1 on node 1" in err and "restart 1 of 1" in err


def test_missing_node_and_duplicate_node_rank(tmp_path):
    w = script(tmp_path, "print('hi')\n")
    port = str(free_port())
    r = tbrun("--nnodes", "3", "--master_port", port, "--rdzv_conf", "join_timeout=1", w)
    assert r.returncode == 1
    assert "node(s) [1, 2] of 3 did not join within 1 s" in r.stderr and port in r.stderr
    node0 = start_tbrun("--nnodes", "2", "--master_port", port, "--rdzv_conf", "join_timeout=2", w)
    try:
        time.sleep(0.5)
        # a second "node 0" cannot even serve the store: the port is taken
        dup = tbrun("--nnodes", "2", "--node_rank", "0", "--master_port", port, w)
        assert dup.returncode == 1 and f"port {port}" in dup.stderr and "already in use" in dup.stderr
        node0.communicate(timeout=20)
    finally:
        if node0.poll() is None:
            node0.kill()


def test_node_waits_for_master_then_names_it(tmp_path):
    w = script(tmp_path, "print('hi')\n")
    port = str(free_port())
    t0 = time.monotonic()
    r = tbrun("--nnodes", "2", "--node_rank", "1", "--master_port", port,
              "--rdzv_conf", "join_timeout=1", w)
    assert r.returncode == 1 and f"127.0.0.1:{port}" in r.stderr
    assert time.monotonic() - t0 < 15


def test_elastic_min_max(tmp_path):
    w = script(tmp_path, ENV_DUMP)
    # alone, MIN=1 is enough once the last call passes quietly
    r = tbrun("--nnodes", "1:2", "--master_port", str(free_port()),
              "--rdzv_conf", "last_call_timeout=0.5", w)
    assert r.returncode == 0, r.stderr
    assert parse_env_lines(r.stdout)[0]["WORLD_SIZE"] == "1"
    # two nodes (MAX) with different worker counts: 2 + 1 ranks, node ranks by arrival
    port = str(free_port())
    common = ["--nnodes", "1:2", "--master_port", port, "--rdzv_conf", "last_call_timeout=10"]
    first, out1, err1, second = two_tbruns([*common, "--nproc_per_node", "2", w],
                                           [*common, "--nproc_per_node", "1", w], delay=0.5)
    assert first.returncode == 0 and second.returncode == 0, err1 + second.stderr
    envs = {**parse_env_lines(out1), **parse_env_lines(second.stdout)}
    assert sorted(envs) == [0, 1, 2] and {e["WORLD_SIZE"] for e in envs.values()} == {"3"}
    by_node = {}
    for e in envs.values():
        by_node.setdefault(e["NODE_RANK"], []).append(int(e["LOCAL_WORLD_SIZE"]))
    # whichever node bound the port first is node 0; each node's size matches its worker count
    assert sorted(by_node) == ["0", "1"]
    assert sorted(len(v) for v in by_node.values()) == [1, 2]
    assert all(set(v) == {len(v)} for v in by_node.values())


def test_redirects_tee_log_dir_and_filter(tmp_path):
    w = script(tmp_path, """
        import os, sys
        print("out", os.environ["RANK"]); print("err", os.environ["RANK"], file=sys.stderr)
    """)
    logs = tmp_path / "logs"
    r = tbrun("--standalone", "--nproc_per_node", "2", "--rdzv_id", "job7", "--log_dir", str(logs),
              "-r", "0:1", "--tee", "2", "--local_ranks_filter", "0,1", w)
    assert r.returncode == 0, r.stderr
    base = logs / "job7" / "attempt_0"
    assert (base / "0" / "stdout.log").read_text() == "out 0\n"  # redirected
    assert "[rank 0] out 0" not in r.stdout and "[rank 1] out 1" in r.stdout
    assert (base / "1" / "stderr.log").read_text() == "err 1\n"  # teed: file and console
    assert "[rank 1] err 1" in r.stderr
    r = tbrun("--standalone", "--nproc_per_node", "2", "--local-ranks-filter", "1", w)
    assert "[rank 0]" not in r.stdout + r.stderr and "[rank 1] out 1" in r.stdout


def test_shared_memory_leftovers_are_removed(tmp_path):
    w = script(tmp_path, """
        import os, sys
        open(f"/dev/shm/tb_{os.environ['TB_RUN_ID']}_seg{os.environ['RANK']}", "w").write("x")
        sys.exit(1 if os.environ["RANK"] == "0" else 0)
    """)
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    other = Path("/dev/shm/tb_someoneelse_seg0")
    other.write_text("keep")
    try:
        r = tbrun("--standalone", "--nproc_per_node", "2", "--rdzv_id", "shmtest42", w)
        assert r.returncode == 1
        assert not list(Path("/dev/shm").glob("tb_shmtest42_*"))
        assert other.exists()
    finally:
        other.unlink()
    assert cleanup_shm("") == []


@pytest.mark.parametrize("argv,match", [
    (["--nproc_per_node", "0", "x.py"], "at least 1"),
    (["--nproc_per_node", "many", "x.py"], "expected a number, cpu, gpu or auto"),
    (["--nnodes", "2", "--node_rank", "2", "x.py"], r"--node_rank 2 is out of range for --nnodes 2"),
    (["--nnodes", "3:2", "x.py"], "MIN <= MAX"),
    (["--standalone", "--nnodes", "2", "x.py"], "--standalone runs one node"),
    (["-r", "7", "x.py"], "modes are 0"),
    (["-m", "--no_python", "x"], "exclude each other"),
])
def test_usage_errors(argv, match):
    with pytest.raises(UsageError, match=match):
        parse_args(argv)


def test_usage_error_exit_status(tmp_path):
    r = tbrun("--nproc_per_node", "0", "x.py")
    assert r.returncode == 2 and "tbrun: error: --nproc_per_node 0" in r.stderr


def test_option_spellings_and_values():
    cfg = parse_args(["--nproc-per-node", "cpu", "--rdzv-endpoint", "head:1234", "--max-restarts",
                      "2", "--monitor-interval", "0.5", "--rdzv-backend", "c10d", "--rdzv_id",
                      "abc", "train.py", "--epochs", "3"])
    assert cfg.nproc == (os.cpu_count() or 1)
    assert (cfg.master_addr, cfg.master_port, cfg.max_restarts, cfg.monitor_interval) == \
        ("head", 1234, 2, 0.5)
    assert cfg.run_id == "abc" and cfg.cmd[-3:] == ["train.py", "--epochs", "3"]
    assert parse_args(["--standalone", "t.py"]).master_port == 0
    assert parse_args(["--nproc_per_node", "auto", "t.py"]).nproc >= 1


def test_the_launcher_page_example_runs_under_tbrun(tmp_path):
    """docs/launcher.md's train.py, as 1 process and under tbrun with 3 ranks."""
    page = (ROOT / "docs" / "launcher.md").read_text()
    code = re.findall(r"```python\n(.*?)```", page, re.S)[0]
    w = script(tmp_path, code, "train.py")
    single = subprocess.run([sys.executable, w], env=env(), capture_output=True, text=True,
                            timeout=60)
    assert single.returncode == 0 and "rank 0 of 1" in single.stdout, single.stderr
    r = tbrun("--standalone", "--nproc_per_node", "3", w)
    assert r.returncode == 0, r.stderr
    for rank in range(3):
        assert f"[rank {rank}] rank {rank} of 3 (local rank {rank}): [6.0, 6.0, 6.0, 6.0]" \
            in r.stdout


def test_children_left_by_successful_workers_are_stopped(tmp_path):
    w = script(tmp_path, """
        import subprocess
        child = subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL)
        print("child", child.pid)
    """)
    r = tbrun("--standalone", "--nproc_per_node", "2", w)
    assert r.returncode == 0, r.stderr
    pids = [int(x) for x in re.findall(r"\] child (\d+)", r.stdout)]
    assert len(pids) == 2
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_workers_die_with_a_sigkilled_tbrun(tmp_path):
    w = script(tmp_path, """
        import os, time
        print("up", os.getpid(), flush=True)
        time.sleep(60)
    """)
    p = start_tbrun("--standalone", "--nproc_per_node", "2", w)
    try:
        pids = []
        deadline = time.monotonic() + 20
        while len(pids) < 2 and time.monotonic() < deadline:
            line = p.stdout.readline()
            m = re.search(r"\] up (\d+)", line)
            if m:
                pids.append(int(m.group(1)))
        assert len(pids) == 2
        p.kill()  # no chance to clean up: the kernel must do it
        p.wait(10)
        deadline = time.monotonic() + 5
        while any(alive(x) for x in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(x) for x in pids)
    finally:
        if p.poll() is None:
            p.kill()
