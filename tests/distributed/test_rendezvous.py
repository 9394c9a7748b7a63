"""Rendezvous for env://, tcp:// and file:// with real processes, restart scoping, bad URLs."""
import os
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from tensorbrain.distributed.rendezvous import register_rendezvous_handler, rendezvous
from tensorbrain.distributed.store import FileStore, HashStore, PrefixStore

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
               "MASTER_ADDR", "MASTER_PORT", "TB_RESTART_COUNT", "TB_USE_AGENT_STORE")

# Each rank publishes its rank, waits for everyone, prints what it read: proves one shared store.
RANK_SCRIPT = r"""
import sys
from datetime import timedelta
from tensorbrain.distributed.rendezvous import rendezvous
url = sys.argv[1]
kw = {}
if len(sys.argv) > 2:
    kw = dict(rank=int(sys.argv[2]), world_size=int(sys.argv[3]))
store, rank, world = next(rendezvous(url, timeout=timedelta(seconds=20), **kw))
store.set(f"hello/{rank}", f"r{rank}")
store.wait([f"hello/{r}" for r in range(world)])
print(rank, world, " ".join(store.get(f"hello/{r}").decode() for r in range(world)))
store.add("done", 1)
if rank == 0:  # the master serves the store: it must outlive the others' last request
    import time
    while int(store.add("done", 0)) < world:
        time.sleep(0.01)
"""


def _clean_env(extra):
    env = {k: v for k, v in os.environ.items()
           if k not in LAUNCH_VARS and not k.startswith(("OMPI_", "PMI_", "SLURM_", "PMIX_"))}
    env.update(PYTHONPATH=str(ROOT), **extra)
    return env


def run_ranks(argvs, envs, timeout=40):
    procs = [subprocess.Popen([sys.executable, "-c", RANK_SCRIPT, *a], env=_clean_env(e),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for a, e in zip(argvs, envs)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            assert p.returncode == 0, err
            outs.append(out.split())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return sorted(outs, key=lambda o: int(o[0]))


def check(outs, world):
    expected = [f"r{r}" for r in range(world)]
    assert [int(o[0]) for o in outs] == list(range(world))
    for o in outs:
        assert int(o[1]) == world and o[2:] == expected


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_env_rendezvous_torchrun_variables():
    port, world = free_port(), 3
    envs = [{"RANK": str(r), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": str(port)} for r in range(world)]
    check(run_ranks([["env://"]] * world, envs), world)


@pytest.mark.parametrize("given", [{}, {"MASTER_ADDR": "127.0.0.1"}, {"MASTER_PORT": "29500"}])
def test_env_rank_without_master_address_fails_at_once(given):
    # as torch ("environment variable MASTER_ADDR expected, but not set"): RANK=1 WORLD_SIZE=2
    # python train.py used to wait forever for a rank 0 guessed at 127.0.0.1:29500
    code = ("import tensorbrain.distributed as dist\n"
            "try:\n    dist.init_process_group('tcp')\n"
            "except ValueError as e:\n    print(e)\n")
    env = _clean_env({"RANK": "1", "WORLD_SIZE": "2", **given})
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    missing = [v for v in ("MASTER_ADDR", "MASTER_PORT") if v not in given]
    assert f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not" in proc.stdout
    assert "RANK=1 and WORLD_SIZE=2" in proc.stdout and "tbrun" in proc.stdout


def test_env_rendezvous_from_open_mpi_and_slurm_variables():
    port = free_port()
    ompi = [{"OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_SIZE": "2",
             "OMPI_COMM_WORLD_LOCAL_RANK": str(r), "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
             "MASTER_PORT": str(port)} for r in range(2)]
    check(run_ranks([["env://"]] * 2, ompi), 2)
    port = free_port()
    slurm = [{"SLURM_PROCID": str(r), "SLURM_NTASKS": "3", "SLURM_LOCALID": str(r),
              "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "localhost", "MASTER_PORT": str(port)}
             for r in range(3)]
    check(run_ranks([["env://"]] * 3, slurm), 3)


def test_tcp_rendezvous_query_and_arguments():
    port, world = free_port(), 3
    argvs = [[f"tcp://127.0.0.1:{port}?rank={r}&world_size={world}"] for r in range(world - 1)]
    argvs.append([f"tcp://127.0.0.1:{port}", str(world - 1), str(world)])  # explicit arguments
    check(run_ranks(argvs, [{}] * world), world)


def test_file_rendezvous(tmp_path):
    world = 4
    url = f"file://{tmp_path}/rdzv"
    check(run_ranks([[url, str(r), str(world)] for r in range(world)], [{}] * world), world)


def test_restart_count_scopes_keys(tmp_path, monkeypatch):
    url = f"file://{tmp_path}/scoped"
    monkeypatch.setenv("TB_RESTART_COUNT", "0")
    first, _, _ = next(rendezvous(url, rank=0, world_size=2))
    first.set("addr/1", "dead-peer:1234")
    monkeypatch.setenv("TB_RESTART_COUNT", "1")
    second, _, _ = next(rendezvous(url, rank=0, world_size=2))
    assert second.prefix == "tb/attempt1"
    assert not second.check(["addr/1"])  # the previous attempt's address is invisible
    raw = FileStore(f"{tmp_path}/scoped")
    assert raw.get("tb/attempt0/addr/1") == b"dead-peer:1234"


def test_bad_urls_and_arguments(monkeypatch):
    for k in LAUNCH_VARS:
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(ValueError, match="no rendezvous handler .*'udp'.*env://, file://, tcp://"):
        rendezvous("udp://x:1")
    with pytest.raises(ValueError, match="rank=1 conflicts with rank=0"):
        rendezvous("tcp://127.0.0.1:1?rank=0&world_size=2", rank=1)
    with pytest.raises(ValueError, match="rank 2 is out of range for world_size 2"):
        next(rendezvous("tcp://127.0.0.1:1", rank=2, world_size=2))
    with pytest.raises(ValueError, match="needs tcp://host:port"):
        next(rendezvous("tcp://127.0.0.1?rank=0&world_size=1"))
    with pytest.raises(ValueError, match="world_size is missing"):
        next(rendezvous("tcp://127.0.0.1:1?rank=0"))
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(ValueError, match="MASTER_ADDR is not set"):
        next(rendezvous("env://"))
    with pytest.raises(TypeError):
        rendezvous(None)


def test_custom_handler():
    shared = HashStore()

    def handler(url, timeout=None, **kw):
        yield PrefixStore("custom", shared), 0, 1

    register_rendezvous_handler("mem", handler)
    store, rank, world = next(rendezvous("mem://anything"))
    store.set("k", "v")
    assert (rank, world, shared.get("custom/k")) == (0, 1, b"v")
    with pytest.raises(RuntimeError, match="already registered"):
        register_rendezvous_handler("mem", handler)


def test_single_process_env_rendezvous_needs_no_port(monkeypatch):
    for k in LAUNCH_VARS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MASTER_PORT", "1")  # would be refused: proves nothing listens or connects
    store, rank, world = next(rendezvous("env://", timeout=timedelta(seconds=5)))
    assert (rank, world) == (0, 1) and isinstance(store.underlying_store, HashStore)
    store.set("x", "1")
    assert store.get("x") == b"1"
