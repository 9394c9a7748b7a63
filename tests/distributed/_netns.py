"""Two "hosts" on separate Linux network stacks (network namespaces joined by a veth pair), shared
by the multi-host tests (`test_netns.py`, `test_tcp_netns.py`).

Use the `two_hosts` fixture (import it into the test module), start processes inside a namespace
with `in_ns`, and run one `tbrun --nnodes 2` per host with `run_tbrun_nodes`. Needs root and
`ip netns`; the fixture skips cleanly otherwise.
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
    """Yield ``([ns0, ns1], [addr0, addr1])``: two namespaces and each one's veth address."""
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


def in_ns(ns, argv):
    """Start ``argv`` inside namespace ``ns`` with no inherited rendezvous variables."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                          "MASTER_PORT", "LOCAL_RANK")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(["ip", "netns", "exec", ns, *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def run_tbrun_nodes(two_hosts, tmp_path, worker, port, timeout):
    """Run ``worker`` (source text) under one ``tbrun --nnodes 2 --nproc_per_node 2`` per host,
    the master on host 0 at ``port``; return ``[(returncode, stdout, stderr)]`` per node
    (node 1 first), each waited for at most ``timeout`` seconds and killed if still running."""
    (ns0, ns1), (a0, _) = two_hosts
    w = tmp_path / "w.py"
    w.write_text(textwrap.dedent(worker))
    common = [sys.executable, "-m", "tensorbrain.distributed.run", "--nnodes", "2",
              "--nproc_per_node", "2", "--master_addr", a0, "--master_port", str(port),
              "--rdzv_conf", "join_timeout=20"]
    nodes = [in_ns(ns1, [*common, "--node_rank", "1", str(w)]),
             in_ns(ns0, [*common, "--node_rank", "0", str(w)])]
    results = []
    try:
        for p in nodes:
            out, err = p.communicate(timeout=timeout)
            results.append((p.returncode, out, err))
    finally:
        for p in nodes:
            if p.poll() is None:
                p.kill()
    return results
