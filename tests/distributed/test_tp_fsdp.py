"""2-D parallelism at 4 ranks (dp=2 x tp=2): tensor parallel inside FSDP (fully_shard and
FullyShardedDataParallel, flat and original parameters), with gradient clipping, trains like one
process on the full batch (parameters compared after K steps); pp x dp with FSDP likewise. Bad
meshes and Partial parameters raise clear errors."""
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain.distributed.device_mesh import init_device_mesh
from tensorbrain.distributed.fsdp import FullyShardedDataParallel as FSDP
from tensorbrain.distributed.fsdp import ShardingStrategy, StateDictType, fully_shard
from tensorbrain.distributed.fsdp.wrap import ModuleWrapPolicy
from tensorbrain.distributed.tensor import DTensor, Partial, Replicate, Shard
from tensorbrain.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                     parallelize_module)
from tensorbrain.testing.distributed import run_workers

HERE = "tests.distributed.test_tp_fsdp"
D, BATCH, STEPS, MAX_NORM = 6, 8, 3, 0.3
F = tb.nn.functional


class Block(tb.nn.Module):
    """A Megatron MLP block (5 hidden units per rank pair: uneven TP split of 2 x D + 1)."""

    def __init__(self):
        super().__init__()
        self.w1, self.w2 = tb.nn.Linear(D, 2 * D + 1), tb.nn.Linear(2 * D + 1, D)

    def forward(self, x):
        return x + self.w2(F.gelu(self.w1(x)))


class Net(tb.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = tb.nn.ModuleList([Block(), Block()])
        self.norm = tb.nn.LayerNorm(D)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.norm(x)


PLAN = {"blocks.*.w1": ColwiseParallel(), "blocks.*.w2": RowwiseParallel()}


def _build():
    tb.manual_seed(0)
    return Net()


def _data():
    rng = np.random.default_rng(3)
    return (tb.tensor(rng.standard_normal((BATCH, D)).astype(np.float32)),
            tb.tensor(rng.standard_normal((BATCH, D)).astype(np.float32)))


def _steps(model, x, y, clip, keep=None):
    opt = tb.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    if keep is not None:
        keep.append(opt)
    norms = []
    for _ in range(STEPS):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        if clip == "nn":
            norms.append(float(tb.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)))
        elif clip == "method":
            norms.append(float(model.clip_grad_norm_(MAX_NORM)))
        opt.step()
    return norms


def _reference(clip):
    model = _build()
    x, y = _data()
    norms = _steps(model, x, y, "nn" if clip else None)
    return {n: p.detach().numpy() for n, p in model.named_parameters()}, norms


