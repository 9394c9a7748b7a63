"""tbrun as torchrun: c10d rendezvous by arrival and rounds, torchrun's options, PET_* variables,
worker variables, error files, live ``\\r`` output, and TensorBrain workers under torchrun."""
import json
import os
import subprocess
import sys
import time

import pytest

from tensorbrain.distributed.run import UsageError, parse_args

from .test_run import ROOT, env, free_port, parse_env_lines, script, start_tbrun, tbrun

TORCH_ENV = """
import json, os
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
        "NODE_RANK", "ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT",
        "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE", "TB_ROUND",
        "CUDA_VISIBLE_DEVICES"]
print("ENV " + json.dumps({k: os.environ.get(k) for k in keys}), flush=True)
"""


def test_c10d_same_command_on_every_node_gives_node_ranks_by_arrival(tmp_path):
    """torchrun's multi-node command, unchanged on both nodes: no --node_rank."""
    w = script(tmp_path, TORCH_ENV)
    cmd = ["--nnodes", "2", "--nproc_per_node", "2", "--rdzv-backend", "c10d",
           "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", "job7", w]
    first = start_tbrun(*cmd)
    try:
        second = tbrun(*cmd)
        out1, err1 = first.communicate(timeout=40)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0 and second.returncode == 0, err1 + second.stderr
    envs = {**parse_env_lines(out1), **parse_env_lines(second.stdout)}
    assert sorted(envs) == [0, 1, 2, 3]
    assert {e["WORLD_SIZE"] for e in envs.values()} == {"4"}
    assert {e["GROUP_WORLD_SIZE"] for e in envs.values()} == {"2"}
    assert {e["TORCHELASTIC_RUN_ID"] for e in envs.values()} == {"job7"}
    for rank, e in envs.items():  # ranks numbered node by node
        assert e["GROUP_RANK"] == str(rank // 2) and e["LOCAL_RANK"] == str(rank % 2)


LATE = TORCH_ENV + """
import time
if os.environ["WORLD_SIZE"] == "1":
    time.sleep(60)   # round 0 alone: stopped when the late node asks for a new round
"""


def test_a_late_node_triggers_a_new_round_and_the_running_node_restarts_into_it(tmp_path):
    w = script(tmp_path, LATE)
    port = free_port()
    cmd = ["--nnodes", "1:2", "--rdzv-endpoint", f"127.0.0.1:{port}",
           "--rdzv_conf", "last_call_timeout=0.3", "--max_restarts", "0", w]
    first = start_tbrun(*cmd)
    try:
        time.sleep(3)  # round 0 closed with one node, its worker runs
        assert first.poll() is None
        t0 = time.monotonic()
        second = tbrun(*cmd, timeout=40)
        out1, err1 = first.communicate(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    assert second.returncode == 0 and first.returncode == 0, err1 + second.stderr
    assert time.monotonic() - t0 < 30
    assert "asking the running nodes to start round 1" in second.stderr
    rounds = [json.loads(line.split("ENV ", 1)[1]) for line in out1.splitlines() if "ENV " in line]
    # the first node ran round 0 alone, then round 1 with the late node (not a failure restart)
    assert [(e["TB_ROUND"], e["WORLD_SIZE"]) for e in rounds] == [("0", "1"), ("1", "2")]
    assert {e["TORCHELASTIC_RESTART_COUNT"] for e in rounds} == {"0"}
    late = parse_env_lines(second.stdout)
    assert len(late) == 1 and next(iter(late.values()))["WORLD_SIZE"] == "2"
    ranks = {r for line in out1.splitlines() if "ENV " in line
             for r in [line.split("]")[0]]}
    assert "[rank 0" in ranks


def test_torchrun_worker_variables_options_and_pet_env(tmp_path):
    w = script(tmp_path, TORCH_ENV)
    r = tbrun("--standalone", "--role", "trainer", "--run-path", "--start-method", "fork",
              "--local-addr", "127.0.0.1", "--logs-specs", "default", "--shutdown-timeout", "3",
              "--signals-to-handle", "SIGTERM,SIGINT", "--numa-binding", "node",
              "--event-log-handler", "null", "--max-restarts", "1", "--virtual-local-rank", w,
              extra_env={"PET_NPROC_PER_NODE": "2"})
    assert r.returncode == 0, r.stderr
    envs = parse_env_lines(r.stdout)
    assert sorted(envs) == [0, 1]  # PET_NPROC_PER_NODE=2
    for rank, e in envs.items():
        assert (e["ROLE_NAME"], e["ROLE_RANK"], e["ROLE_WORLD_SIZE"]) == ("trainer", str(rank), "2")
        assert (e["GROUP_WORLD_SIZE"], e["TORCHELASTIC_RESTART_COUNT"],
                e["TORCHELASTIC_MAX_RESTARTS"]) == ("1", "0", "1")
        # --virtual-local-rank: every worker is local rank 0 of its own device
        assert (e["LOCAL_RANK"], e["CUDA_VISIBLE_DEVICES"]) == ("0", str(rank))
        assert e["TORCHELASTIC_ERROR_FILE"].endswith(f"/attempt_0/{rank}/error.json")
    # a command-line option wins over its PET_ variable
    cfg = parse_args(["--nproc_per_node", "3", "t.py"])
    assert cfg.nproc == 3
    os.environ["PET_NNODES"] = "1:4"
    try:
        assert (parse_args(["t.py"]).min_nodes, parse_args(["t.py"]).max_nodes) == (1, 4)
    finally:
        del os.environ["PET_NNODES"]


@pytest.mark.parametrize("argv,match", [
    (["--logs-specs", "mypkg.logs", "x.py"], "custom LogsSpecs"),
    (["--signals-to-handle", "SIGNOPE", "x.py"], "unknown signal SIGNOPE"),
    (["-np", "3", "-H", "nodea:2,nodeb:2", "x.py"], "-np 3 does not match the 4 slot"),
])
def test_unsupported_torchrun_values_are_clear_errors(argv, match):
    with pytest.raises(UsageError, match=match):
        parse_args(argv)


FAILS = """
import tensorbrain.distributed  # installs the error-file hook under a launcher
import os
if os.environ["RANK"] == "1":
    raise ValueError("bad batch 42")
"""


def test_uncaught_exception_is_written_to_the_error_file_and_summarized(tmp_path):
    w = script(tmp_path, FAILS)
    logs = tmp_path / "logs"
    r = tbrun("--nproc_per_node", "2", "--rdzv_id", "errs", "--log_dir", str(logs),
              "--tee", "3", "--master_port", str(free_port()), w)
    assert r.returncode == 1
    assert "its uncaught exception (TORCHELASTIC_ERROR_FILE): ValueError: bad batch 42" in r.stderr
    data = json.loads((logs / "errs" / "attempt_0" / "1" / "error.json").read_text())
    assert data["message"]["message"] == "ValueError: bad batch 42"
    assert 'raise ValueError("bad batch 42")' in data["message"]["extraInfo"]["py_callstack"]
    assert not (logs / "errs" / "attempt_0" / "0" / "error.json").exists()


def test_torch_record_decorator_file_is_read_by_tbrun(tmp_path):
    """The real torch's @record writes the file; tbrun's summary shows it (format parity)."""
    pytest.importorskip("torch")
    w = script(tmp_path, """
        from torch.distributed.elastic.multiprocessing.errors import record

        @record
        def main():
            raise KeyError("missing shard")

        main()
        """)
    r = tbrun("--standalone", w, timeout=90)
    assert r.returncode == 1
    assert "TORCHELASTIC_ERROR_FILE): KeyError: 'missing shard'" in r.stderr


def test_our_record_decorator_matches_torchs_file(tmp_path):
    torch_errors = pytest.importorskip("torch.distributed.elastic.multiprocessing.errors")
    from tensorbrain.distributed.elastic.multiprocessing.errors import record

    files = {}
    for name, rec in (("tb", record), ("torch", torch_errors.record)):
        files[name] = tmp_path / f"{name}.json"
        os.environ["TORCHELASTIC_ERROR_FILE"] = str(files[name])
        try:
            with pytest.raises(RuntimeError):
                rec(lambda: (_ for _ in ()).throw(RuntimeError("x")))()
        finally:
            del os.environ["TORCHELASTIC_ERROR_FILE"]
    tb_data, torch_data = (json.loads(files[n].read_text()) for n in ("tb", "torch"))
    assert tb_data["message"]["message"] == torch_data["message"]["message"] == "RuntimeError: x"
    assert set(tb_data["message"]["extraInfo"]) <= set(torch_data["message"]["extraInfo"])


BAR = r"""
import os, sys, time
go = sys.argv[1]
for pct in (10, 20):
    sys.stdout.write(f"\r{pct}%")
    sys.stdout.flush()
    time.sleep(0.3)
while not os.path.exists(go):   # the test sees 20% before the worker may finish
    time.sleep(0.05)
sys.stdout.write("\rdone\n")
"""


@pytest.mark.parametrize("prefix", [True, False])
def test_carriage_return_redraws_show_live_with_the_prefix(tmp_path, prefix):
    w = script(tmp_path, BAR)
    go = tmp_path / "go"
    p = start_tbrun("--standalone", *([] if prefix else ["--no-prefix"]), w, str(go))
    try:
        want = b"\r[rank 0] 10%\r[rank 0] 20%" if prefix else b"\r10%\r20%"
        seen, deadline = b"", time.monotonic() + 30
        fd = p.stdout.fileno()
        while want not in seen and time.monotonic() < deadline:
            chunk = os.read(fd, 4096)  # the bar arrives while the worker is still running
            if not chunk:
                break
            seen += chunk
        assert want in seen and p.poll() is None
        go.touch()
        while chunk:
            chunk = os.read(fd, 4096)
            seen += chunk
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, p.stderr.read()
    done = b"\r[rank 0] done\n" if prefix else b"\rdone\n"
    assert seen == want + done


def test_tqdm_bar_under_tbrun(tmp_path):
    pytest.importorskip("tqdm")
    w = script(tmp_path, """
        from tqdm import tqdm
        for _ in tqdm(range(3), ncols=40, mininterval=0):
            pass
        """)
    r = tbrun("--standalone", "--nproc_per_node", "2", w)
    assert r.returncode == 0
    for rank in (0, 1):  # every redraw of each rank's bar starts with its prefix
        # (text mode turned each \r into a line end)
        draws = [d for d in r.stderr.splitlines() if d.startswith(f"[rank {rank}] ")]
        assert any("3/3" in d for d in draws) and any("0/3" in d for d in draws)


def test_tensorbrain_workers_under_real_torchrun_use_the_agent_store(tmp_path):
    """torchrun's agent listens on MASTER_PORT; our workers must join it, never listen on it."""
    pytest.importorskip("torch")
    w = script(tmp_path, """
        import os
        import tensorbrain as tb
        import tensorbrain.distributed as dist
        dist.init_process_group("tcp")
        t = tb.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(t)
        with open(os.path.join(os.path.dirname(__file__), f"sum{dist.get_rank()}"), "w") as f:
            f.write(f"{t.tolist()} {os.environ['TORCHELASTIC_USE_AGENT_STORE']}")
        dist.destroy_process_group()
        """)
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                        "--master_port", str(free_port()), w], env=env(PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for rank in (0, 1):
        assert (tmp_path / f"sum{rank}").read_text() == "[3.0] True"


def test_waiting_on_torchruns_agent_store_longer_than_a_slice_is_not_a_store_failure():
    """Ranks wait for each other's keys in 0.25 s slices; a key that comes later than one slice
    must not read as a broken store (torch's client words its timeout differently: the real
    torchrun test above failed on a loaded machine that way)."""
    td = pytest.importorskip("torch.distributed")
    import threading
    from datetime import timedelta

    from tensorbrain.distributed import _liveness
    from tensorbrain.distributed._store.torch_agent import TorchAgentStore
    from tensorbrain.distributed.errors import DistStoreError, DistTimeoutError
    master = td.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=10))
    store = TorchAgentStore("127.0.0.1", master.port, timedelta(seconds=10))
    threading.Timer(0.8, lambda: master.set("late", b"1")).start()
    t0 = time.monotonic()
    _liveness.wait_keys(store, ["late"], time.monotonic() + 10, "test")
    assert 0.7 < time.monotonic() - t0 < 5 and store.get("late") == b"1"
    with pytest.raises(DistStoreError, match="timed out after .* waiting for key.*'never'"):
        store.wait(["never"], timedelta(milliseconds=300))
    with pytest.raises(DistTimeoutError):
        _liveness.wait_keys(store, ["never"], time.monotonic() + 0.6, "test")


