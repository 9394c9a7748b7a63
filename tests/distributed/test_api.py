"""The process-group API's bad-input errors and single-process behaviour (torch semantics)."""
import socket
from datetime import timedelta

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain.testing.distributed import free_port

HERE = "tests.distributed.test_api"


@pytest.fixture
def solo():
    dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_collective_before_init():
    assert not dist.is_initialized()
    with pytest.raises(dist.DistError, match="not initialized.*init_process_group"):
        dist.all_reduce(tb.tensor([1.0]))
    with pytest.raises(dist.DistError, match="not initialized"):
        dist.get_rank()


def test_unknown_backend_lists_known_ones():
    with pytest.raises(ValueError, match=r"unknown backend 'carrier-pigeon'.*'tcp'"):
        dist.init_process_group("carrier-pigeon", store=dist.HashStore(), rank=0, world_size=1)
    assert not dist.is_initialized()


@pytest.mark.parametrize("rank,world", [(2, 2), (5, 3), (-1, 2)])
def test_rank_out_of_range(rank, world):
    with pytest.raises(ValueError, match="rank"):
        dist.init_process_group("tcp", store=dist.HashStore(), rank=rank, world_size=world)


def test_init_twice(solo):
    with pytest.raises(dist.DistError, match="twice"):
        dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)


def test_single_process_semantics(solo):
    assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
    assert dist.get_backend() == "tcp"
    t = tb.tensor([1.0, 2.0])
    assert dist.all_reduce(t) is None
    w = dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True)
    assert w.wait() and w.is_completed() and w.exception() is None
    assert t.tolist() == [1.0, 2.0]
    out = [tb.zeros(2)]
    dist.all_gather(out, t)
    assert out[0].tolist() == [1.0, 2.0]
    objs = [None]
    dist.all_gather_object(objs, {"a": (1, 2)})
    assert objs == [{"a": (1, 2)}]


def test_src_dst_out_of_range(solo):
    t = tb.tensor([1.0])
    with pytest.raises(ValueError, match=r"src=3 is out of range"):
        dist.broadcast(t, src=3)
    with pytest.raises(ValueError, match=r"dst=-1 is out of range"):
        dist.reduce(t, dst=-1)
    with pytest.raises(ValueError, match="this rank"):
        dist.send(t, dst=0)
    with pytest.raises(ValueError, match="world_size=1"):
        dist.all_gather([tb.zeros(1), tb.zeros(1)], t)
    with pytest.raises(TypeError, match="Tensor"):
        dist.all_reduce(np.ones(3))
    with pytest.raises(ValueError, match="unknown reduce op"):
        dist.all_reduce(t, op="median")
    with pytest.raises(TypeError, match="AVG needs a floating"):
        dist.all_reduce(tb.tensor([1, 2]), op=dist.ReduceOp.AVG)


def test_gloo_alias_and_default_backend():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.get_backend() == "gloo"
        assert type(dist.distributed_c10d._default("t").backend).__name__ == "TCPBackend"
    finally:
        dist.destroy_process_group()
    dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.get_backend() == "tcp"
    finally:
        dist.destroy_process_group()


def test_availability_is_lazy():
    assert dist.is_available() and dist.is_tcp_available() and dist.is_gloo_available()
    assert isinstance(dist.is_mpi_available(), bool)
    assert isinstance(dist.is_nccl_available(), bool)


def test_object_codec_refuses_arbitrary_objects(solo):
    with pytest.raises(TypeError, match="data only.*got set"):
        dist.broadcast_object_list([{1, 2}], src=0)


def test_master_unreachable_names_the_address():
    port = free_port()  # nothing listens there
    with pytest.raises(Exception, match=f"127.0.0.1:{port}"):
        dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{port}", rank=1,
                                world_size=2, timeout=timedelta(seconds=1.5))
    assert not dist.is_initialized()


def inconsistent_worker(rank, size):
    import os
    store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), is_master=(rank == 0),
                          wait_for_workers=False, timeout=10)
    try:
        dist.init_process_group("tcp", store=store, rank=rank, world_size=2 + rank, timeout=5)
        msg = "no error"
    except ValueError as exc:
        msg = str(exc)
    store.set(f"done/{rank}", "1")
    if rank == 0:  # rank 0 serves the store: stay until rank 1 has read it
        store.wait(["done/1"], timedelta(seconds=10))
    return msg


def test_inconsistent_world_size(workers):
    res = workers(f"{HERE}:inconsistent_worker", 2, init=None, timeout=30)
    for msg in res:
        assert "inconsistent world_size" in msg, res
    assert "rank 1 with 3" in res[0] and "rank 0 with 2" in res[1], res


def test_address_in_use_is_named():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        with pytest.raises(Exception, match=str(port)):
            dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=2)
    finally:
        s.close()


def hang_worker(rank, size):
    import time
    if rank == 1:
        time.sleep(600)
    raise KeyError("rank 0 fails on purpose")


def test_harness_names_failing_rank_and_kills_leftovers():
    import os
    from tensorbrain.testing.distributed import WorkerFailure, run_workers
    with pytest.raises(WorkerFailure) as info:
        run_workers(f"{HERE}:hang_worker", 2, timeout=8)
    text = str(info.value)
    assert "rank 0 raised KeyError" in text and "fails on purpose" in text, text
    assert "rank 1 still running at the harness timeout (killed)" in text, text
    for r in info.value.results:   # every process is gone (killed and reaped)
        with pytest.raises(ProcessLookupError):
            os.kill(r.pid, 0)
