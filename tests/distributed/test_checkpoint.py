"""Distributed checkpoints in real processes: save at one world size, load at another, compare
with the original values computed here with NumPy; atomicity under a real SIGKILL."""
import glob
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed.checkpoint as dcp
from tensorbrain.testing.distributed import WorkerFailure

HERE = "tests.distributed.test_checkpoint"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ***** the original values, computed independently of the code under test *****
def _originals():
    return {"a": np.arange(30, dtype=np.float32).reshape(10, 3) * 0.5,    # uneven rows at 4 ranks
            "b": np.arange(7, dtype=np.float64) - 3.0,
            "m": np.arange(30, dtype=np.float32).reshape(5, 6) + 100,     # 2-D mesh at 4 ranks
            "plain": np.linspace(0, 1, 9, dtype=np.float32).reshape(3, 3),
            "rep": np.array([[1, 2], [3, 4]], dtype=np.int64)}


def _rows(n, world, rank):
    """torch.chunk's rows for ``rank``: ceil(n/world) each, the last ones shorter or empty."""
    c = -(-n // world)
    start = min(rank * c, n)
    return start, min(start + c, n)


def _sharded_state(rank, world, fill):
    """The state dict under this world's layout; ``fill`` = originals (to save) or zeros."""
    from tensorbrain.distributed.tensor import Replicate, Shard, distribute_tensor
    from tensorbrain.distributed.device_mesh import init_device_mesh
    o = _originals()
    val = (lambda k: o[k]) if fill else (lambda k: np.zeros_like(o[k]))
    mesh = init_device_mesh("cpu", (world,))
    if world == 4:
        m = distribute_tensor(tb.tensor(val("m")), init_device_mesh("cpu", (2, 2)),
                              [Shard(0), Shard(1)])
    else:
        m = distribute_tensor(tb.tensor(val("m")), mesh, [Shard(1)])
    return {"model": {"a": distribute_tensor(tb.tensor(val("a")), mesh, [Shard(0)]),
                      "m": m, "plain": tb.tensor(val("plain"))},
            "optim": {"b": distribute_tensor(tb.tensor(val("b")), mesh, [Shard(0)]),
                      "rep": distribute_tensor(tb.tensor(val("rep")), mesh, [Replicate()]),
                      "step": 11 if fill else 0, "betas": (0.9, 0.999) if fill else (0, 0),
                      "names": ["x", "y"] if fill else []}}


def _save(rank, world, path):
    dcp.save(_sharded_state(rank, world, True), checkpoint_id=path)
    return sorted(os.listdir(path))


def _load(rank, world, path):
    sd = _sharded_state(rank, world, False)
    dcp.load(sd, checkpoint_id=path)
    from tensorbrain.distributed.tensor._redistribute import local_offset
    out = {}
    for group in ("model", "optim"):
        for k, v in sd[group].items():
            if hasattr(v, "placements"):
                off = local_offset(list(v.shape), v.device_mesh, v.placements)
                out[k] = [v._data.copy(), list(off)]
            elif hasattr(v, "numpy"):
                out[k] = [v.numpy().copy(), [0, 0]]
            else:
                out[k] = v
    return out


def _check_loaded(res, world):
    o = _originals()
    for rank, r in enumerate(res):
        for k in ("a", "b"):
            start, stop = _rows(len(o[k]), world, rank)
            arr, off = r[k]
            np.testing.assert_array_equal(arr, o[k][start:stop])
            assert off[0] == start
        np.testing.assert_array_equal(r["plain"][0], o["plain"])
        np.testing.assert_array_equal(r["rep"][0], o["rep"])
        arr, off = r["m"]
        if world == 4:
            r0, r1 = _rows(5, 2, rank // 2)
            c0, c1 = _rows(6, 2, rank % 2)
            np.testing.assert_array_equal(arr, o["m"][r0:r1, c0:c1])
        else:
            c0, c1 = _rows(6, world, rank)
            np.testing.assert_array_equal(arr, o["m"][:, c0:c1])
        assert r["step"] == 11 and r["betas"] == (0.9, 0.999) and r["names"] == ["x", "y"]


@pytest.mark.parametrize("save_world,load_world", [(4, 2), (4, 1), (2, 4), (1, 4)])
def test_reshard_across_world_sizes(workers, tmp_path, save_world, load_world):
    path = str(tmp_path / "ckpt")
    files = workers(f"{HERE}:_save", save_world, path, timeout=120)[0]
    md = json.load(open(os.path.join(path, ".metadata")))
    entries = md["state_dict_metadata"]
    # replicated values are written once; shards once each, all elements covered
    assert len(entries["model.plain"]["chunks"]) == 1
    assert len(entries["optim.rep"]["chunks"]) == 1
    assert len(entries["model.a"]["chunks"]) == min(save_world, 4)
    assert entries["optim.step"] == {"type": "value", "value": 11}
    assert files[0] == ".metadata" and len(files) <= save_world + 1
    _check_loaded(workers(f"{HERE}:_load", load_world, path, timeout=120), load_world)


def _own_keys(rank, world, path, mode):
    """Keys that only one rank holds (as ZeRO's optimizer state): each is written by its rank."""
    if mode == "save":
        sd = {f"r{rank}": tb.full((rank + 1,), float(rank)), "shared": tb.ones(2)}
        dcp.save(sd, checkpoint_id=path)
        return None
    sd = {f"r{r}": tb.zeros(r + 1) for r in range(3)}
    dcp.load(sd, checkpoint_id=path)
    return [sd[f"r{r}"].tolist() for r in range(3)]


def test_rank_local_keys_load_anywhere(workers, tmp_path):
    path = str(tmp_path / "ckpt")
    workers(f"{HERE}:_own_keys", 3, path, "save")
    for res in workers(f"{HERE}:_own_keys", 2, path, "load"):
        assert res == [[0.0], [1.0, 1.0], [2.0, 2.0, 2.0]]


def _disagree(rank, world, path):
    dcp.save({"w": tb.zeros(2 + rank)}, checkpoint_id=path)


def _one_rank_fails(rank, world, path):
    dcp.save({"w": tb.ones(3)}, checkpoint_id=path)           # a good checkpoint first
    writer = dcp.FileSystemWriter(path if rank == 0 else os.path.join(path, ".metadata"))
    try:
        dcp.save({"w": tb.zeros(3), f"own{rank}": tb.ones(1)}, storage_writer=writer)
    except dcp.CheckpointException as e:
        sd = {"w": tb.zeros(3)}
        dcp.load(sd, checkpoint_id=path)
        return [sorted(e.failures), sd["w"].tolist()]
    return "saved"


def test_errors_are_raised_on_every_rank(workers, tmp_path):
    with pytest.raises(WorkerFailure) as info:
        workers(f"{HERE}:_disagree", 2, str(tmp_path / "a"))
    assert "'w' differs between ranks: rank 0 has float32 of global size (2,), rank 1 has " \
           "float32 of global size (3,)" in str(info.value)
    assert len([r for r in info.value.results if not r.ok]) == 2
    res = workers(f"{HERE}:_one_rank_fails", 2, str(tmp_path / "b"))
    assert res == [[[1], [1.0, 1.0, 1.0]]] * 2  # both raise naming rank 1; old checkpoint intact


def test_load_errors(tmp_path):
    path = str(tmp_path / "c")
    with pytest.raises(FileNotFoundError, match=".metadata is missing"):
        dcp.load({"w": tb.zeros(2)}, checkpoint_id=path)
    dcp.save({"w": tb.ones(2), "n": 1}, checkpoint_id=path)
    with pytest.raises(RuntimeError, match="Missing key in checkpoint state_dict: v"):
        dcp.load({"w": tb.zeros(2), "v": tb.zeros(2)}, checkpoint_id=path)
    with pytest.raises(ValueError, match=r"global size \(2,\), the state dict .* has \(3,\)"):
        dcp.load({"w": tb.zeros(3)}, checkpoint_id=path)
    with pytest.raises(ValueError, match="the checkpoint holds a value"):
        dcp.load({"n": tb.zeros(1)}, checkpoint_id=path)
    with pytest.raises(TypeError, match="'bad': a object cannot be stored"):
        dcp.save({"bad": object()}, checkpoint_id=path)
    with pytest.raises(NotImplementedError, match="PROCESS"):   # async_save: test_async_save.py
        dcp.async_save({}, checkpoint_id=path, async_checkpointer_type="process")
    sd = {"w": tb.zeros(2), "n": 0}
    dcp.load(sd, storage_reader=dcp.FileSystemReader(path))
    assert sd["w"].tolist() == [1.0, 1.0] and sd["n"] == 1


# ***** atomicity: SIGKILL in the middle of a save *****
_SAVER = """
import sys, numpy as np, tensorbrain as tb, tensorbrain.distributed.checkpoint as dcp
path, n = sys.argv[1], int(sys.argv[2])
dcp.save({"w": tb.full((1000,), 1.0), "big": tb.zeros(10), "v": 1}, checkpoint_id=path)
print("v1 saved", flush=True)
for v in range(2, 100):
    dcp.save({"w": tb.full((1000,), float(v)), "big": tb.tensor(np.full(n, v, np.float32)),
              "v": v}, checkpoint_id=path)
"""


def _start_saver(path, n):
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-c", _SAVER, path, str(n)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _load_whole(path):
    md = json.load(open(os.path.join(path, ".metadata")))
    n = md["state_dict_metadata"]["big"]["size"][0]
    sd = {"w": tb.zeros(1000), "big": tb.zeros(n), "v": 0}
    dcp.load(sd, checkpoint_id=path)
    v = sd["v"]
    # whole: every tensor holds the values of the same save
    assert np.all(sd["w"].numpy() == v) and np.all(sd["big"].numpy() == (0 if v == 1 else v))
    return v


def test_sigkill_mid_save_leaves_previous_checkpoint_whole(tmp_path):
    path = str(tmp_path / "ckpt")
    proc = _start_saver(path, 32 * 1024 * 1024)  # 128 MiB: writing it takes a while
    try:
        assert proc.stdout.readline().strip() == b"v1 saved"
        deadline = time.monotonic() + 60
        while not glob.glob(os.path.join(path, ".__0_*.safetensors.tbtmp-*.tmp")):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.0005)
        os.kill(proc.pid, signal.SIGKILL)  # the second save is half written
    finally:
        proc.kill()
        proc.wait(30)
    assert glob.glob(os.path.join(path, ".*.tmp")), "the kill did not land mid-save"
    assert _load_whole(path) == 1
    # the next save commits and clears the leftovers
    dcp.save({"w": tb.full((1000,), 5.0), "big": tb.full((4,), 5.0), "v": 5}, checkpoint_id=path)
    assert sorted(os.listdir(path))[0] == ".metadata" and len(os.listdir(path)) == 2
    assert _load_whole(path) == 5


@pytest.mark.parametrize("delay", [0.3, 0.6, 0.9])
def test_sigkill_at_any_time_leaves_some_checkpoint_whole(tmp_path, delay):
    path = str(tmp_path / "ckpt")
    proc = _start_saver(path, 256 * 1024)
    try:
        assert proc.stdout.readline().strip() == b"v1 saved"
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(30)
    assert _load_whole(path) >= 1


def _killed_while_writing(rank, world, path):
    """Rank 1 SIGKILLs itself as soon as its data file of the second save appears."""
    import threading
    dcp.save({"w": tb.full((4,), 1.0), f"own{rank}": tb.zeros(8)}, checkpoint_id=path)
    if rank == 1:
        def watch():
            while not glob.glob(os.path.join(path, ".__1_*.safetensors.tbtmp-*.tmp")):
                time.sleep(0.0005)
            os.kill(os.getpid(), signal.SIGKILL)
        threading.Thread(target=watch, daemon=True).start()
    big = tb.tensor(np.full(8 * 1024 * 1024 * (rank + 1), 2.0, np.float32))  # rank 1: 64 MiB
    try:
        dcp.save({"w": tb.full((4,), 2.0), f"own{rank}": big}, checkpoint_id=path)
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return "saved"


def test_a_rank_killed_mid_save_fails_the_others_and_keeps_the_old_checkpoint(tmp_path, run_id):
    from tensorbrain.testing.distributed import run_workers
    path = str(tmp_path / "ckpt")
    res = run_workers(f"{HERE}:_killed_while_writing", 2, path, timeout=60, group_timeout=20,
                      raise_on_error=False, env={"TB_RUN_ID": run_id})  # no shm left behind
    assert res[1].exitcode == -signal.SIGKILL
    assert res[0].ok and res[0].value != "saved" and "rank 1" in res[0].value, res[0].value
    assert glob.glob(os.path.join(path, ".__1_*.tmp"))  # the half-written file is still there
    sd = {"w": tb.zeros(4), "own0": tb.ones(8), "own1": tb.ones(8)}
    dcp.load(sd, checkpoint_id=path)
    assert sd["w"].tolist() == [1.0] * 4 and sd["own1"].tolist() == [0.0] * 8
