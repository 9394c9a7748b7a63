"""torch's private and older distributed module paths resolve to the public objects, and
init_device_mesh forms the default group from the environment when none exists (as torch)."""
import importlib
import os
import subprocess
import sys

import numpy as np
import pytest

from tensorbrain.distributed._legacy_paths import PATHS, resolve

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("old", sorted(PATHS))
def test_every_old_path_is_the_public_module(old):
    module = importlib.import_module("tensorbrain.distributed." + old)
    assert module is importlib.import_module(PATHS[old])


def test_a_submodule_under_an_old_prefix_is_the_public_submodule():
    import tensorbrain.distributed.algorithms.ddp_comm_hooks.default_hooks as old
    from tensorbrain.nn.parallel.comm_hooks import default_hooks
    assert old is default_hooks
    assert resolve("tensorbrain.distributed.tensor.parallel") is None   # not an old path
    assert resolve("tensorbrain.distributed._tensor.device_mesh.x") == \
        "tensorbrain.distributed.device_mesh.x"


def test_the_module_path_never_replaces_the_function_of_the_same_name():
    import tensorbrain.distributed._composable.fsdp.fully_shard  # noqa: F401  the module path
    from tensorbrain.distributed._composable.fsdp import fully_shard
    from tensorbrain.distributed.fsdp import fully_shard as public
    assert fully_shard is public and callable(fully_shard)


PROGRAM = """
from torch.distributed._tensor import DeviceMesh, DTensor, Shard, Replicate
from torch.distributed._tensor.device_mesh import init_device_mesh
from torch.distributed._tensor.placement_types import Shard as Shard2
from torch.distributed._composable.fsdp import fully_shard, MixedPrecisionPolicy
from torch.distributed._composable.fsdp.fully_shard import fully_shard as fs2
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
import torch.distributed.device_mesh as dm
import torch.distributed.tensor as t
import torch.distributed.fsdp as f
assert DeviceMesh is dm.DeviceMesh and init_device_mesh is dm.init_device_mesh
assert DTensor is t.DTensor and Shard is t.Shard is Shard2 and Replicate is t.Replicate
assert fully_shard is f.fully_shard is fs2 and MixedPrecisionPolicy is f.MixedPrecisionPolicy
assert callable(allreduce_hook) and callable(powerSGD.powerSGD_hook)
print("PATHS OK")
"""


def test_a_program_importing_the_old_paths_runs_under_as_torch(tmp_path):
    script = tmp_path / "old_paths.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("TENSORBRAIN_AS_TORCH", None)
    out = subprocess.run([sys.executable, "-m", "tensorbrain.as_torch", "--quiet", str(script)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "PATHS OK" in out.stdout, out.stdout + out.stderr


def _mesh_from_env(rank, world_size):
    """init_device_mesh with no group yet: it forms the default group from env:// itself."""
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed._tensor import init_device_mesh
    assert not dist.is_initialized()
    mesh = init_device_mesh("cpu", (world_size,), mesh_dim_names=("dp",))
    x = tb.tensor([float(rank + 1)])
    dist.all_reduce(x, group=mesh.get_group("dp"))
    out = [dist.is_initialized(), dist.get_backend(), mesh.size(), float(x.item())]
    dist.destroy_process_group()
    return out


def test_init_device_mesh_forms_the_default_group_from_the_environment(workers):
    got = workers("tests.distributed.test_legacy_paths:_mesh_from_env", 2, init=None)
    for rank_out in got:
        initialised, backend, size, total = rank_out
        assert initialised and size == 2 and backend in ("gloo", "tcp")
        np.testing.assert_equal(total, 1.0 + 2.0)


def _funcol(rank, world_size):
    import tensorbrain as tb
    import tensorbrain.distributed._functional_collectives as funcol
    from tensorbrain.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (world_size,))
    x = tb.arange(6, dtype=tb.float32).reshape(2, 3) + 10 * rank
    return {"sum": funcol.all_reduce(x, "sum", mesh).tolist(),
            "gather1": funcol.wait_tensor(funcol.all_gather_tensor(x, 1, (mesh, 0))).tolist(),
            "rs0": funcol.reduce_scatter_tensor(x, "sum", 0, None).tolist(),
            "bcast": funcol.broadcast(x, 1, None).tolist(), "x": x.tolist()}


def test_functional_collectives_return_new_tensors(workers):
    """torch.distributed._functional_collectives (funcol), against NumPy."""
    r0, r1 = workers("tests.distributed.test_legacy_paths:_funcol", 2)
    x0, x1 = np.array(r0["x"]), np.array(r1["x"])
    for r, mine in ((r0, x0), (r1, x1)):
        np.testing.assert_array_equal(r["sum"], x0 + x1)
        np.testing.assert_array_equal(r["gather1"], np.concatenate([x0, x1], axis=1))
        np.testing.assert_array_equal(r["bcast"], x1)
        assert r["x"] == mine.tolist()                # the input is untouched
    np.testing.assert_array_equal(r0["rs0"], (x0 + x1)[:1])
    np.testing.assert_array_equal(r1["rs0"], (x0 + x1)[1:])
