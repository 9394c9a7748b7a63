"""torch.distributed.run.run (a parsed command line run as torchrun does), and the small
torch.distributed names: DeviceMesh at the top level, context_parallel refused by name."""
import argparse
import sys

import pytest

import tensorbrain.distributed as dist
from tensorbrain.distributed.elastic.multiprocessing.errors import ChildFailedError
from tensorbrain.distributed.run import parse_args, run

pytestmark = pytest.mark.timeout(120)


def test_run_succeeds_and_raises_child_failed(tmp_path):
    ok, bad = tmp_path / "ok.py", tmp_path / "bad.py"
    ok.write_text("import os\nopen(os.environ['OUT'] + os.environ['RANK'], 'w').write('x')\n")
    bad.write_text("import sys\nsys.exit(3)\n")
    import os
    os.environ["OUT"] = str(tmp_path / "rank")
    try:
        assert run(parse_args(["--nproc_per_node", "2", "--standalone", str(ok)])) is None
        assert sorted(p.name for p in tmp_path.glob("rank*")) == ["rank0", "rank1"]
        with pytest.raises(ChildFailedError, match="FAILED"):
            run(["--nproc_per_node", "1", "--standalone", str(bad)])
    finally:
        del os.environ["OUT"]
    with pytest.raises(TypeError, match="parse_args"):
        run(argparse.Namespace(nproc_per_node=1))
    with pytest.raises(SystemExit):
        run(["--nproc_per_node", "0", sys.executable])


def test_device_mesh_at_top_level_and_context_parallel_refused():
    from tensorbrain._unsupported import NotSupportedError
    from tensorbrain.distributed.device_mesh import DeviceMesh
    from tensorbrain.distributed.tensor.experimental import context_parallel
    assert dist.DeviceMesh is DeviceMesh
    with pytest.raises(NotSupportedError, match="context_parallel is not supported"):
        context_parallel(None)


def _subgroups(rank, world_size):
    import tensorbrain as tb
    mine, groups = dist.new_subgroups_by_enumeration([[0, 2], [1, 3]])
    t = tb.tensor([float(rank)])
    dist.all_reduce(t, group=mine)
    error = None
    try:
        dist.new_subgroups_by_enumeration([[0, 1], [1, 2]])
    except ValueError as exc:
        error = str(exc)
    return {"sum": t.item(), "n": len(groups), "error": error,
            "xccl": dist.distributed_c10d.is_xccl_available(),
            "elastic": dist.is_torchelastic_launched()}


def test_new_subgroups_by_enumeration_reduces_within_each_subgroup():
    from tensorbrain.testing.distributed import run_workers
    outs = run_workers("tests.distributed.test_run_api:_subgroups", 4)
    assert [o["sum"] for o in outs] == [2.0, 4.0, 2.0, 4.0]   # 0+2 and 1+3
    assert all(o["n"] == 2 and "Rank 1 has appeared in both subgroup" in o["error"]
               for o in outs)
    assert not any(o["xccl"] or o["elastic"] for o in outs)
