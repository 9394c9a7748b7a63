"""tcp all_reduce between two network namespaces (joined by a veth pair) with 2 ranks on one
"host" and 1 on the other, both ways round: the lone rank takes part in the hierarchical
all_reduce as its host's leader (it used to run the flat one and the group timed out with
"peer rank 1 closed the connection"). Skips without root/netns."""
import sys
import textwrap

import pytest

from tests.distributed._netns import in_ns, two_hosts  # noqa: F401  (fixture)

WORKER = """
import numpy as np
import tensorbrain as tb
import tensorbrain.distributed as dist
dist.init_process_group("tcp", timeout=30)
r, n = dist.get_rank(), dist.get_world_size()
for size in (3, 70000):
    t = tb.ones(size) * (r + 1)
    dist.all_reduce(t)
    assert np.all(t.numpy() == n * (n + 1) / 2), t.numpy()[:3]
print("OK", r, flush=True)
dist.destroy_process_group()
"""


@pytest.mark.parametrize("nprocs", [(2, 1), (1, 2)])
def test_all_reduce_with_two_ranks_on_one_host_and_one_on_the_other(two_hosts, tmp_path,  # noqa: F811
                                                                       nprocs):
    (ns0, ns1), (a0, _) = two_hosts
    w = tmp_path / "w.py"
    w.write_text(textwrap.dedent(WORKER))

    def node(k, rank):
        return [sys.executable, "-m", "tensorbrain.distributed.run", "--nnodes", "2",
                "--nproc_per_node", str(k), "--master_addr", a0, "--master_port", "29581",
                "--rdzv_conf", "join_timeout=20", "--node_rank", str(rank), str(w)]
    procs = [in_ns(ns1, node(nprocs[1], 1)), in_ns(ns0, node(nprocs[0], 0))]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=100)
            assert p.returncode == 0, out + err
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert sum(ln.count("OK") for o in outs for ln in o.splitlines()) == 3, outs
