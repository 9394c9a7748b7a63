"""The tcp backend with its same-host shared-memory transport: used automatically, TB_SHM=0 turns it
off, results equal NumPy references either way; the hierarchical all_reduce of a multi-host group
(hosts simulated by giving ranks different host identities: this machine is one host)."""
import os

import numpy as np
import pytest

from tensorbrain.testing.distributed import run_workers


def _x(rank, size, dtype, seed):
    rng = np.random.default_rng(100 * seed + rank)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(size).astype(dtype)
    return rng.integers(-1000, 1000, size).astype(dtype)


def w_api(rank, world):
    """Every collective through tb.distributed; returns whether shm carried them."""
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed import distributed_c10d as c10d
    shm = c10d._world().default.backend._shm
    for size in (3, 70_000):  # flat and reduce-scatter/all-gather paths (70k float32 = 280 KB)
        xs = [_x(r, size, "float32", size) for r in range(world)]
        t = tb.tensor(xs[rank].copy())
        dist.all_reduce(t)
        want = xs[0].copy()
        for x in xs[1:]:
            want += x
        np.testing.assert_array_equal(t.numpy(), want)
        t = tb.tensor(xs[rank].astype(np.float16))
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        pre = [(x.astype(np.float16).astype(np.float32) * np.float32(1 / world)).astype(np.float16)
               for x in xs]
        want16 = pre[0].astype(np.float32)
        for p in pre[1:]:
            want16 += p
        np.testing.assert_array_equal(t.numpy(), want16.astype(np.float16))
        ints = [_x(r, size, "int64", 2) for r in range(world)]
        t = tb.tensor(ints[rank])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        np.testing.assert_array_equal(t.numpy(), np.maximum.reduce(ints))
        b = tb.tensor(xs[rank].copy())
        dist.broadcast(b, src=world - 1)
        np.testing.assert_array_equal(b.numpy(), xs[world - 1])
        outs = [tb.zeros(size) for _ in range(world)]
        dist.all_gather(outs, tb.tensor(xs[rank]))
        for r in range(world):
            np.testing.assert_array_equal(outs[r].numpy(), xs[r])
        big = tb.zeros(world * size)
        dist.all_gather_into_tensor(big, tb.tensor(xs[rank]))
        np.testing.assert_array_equal(big.numpy(), np.concatenate(xs))
        allin = [_x(r, world * size, "float64", 3) for r in range(world)]
        out = tb.zeros(size, dtype=tb.float64)
        dist.reduce_scatter_tensor(out, tb.tensor(allin[rank]))
        tot = allin[0].copy()
        for a in allin[1:]:
            tot += a
        np.testing.assert_array_equal(out.numpy(), tot[rank * size:(rank + 1) * size])
        outs = tb.zeros(world * size, dtype=tb.float64)
        dist.all_to_all_single(outs, tb.tensor(allin[rank]))
        np.testing.assert_array_equal(
            outs.numpy(), np.concatenate([a[rank * size:(rank + 1) * size] for a in allin]))
        dist.barrier()
    return shm is not None and shm.whole


def w_hierarchical(rank, world):
    """Ranks 2k and 2k+1 pretend to share a host: reduce in host, leaders over TCP, broadcast."""
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed import distributed_c10d as c10d
    from tensorbrain.distributed.backends.tcp import mesh
    mesh._host_identity = lambda: (f"host{rank // 2}", f"host{rank // 2}/boot")
    store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), is_master=rank == 0,
                          wait_for_workers=False, timeout=20)
    dist.init_process_group("tcp", store=store, rank=rank, world_size=world, timeout=20)
    shm = c10d._world().default.backend._shm
    assert shm is not None and not shm.whole and shm.local_ranks == [rank // 2 * 2,
                                                                       rank // 2 * 2 + 1]
    for size in (5, 50_000):
        xs = [_x(r, size, "float32", 9) for r in range(world)]
        t = tb.tensor(xs[rank].copy())
        dist.all_reduce(t)
        hosts = [xs[h] + xs[h + 1] for h in range(0, world, 2)]  # the hierarchical order
        want = hosts[0].copy()
        for h in hosts[1:]:
            want += h
        np.testing.assert_array_equal(t.numpy(), want)
        ints = [_x(r, size, "int32", 4) for r in range(world)]
        t = tb.tensor(ints[rank])
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        np.testing.assert_array_equal(t.numpy(), np.add.reduce(ints))
        b = tb.tensor(xs[rank].copy())
        dist.broadcast(b, src=3)  # not hierarchical: the sockets carry it
        np.testing.assert_array_equal(b.numpy(), xs[3])
    dist.destroy_process_group()
    return True


@pytest.mark.parametrize("world", [2, 3])
def test_backend_uses_shared_memory_on_one_host(world, run_id):
    out = run_workers("tests.distributed.test_shm_backend:w_api", world, backend="tcp",
                      timeout=90.0, env={"TB_RUN_ID": run_id})
    assert out == [True] * world


def test_tb_shm_0_keeps_the_sockets(run_id):
    out = run_workers("tests.distributed.test_shm_backend:w_api", 2, backend="tcp",
                      timeout=90.0, env={"TB_RUN_ID": run_id, "TB_SHM": "0"})
    assert out == [False, False]


def test_hierarchical_all_reduce_across_simulated_hosts(run_id):
    out = run_workers("tests.distributed.test_shm_backend:w_hierarchical", 4, init=None,
                      timeout=90.0, env={"TB_RUN_ID": run_id})
    assert out == [True] * 4


def w_dies(rank, world):
    import time

    import tensorbrain as tb
    import tensorbrain.distributed as dist
    t = tb.ones(1000)
    dist.all_reduce(t)
    if rank == world - 1:
        os._exit(3)
    t0 = time.monotonic()
    try:
        dist.all_reduce(t)
    except Exception as exc:  # noqa: BLE001 - the error is the result
        return [type(exc).__name__, str(exc), time.monotonic() - t0]
    return ["no error", "", 0.0]


def test_dead_peer_fails_the_collective_naming_the_group_rank(run_id):
    res = run_workers("tests.distributed.test_shm_backend:w_dies", 3, backend="tcp",
                      timeout=60.0, group_timeout=20.0, env={"TB_RUN_ID": run_id},
                      raise_on_error=False)
    assert res[2].exitcode == 3
    for r in res[:2]:
        kind, msg, waited = r.value
        assert kind == "DistBackendError", r.value
        assert "group rank 2" in msg and "died" in msg and "all_reduce" in msg, msg
        assert waited < 5.0
