"""Two "hosts" on separate Linux network stacks (network namespaces joined by a veth pair).

Nothing here touches loopback across nodes: node 1 reaches node 0's store only over the veth
link, as a second machine would. Needs root and `ip netns`; skipped cleanly otherwise.
"""
import sys

from tests.distributed._netns import in_ns, run_tbrun_nodes, two_hosts  # noqa: F401  (fixture)


WORKER = """
import os, socket
from datetime import timedelta
from tensorbrain.distributed.rendezvous import rendezvous
store, rank, world = next(rendezvous("env://", timeout=timedelta(seconds=20)))
# the address this rank's host uses to reach the master: proves which link carried the traffic
s = socket.create_connection((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])))
me = s.getsockname()[0]; s.close()
store.set(f"ip/{rank}", me)
store.wait([f"ip/{r}" for r in range(world)])
print("world", world, "ips", sorted({store.get(f"ip/{r}").decode() for r in range(world)}))
"""


def test_two_tbrun_nodes_on_separate_network_stacks(two_hosts, tmp_path):  # noqa: F811
    _, (a0, a1) = two_hosts
    results = run_tbrun_nodes(two_hosts, tmp_path, WORKER, port=29555, timeout=60)
    for rc, out, err in results:
        assert rc == 0, err
        lines = out.splitlines()
        assert len(lines) == 2
        for line in lines:
            assert line.endswith(f"world 4 ips {sorted([a0, a1])}"), line


def test_unreachable_master_names_the_address(two_hosts):  # noqa: F811
    (_, ns1), (a0, _) = two_hosts
    code = ("from datetime import timedelta\n"
            "from tensorbrain.distributed.store import TCPStore\n"
            f"TCPStore({a0!r}, 29556, timeout=timedelta(seconds=1))\n")
    p = in_ns(ns1, [sys.executable, "-c", code])  # nothing listens on node 0
    out, err = p.communicate(timeout=30)
    assert p.returncode != 0 and f"{a0}:29556" in err and "DistNetworkError" in err