def _two_d(rank, world, kind, clip):
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = parallelize_module(_build(), mesh["tp"], PLAN)
    x, y = _data()
    dp = mesh.get_local_rank("dp")
    half = BATCH // 2
    if kind == "tp":   # tensor parallel alone: every rank of the tp group takes the whole batch
        norms = _steps(model, x, y, clip)
        return {"full": {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach()
                         .numpy().tolist() for n, p in model.named_parameters()},
                "norms": norms}
    if kind == "fully_shard":
        for b in model.blocks:
            fully_shard(b, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
    elif kind == "dp_mesh_dims":   # torch's newer form: the whole mesh, its dp dimension named
        from tensorbrain.distributed.fsdp import DataParallelMeshDims
        dims = DataParallelMeshDims(shard="dp")
        for b in model.blocks:
            fully_shard(b, mesh=mesh, dp_mesh_dims=dims)
        fully_shard(model, mesh=mesh, dp_mesh_dims=dims)
        kind = "fully_shard"
    else:
        model = FSDP(model, device_mesh=mesh["dp"], auto_wrap_policy=ModuleWrapPolicy({Block}),
                     use_orig_params=kind == "fsdp_orig")
    norms = _steps(model, x[dp * half:(dp + 1) * half], y[dp * half:(dp + 1) * half], clip)
    if kind == "fully_shard":
        layout = {n: [str(pl) for pl in p.placements] for n, p in model.named_parameters()}
        grads = {n: type(p.grad).__name__ for n, p in model.named_parameters()}
        full = {n: p.full_tensor().detach().numpy().tolist() for n, p in model.named_parameters()}
        return {"full": full, "layout": layout, "grads": grads, "norms": norms}
    sd = model.state_dict()
    full = {k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().numpy().tolist()
            for k, v in sd.items()}
    with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
        sharded = model.state_dict()
    layout = {k: [str(pl) for pl in v.placements] for k, v in sharded.items()}
    again = {k: v.full_tensor().detach().numpy().tolist() for k, v in sharded.items()}
    # the sharded state dict loads back (after scrambling the parameters) to the same values
    with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
        with tb.no_grad():
            for p in model.parameters():
                p.data[...] = 0
        model.load_state_dict(sharded)
    reloaded = {k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().numpy().tolist()
                for k, v in model.state_dict().items()}
    return {"full": full, "layout": layout, "again": again, "reloaded": reloaded,
            "norms": norms}


def _compare(got, ref):
    assert sorted(got) == sorted(ref)
    for k, v in ref.items():
        np.testing.assert_allclose(np.asarray(got[k]), v, rtol=2e-5, atol=2e-6, err_msg=k)


CASES = [("tp", "nn"), ("fully_shard", None), ("fully_shard", "nn"), ("dp_mesh_dims", "nn"),
         ("fsdp", "method"), ("fsdp_orig", "nn")]


@pytest.mark.parametrize("kind, clip", CASES)
def test_tp_inside_fsdp_matches_one_process(kind, clip):
    ref, ref_norms = _reference(clip is not None)
    res = run_workers(f"{HERE}:_two_d", 4, kind, clip, timeout=180)
    if clip is not None:
        assert min(ref_norms) > MAX_NORM   # the clipping did something
    for r in res:
        _compare(r["full"], ref)
        np.testing.assert_allclose(r["norms"], ref_norms, rtol=1e-5)
    if kind == "tp":
        return
    if kind in ("fully_shard", "dp_mesh_dims"):
        lay = res[0]["layout"]
        assert lay["blocks.0.w1.weight"] == ["_StridedShard(dim=0, sf=2)", "Shard(dim=0)"]
        assert lay["blocks.0.w2.weight"] == ["Shard(dim=0)", "Shard(dim=1)"]
        assert lay["blocks.0.w2.bias"] == ["Shard(dim=0)", "Replicate()"]
        assert lay["norm.weight"] == ["Shard(dim=0)"]
        assert set(res[0]["grads"].values()) == {"DTensor"}
    else:
        lay = res[0]["layout"]
        assert lay["blocks.1.w1.bias"] == ["_StridedShard(dim=0, sf=2)", "Shard(dim=0)"]
        assert lay["blocks.1.w2.weight"] == ["Shard(dim=0)", "Shard(dim=1)"]
        for r in res:
            _compare(r["again"], ref)
            _compare(r["reloaded"], ref)


# ***** pp x dp with FSDP *****
def _pp_fsdp(rank, world, kind):
    from tests.distributed.test_pipelining import BATCH as PB
    from tests.distributed.test_pipelining import _train
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp", "dp"))
    dp = mesh.get_local_rank("dp")
    half = PB // 2
    return _train("1f1b", 2, 4, pp_group=mesh.get_group("pp"), dp_group=mesh.get_group("dp"),
                  rows=(dp * half, (dp + 1) * half), wrap=kind, dp_mesh=mesh["dp"])


@pytest.mark.parametrize("kind", ["fully_shard", "fsdp"])
def test_pp_x_dp_with_fsdp_matches_one_process(kind):
    from tests.distributed.test_pipelining import _check
    res = run_workers(f"{HERE}:_pp_fsdp", 4, kind, timeout=180)
    # mesh [[0, 1], [2, 3]]: ranks 0, 1 hold stage 0 sharded between them, 2, 3 stage 1
    assert res[0]["params"] == res[1]["params"] and res[2]["params"] == res[3]["params"]
    _check([res[0], res[2]], 2)


# ***** errors *****
def _bad_mesh(rank, world):
    out = []
    try:
        init_device_mesh("cpu", (2, 3), mesh_dim_names=("dp", "tp"))
    except ValueError as exc:
        out.append(str(exc))
    # a dp group that is not the other dimension of the TP mesh's grid: the TP mesh along
    # rows, the "dp" mesh along the same rows
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = parallelize_module(_build(), mesh["tp"], PLAN)
    try:
        fully_shard(model, mesh=mesh["tp"])
    except ValueError as exc:
        out.append(str(exc))
    model = _build()
    w = model.norm.weight
    dt = DTensor.from_local(w.detach(), mesh["tp"], [Partial()])
    model.norm.weight = DTensor._as_parameter(dt)
    try:
        FSDP(model, device_mesh=mesh["dp"])
    except ValueError as exc:
        out.append(str(exc))
    model = parallelize_module(_build(), mesh["tp"], PLAN)
    try:
        FSDP(model, device_mesh=mesh, sharding_strategy=ShardingStrategy.HYBRID_SHARD)
    except NotImplementedError as exc:
        out.append(str(exc))
    return out


def test_bad_meshes_and_partial_parameters_raise_clearly():
    res = run_workers(f"{HERE}:_bad_mesh", 4, timeout=120)
    for msgs in res:
        assert len(msgs) == 4, msgs
        assert "mesh_shape (2, 3) has 6 ranks but the world size is 4" in msgs[0]
        assert "are not the two dimensions of one mesh" in msgs[1]
        assert "mesh['dp']" in msgs[1]
        assert "norm.weight" in msgs[2] and "Partial" in msgs[2] and "Replicate()" in msgs[2]
        assert "3-D mesh" in msgs[3] and "not supported yet" in msgs[3]


def test_one_rank_two_d_mesh_runs_in_process():
    dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp"))
        model = parallelize_module(_build(), mesh["tp"], PLAN)
        fully_shard(model, mesh=mesh["dp"])
        x, y = _data()
        _steps(model, x, y, "nn")
        got = {n: p.full_tensor().detach().numpy() for n, p in model.named_parameters()}
        assert model.blocks[0].w1.weight.placements == (Shard(0), Shard(0)) or \
            str(model.blocks[0].w1.weight.placements[1]) == "Shard(dim=0)"
        assert model.norm.weight.placements == (Shard(0),)
        assert Replicate() in model.blocks[0].w2.bias.placements
    finally:
        dist.destroy_process_group()
    ref, _ = _reference(True)
    _compare({k: v.tolist() for k, v in got.items()}, ref)


# ***** the 2-D model's sharded state dict through tensorbrain.distributed.checkpoint *****
def _dcp_save(rank, world, path):
    import tensorbrain.distributed.checkpoint as dcp
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = parallelize_module(_build(), mesh["tp"], PLAN)
    for b in model.blocks:
        fully_shard(b, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    x, y = _data()
    dp = mesh.get_local_rank("dp")
    half = BATCH // 2
    _steps(model, x[dp * half:(dp + 1) * half], y[dp * half:(dp + 1) * half], "nn")
    dcp.save({"model": model.state_dict()}, checkpoint_id=path)


def test_two_d_checkpoint_loads_into_a_plain_model(tmp_path):
    import tensorbrain.distributed.checkpoint as dcp
    path = str(tmp_path / "ckpt")
    run_workers(f"{HERE}:_dcp_save", 4, path, timeout=180)
    model = _build()
    sd = {"model": model.state_dict()}
    with tb.no_grad():
        for p in model.parameters():
            p.data[...] = 0
    dcp.load(sd, checkpoint_id=path)
    model.load_state_dict(sd["model"])
    ref, _ = _reference(True)
    _compare({n: p.detach().numpy() for n, p in model.named_parameters()}, ref)


# ***** FSDP1's optimizer state dict with tensor-parallel parameters *****
def _optim_sd(rank, world):
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = FSDP(parallelize_module(_build(), mesh["tp"], PLAN), device_mesh=mesh["dp"],
                 auto_wrap_policy=ModuleWrapPolicy({Block}))
    x, y = _data()
    dp = mesh.get_local_rank("dp")
    half = BATCH // 2
    keep = []
    _steps(model, x[dp * half:(dp + 1) * half], y[dp * half:(dp + 1) * half], None, keep)
    opt = keep[0]
    osd = FSDP.optim_state_dict(model, opt)
    full = {k: (v["momentum_buffer"].full_tensor() if isinstance(v["momentum_buffer"], DTensor)
                else v["momentum_buffer"]).detach().numpy().tolist()
            for k, v in osd["state"].items()}
    before = [s["momentum_buffer"].copy() for s in opt.state.values()]
    for st in opt.state.values():
        st["momentum_buffer"][...] = 0
    opt.load_state_dict(FSDP.optim_state_dict_to_load(model, opt, osd))
    after = [s["momentum_buffer"] for s in opt.state.values()]
    same = all(np.array_equal(np.asarray(a), np.asarray(b))
               for a, b in zip(before, after, strict=True))
    return {"full": full, "same": same}


def test_fsdp1_optimizer_state_dict_with_tp_parameters():
    model = _build()
    x, y = _data()
    keep = []
    _steps(model, x, y, None, keep)
    names = {id(p): n for n, p in model.named_parameters()}
    ref = {names[id(p)]: np.asarray(st["momentum_buffer"]) for p, st in keep[0].state.items()}
    for r in run_workers(f"{HERE}:_optim_sd", 4, timeout=180):
        _compare(r["full"], ref)
        assert r["same"]
