"""Two "hosts" on separate Linux network stacks (network namespaces joined by a veth pair).

Nothing here touches loopback across nodes: node 1 reaches node 0's store only over the veth
link, as a second machine would. Needs root and `ip netns`; skipped cleanly otherwise.
"""
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=check)


@pytest.fixture
def two_hosts():
    if shutil.which("ip") is None or os.geteuid() != 0:
        pytest.skip("needs root and iproute2 (ip netns)")
    tag = uuid.uuid4().hex[:6]
    ns = [f"tb{tag}a", f"tb{tag}b"]
    subnet = f"10.251.{os.getpid() % 250}"
    addrs = [f"{subnet}.1", f"{subnet}.2"]
    made = []
    try:
        for n in ns:
            r = _ip("netns", "add", n, check=False)
            if r.returncode != 0:
                pytest.skip(f"ip netns not permitted here: {r.stderr.strip()}")
            made.append(n)
        _ip("link", "add", f"v{tag}a", "type", "veth", "peer", "name", f"v{tag}b")
        for n, dev, addr in zip(ns, (f"v{tag}a", f"v{tag}b"), addrs):
            _ip("link", "set", dev, "netns", n)
            _ip("-n", n, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", n, "link", "set", dev, "up")
            _ip("-n", n, "link", "set", "lo", "up")
        yield ns, addrs
    finally:
        for n in made:
            # kill anything left in the namespace, then remove it (which removes the veth too)
            pids = _ip("netns", "pids", n, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            _ip("netns", "del", n, check=False)


def _in_ns(ns, argv):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                          "MASTER_PORT", "LOCAL_RANK")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(["ip", "netns", "exec", ns, *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


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


def test_two_tbrun_nodes_on_separate_network_stacks(two_hosts, tmp_path):
    (ns0, ns1), (a0, a1) = two_hosts
    w = tmp_path / "w.py"
    w.write_text(textwrap.dedent(WORKER))
    common = [sys.executable, "-m", "tensorbrain.distributed.run", "--nnodes", "2",
              "--nproc_per_node", "2", "--master_addr", a0, "--master_port", "29555",
              "--rdzv_conf", "join_timeout=20"]
    nodes = [_in_ns(ns1, [*common, "--node_rank", "1", str(w)]),
             _in_ns(ns0, [*common, "--node_rank", "0", str(w)])]
    results = []
    try:
        for p in nodes:
            out, err = p.communicate(timeout=60)
            results.append((p.returncode, out, err))
    finally:
        for p in nodes:
            if p.poll() is None:
                p.kill()
    for rc, out, err in results:
        assert rc == 0, err
        lines = out.splitlines()
        assert len(lines) == 2
        for line in lines:
            assert line.endswith(f"world 4 ips {sorted([a0, a1])}"), line


def test_unreachable_master_names_the_address(two_hosts):
    (ns0, ns1), (a0, a1) = two_hosts
    code = ("from datetime import timedelta\n"
            "from tensorbrain.distributed.store import TCPStore\n"
            f"TCPStore({a0!r}, 29556, timeout=timedelta(seconds=1))\n")
    p = _in_ns(ns1, [sys.executable, "-c", code])  # nothing listens on node 0
    out, err = p.communicate(timeout=30)
    assert p.returncode != 0 and f"{a0}:29556" in err and "DistNetworkError" in err
