"""DeviceMesh: groups per dimension checked by real collectives across 4 processes."""
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain.distributed.device_mesh import DeviceMesh, init_device_mesh

HERE = "tests.distributed.test_device_mesh"


def _mesh_2x2(rank, world):
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    out = {"coord": mesh.get_coordinate(), "shape": list(mesh.shape),
           "dp_rank": mesh.get_local_rank("dp"), "tp_rank": mesh.get_local_rank(1)}
    for name in ("dp", "tp"):
        t = tb.tensor([float(rank)])
        dist.all_reduce(t, group=mesh.get_group(name))
        out[name + "_sum"] = t.item()
        out[name + "_ranks"] = dist.get_process_group_ranks(mesh[name].get_group())
    sub = mesh["tp"]
    out["sub"] = [sub.ndim, sub.size(), sub.mesh.tolist()]
    return out


def test_2x2_mesh_groups_follow_torch_layout(workers):
    res = workers(f"{HERE}:_mesh_2x2", 4)
    # ranks laid out row-major: [[0, 1], [2, 3]]; "dp" is dim 0 (columns), "tp" dim 1 (rows)
    for rank, r in enumerate(res):
        row, col = divmod(rank, 2)
        assert r["coord"] == [row, col] and r["shape"] == [2, 2]
        assert r["dp_rank"] == row and r["tp_rank"] == col
        assert r["dp_ranks"] == [col, col + 2] and r["dp_sum"] == col + col + 2
        assert r["tp_ranks"] == [2 * row, 2 * row + 1] and r["tp_sum"] == 4 * row + 1
        assert r["sub"] == [1, 2, [2 * row, 2 * row + 1]]


def _whole_world_reuses_default(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    return mesh.get_group() is dist.distributed_c10d._default("x")


def test_1d_mesh_is_the_default_group(workers):
    assert workers(f"{HERE}:_whole_world_reuses_default", 2) == [True, True]


@pytest.fixture
def solo():
    dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_errors(solo):
    with pytest.raises(ValueError, match=r"mesh_shape \(2,\) has 2 ranks but the world size is 1"):
        init_device_mesh("cpu", (2,))
    with pytest.raises(ValueError, match="device_type 'tpu'"):
        init_device_mesh("tpu", (1,))
    with pytest.raises(ValueError, match="one per dimension"):
        init_device_mesh("cpu", (1,), mesh_dim_names=("a", "b"))
    mesh = init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp"))
    with pytest.raises(KeyError, match="no dimension named 'pp'"):
        mesh["pp"]
    with pytest.raises(RuntimeError, match="2 dimensions"):
        mesh.get_group()
    with pytest.raises(ValueError, match="distinct"):
        DeviceMesh("cpu", [0, 0])
    assert mesh == init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp"))
    assert "mesh_dim_names=('dp', 'tp')" in repr(mesh)
    assert np.array_equal(mesh.mesh.numpy(), [[0]])