def test_a_real_pytorch_script_under_tbrun_gets_a_hint(tmp_path):
    """torch's env:// rank 0 listens on MASTER_PORT, which tbrun's store holds: the summary says
    what to do (--as-torch, or the real torchrun), and --as-torch runs the same script."""
    pytest.importorskip("torch")
    w = script(tmp_path, """
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo")
        t = torch.ones(1) * (dist.get_rank() + 1)
        dist.all_reduce(t)
        print("SUM", t.item(), flush=True)
        dist.destroy_process_group()
        """)
    r = tbrun("--nproc_per_node", "2", "--master_port", str(free_port()), w, timeout=120)
    assert r.returncode == 1 and "hint: this looks like a PyTorch script" in r.stderr, r.stderr
    assert "--as-torch" in r.stderr
    r = tbrun("--as-torch", "--nproc_per_node", "2", "--master_port", str(free_port()), w,
              timeout=120)
    assert r.returncode == 0 and r.stdout.count("SUM 3.0") == 2, r.stderr


def test_c10d_failure_restarts_every_node_into_a_new_round(tmp_path):
    w = script(tmp_path, TORCH_ENV + """
import sys
if os.environ["RANK"] == "1" and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    sys.exit(5)
""")
    cmd = ["--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--max-restarts", "1",
           w]
    first = start_tbrun(*cmd)
    try:
        second = tbrun(*cmd)
        out1, err1 = first.communicate(timeout=40)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0 and second.returncode == 0, err1 + second.stderr
    runs = [json.loads(x.split("ENV ", 1)[1]) for x in (out1 + second.stdout).splitlines()
            if "ENV " in x]
    assert sorted((e["TB_ROUND"], e["TORCHELASTIC_RESTART_COUNT"], e["RANK"]) for e in runs) == \
        [("0", "0", "0"), ("0", "0", "1"), ("1", "1", "0"), ("1", "1", "1")]


def test_duplicate_filters_copy_matching_lines_to_one_file(tmp_path):
    w = script(tmp_path, """
        import os, sys
        r = os.environ["RANK"]
        print(f"step 1 loss {r}")
        print("noise")
        print(f"warn {r}", file=sys.stderr)
        """)
    logs = tmp_path / "logs"
    r = tbrun("--nproc_per_node", "2", "--rdzv_id", "dup", "--log_dir", str(logs),
              "--master_port", str(free_port()), "--duplicate-stdout-filters", "loss,absent",
              "--duplicate-stderr-filters", "*", w)
    assert r.returncode == 0, r.stderr
    assert "noise" in r.stdout  # the console still gets everything
    out = sorted((logs / "dup" / "filtered_stdout.log").read_text().splitlines())
    err = sorted((logs / "dup" / "filtered_stderr.log").read_text().splitlines())
    assert out == ["[rank 0] step 1 loss 0", "[rank 1] step 1 loss 1"]
    assert err == ["[rank 0] warn 0", "[rank 1] warn 1"]
