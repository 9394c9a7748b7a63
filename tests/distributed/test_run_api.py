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
