"""The tcp backend across two "hosts" on separate network stacks (Linux network namespaces joined
by a veth pair): 2 ranks per host under two `tbrun --nnodes 2` invocations run the collective
suite; ranks on different hosts must talk TCP over the veth link (advertised address = the one
that routes to MASTER_ADDR), ranks on one host their local transport. Skips without root/netns.
"""
import pytest

from tests.distributed._netns import run_tbrun_nodes, two_hosts  # noqa: F401  (fixture)

WORKER = """
import tensorbrain.distributed as dist
from tests.distributed import collective_suite as S

dist.init_process_group("tcp", timeout=60)
rank, n = dist.get_rank(), dist.get_world_size()
be = dist.distributed_c10d._default("netns").backend
peers = {j: c.transport for j, c in enumerate(be.conns) if c is not None}
S.run_some(rank, n, "tcp", ["check_all_reduce", "check_broadcast", "check_all_gather",
                            "check_reduce_scatter", "check_send_recv", "check_barrier"])
print("OK", rank, "local", be.mesh.local_ranks, "tcp-peers", sorted(j for j, t in peers.items() if t == "tcp"))
dist.destroy_process_group()
"""


@pytest.mark.parametrize("shm", ["1", "0"], ids=["shm", "sockets-only"])
def test_collectives_across_network_namespaces(two_hosts, tmp_path, monkeypatch, shm):  # noqa: F811
    # TB_SHM=0: the ranks of one host talk over Unix sockets, across hosts over TCP, so one
    # ring mixes both kinds of link (every rank must still cut the ring's pieces alike)
    monkeypatch.setenv("TB_SHM", shm)
    results = run_tbrun_nodes(two_hosts, tmp_path, WORKER, port=29575 if shm == "1" else 29585,
                              timeout=100)
    lines = []
    for rc, out, err in results:
        assert rc == 0, out + err
        lines += [ln for ln in out.splitlines() if "OK" in ln]
    assert len(lines) == 4, lines
    for ln in lines:
        rank = int(ln.split("OK ")[1].split()[0])
        node = rank // 2
        others = [r for r in range(4) if r // 2 != node]
        assert f"local [{2 * node}, {2 * node + 1}]" in ln, ln
        assert f"tcp-peers {others}" in ln, ln
