"""Hosts with different numbers of ranks (hosts simulated by giving ranks host identities; this
machine is one host): a rank alone on its host must take part in the hierarchical all_reduce of
the hosts that share memory, as its host's leader. Before, it ran the flat socket all_reduce
with every rank while the others ran the hierarchical one, and the collective hung until the
timeout ("tcp all_reduce across two hosts with 2+1 ranks fails"; also seen between two network
namespaces)."""
import os

import numpy as np
import pytest

from tensorbrain.testing.distributed import run_workers


def w_uneven(rank, world, hosts):
    """``hosts[r]``: rank r's host. all_reduce (sum, avg, int max), then collectives that stay
    on the sockets, against NumPy references."""
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed.backends.tcp import mesh
    mesh._host_identity = lambda: (f"host{hosts[rank]}", f"host{hosts[rank]}/boot")
    store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), is_master=rank == 0,
                          wait_for_workers=False, timeout=20)
    dist.init_process_group("tcp", store=store, rank=rank, world_size=world, timeout=20)
    for size in (5, 50_000):
        rng = [np.random.default_rng(10 * r + size) for r in range(world)]
        xs = [g.standard_normal(size).astype(np.float32) for g in rng]
        t = tb.tensor(xs[rank].copy())
        dist.all_reduce(t)
        np.testing.assert_allclose(t.numpy(), np.sum(xs, axis=0), rtol=1e-5, atol=1e-5)
        t = tb.tensor(xs[rank].copy())
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        np.testing.assert_allclose(t.numpy(), np.mean(xs, axis=0), rtol=1e-5, atol=1e-5)
        ints = [np.arange(size, dtype=np.int32) * (r + 1) for r in range(world)]
        t = tb.tensor(ints[rank])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        np.testing.assert_array_equal(t.numpy(), ints[-1])
        b = tb.tensor(xs[rank].copy())
        dist.broadcast(b, src=world - 1)
        np.testing.assert_array_equal(b.numpy(), xs[world - 1])
        dist.barrier()
    out = t.numpy()[:3].tolist()
    dist.destroy_process_group()
    return out


@pytest.mark.parametrize("hosts", [[0, 0, 1], [0, 1, 1], [0, 0, 0, 1]])
def test_all_reduce_with_a_rank_alone_on_its_host(hosts, run_id):
    out = run_workers("tests.distributed.test_shm_uneven_hosts:w_uneven", len(hosts), hosts,
                      init=None, timeout=90.0, group_timeout=20.0, env={"TB_RUN_ID": run_id})
    assert all(o == out[0] for o in out)
