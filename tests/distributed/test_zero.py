"""ZeroRedundancyOptimizer with DDP in real processes, against one process on the full batch."""
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain.distributed.optim import ZeroRedundancyOptimizer
from tensorbrain.nn.parallel import DistributedDataParallel

HERE = "tests.distributed.test_zero"
BATCH = 12  # divisible by 1, 2, 3 and 4 ranks


def _model():
    """A small MLP with weights drawn from a fixed NumPy stream (identical in every process)."""
    rng = np.random.RandomState(0)
    model = tb.nn.Sequential(tb.nn.Linear(5, 7), tb.nn.Tanh(), tb.nn.Linear(7, 3))
    for p in model.parameters():
        p._data[...] = rng.standard_normal(p.shape).astype(np.float32) * 0.5
    return model


def _data(step):
    rng = np.random.RandomState(100 + step)
    return (tb.tensor(rng.standard_normal((BATCH, 5)).astype(np.float32)),
            tb.tensor(rng.standard_normal((BATCH, 3)).astype(np.float32)))


def _optim_cls(name):
    return {"adam": (tb.optim.Adam, {"lr": 0.05, "weight_decay": 0.01}),
            "sgd": (tb.optim.SGD, {"lr": 0.1, "momentum": 0.9})}[name]


def _train(model, opt, steps, rank=0, world=1, first=0):
    n = BATCH // world
    for s in range(first, first + steps):
        x, y = _data(s)
        x, y = x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()


def _params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def _reference(name, steps):
    model = _model()
    cls, kw = _optim_cls(name)
    _train(model, cls(model.parameters(), **kw), steps)
    return _params(model)


def _zero_run(rank, world, name, steps, bucket_view):
    model = DistributedDataParallel(_model())
    cls, kw = _optim_cls(name)
    opt = ZeroRedundancyOptimizer(model.parameters(), cls, parameters_as_bucket_view=bucket_view,
                                  **kw)
    _train(model, opt, steps, rank, world)
    state_bytes = sum(v.nbytes for st in opt.optim.state.values() for k, v in st.items()
                      if hasattr(v, "nbytes") and not k.startswith("_"))
    return {"params": _params(model.module), "state_bytes": state_bytes}


@pytest.mark.parametrize("world,name,bucket_view", [(2, "adam", False), (3, "adam", True),
                                                    (2, "sgd", True), (3, "sgd", False)])
def test_matches_one_process_on_full_batch(workers, world, name, bucket_view):
    steps = 5
    res = workers(f"{HERE}:_zero_run", world, name, steps, bucket_view, timeout=120)
    ref = _reference(name, steps)
    for r in res:
        for got, want in zip(r["params"], ref, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # the optimizer state is split: every byte is held once, by one rank
    model = _model()
    cls, kw = _optim_cls(name)
    full = cls(model.parameters(), **kw)
    _train(model, full, 1)
    full_bytes = sum(v.nbytes for st in full.state.values() for k, v in st.items()
                     if hasattr(v, "nbytes") and not k.startswith("_"))
    assert sum(r["state_bytes"] for r in res) == full_bytes
    per_elem = full_bytes // sum(p._data.size for p in model.parameters())
    largest = max(p._data.size for p in model.parameters()) * per_elem
    assert all(r["state_bytes"] <= full_bytes / world + largest for r in res)


def _save_then_resume(rank, world, name, path, steps_before, steps_after):
    """Train, save the consolidated state on rank 0, continue; then a fresh model and optimizer
    load the file and continue from the same point: both must end identical."""
    model = DistributedDataParallel(_model())
    cls, kw = _optim_cls(name)
    opt = ZeroRedundancyOptimizer(model.parameters(), cls, **kw)
    _train(model, opt, steps_before, rank, world)
    opt.consolidate_state_dict(to=0)
    if rank == 0:
        tb.save({"model": model.module.state_dict(), "optim": opt.state_dict()}, path)
    dist.barrier()
    _train(model, opt, steps_after, rank, world, first=steps_before)
    return _params(model.module)


def _resume(rank, world, name, path, steps_before, steps_after):
    ckpt = tb.load(path)
    net = _model()
    net.load_state_dict(ckpt["model"])
    model = DistributedDataParallel(net)
    cls, kw = _optim_cls(name)
    opt = ZeroRedundancyOptimizer(model.parameters(), cls, **{**kw, "lr": 123.0})
    opt.load_state_dict(ckpt["optim"])
    assert opt.param_groups[0]["lr"] == kw["lr"] and opt.optim.param_groups[0]["lr"] == kw["lr"]
    _train(model, opt, steps_after, rank, world, first=steps_before)
    return _params(model.module)


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_state_dict_round_trip_reshards(workers, tmp_path, name):
    path = str(tmp_path / "ckpt.safetensors")
    cont = workers(f"{HERE}:_save_then_resume", 3, name, path, 3, 3, timeout=120)
    # the full state dict has the unsharded optimizer's layout: load it into a plain optimizer
    ckpt = tb.load(path)
    model = _model()
    model.load_state_dict(ckpt["model"])
    cls, kw = _optim_cls(name)
    plain = cls(model.parameters(), **kw)
    plain.load_state_dict(ckpt["optim"])
    _train(model, plain, 3, first=3)
    ref = _reference(name, 6)
    for got, want in zip(_params(model), ref, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for r in cont:
        for got, want in zip(r, ref, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # saved at 3 ranks, resumed at 2: each rank picks up the state of its new partition
    for r in workers(f"{HERE}:_resume", 2, name, path, 3, 3, timeout=120):
        for got, want in zip(r, ref, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _partition(rank, world):
    sizes = [100, 60, 50, 30, 10]
    params = [tb.nn.Parameter(tb.zeros(n)) for n in sizes]
    extra = [tb.nn.Parameter(tb.zeros(n)) for n in (40, 5)]
    opt = ZeroRedundancyOptimizer(params[:3], tb.optim.SGD, lr=0.1)
    opt.add_param_group({"params": params[3:], "lr": 0.2})
    opt.add_param_group({"params": extra})
    owned = [[[p._data.size for p in g["params"]] for g in groups]
             for groups in opt._partition_parameters()]
    local_lrs = [g["lr"] for g in opt.optim.param_groups]
    for p in params + extra:
        p.grad = tb.ones(p._data.size)
    opt.step()  # every parameter moves by -lr of its group, whoever owns it
    return {"owned": owned, "local_lrs": local_lrs,
            "values": [float(p._data[0]) for p in params + extra]}


def test_greedy_partition_and_add_param_group(workers):
    res = workers(f"{HERE}:_partition", 2)
    # worked by hand: largest first, each to the rank with fewer elements so far, counts carry
    # over from group to group: 100->0, 60->1, 50->1 (110), then 30->0 (130), 10->1 (120),
    # then 40->1 (160), 5->0 (135)
    assert res[0]["owned"] == [[[100], [30], [5]], [[60, 50], [10], [40]]]
    assert res[0]["local_lrs"] == [0.1, 0.2, 0.1]
    for r in res:
        assert r["values"] == pytest.approx([-0.1] * 3 + [-0.2] * 2 + [-0.1] * 2)


def _unconsolidated(rank, world):
    opt = ZeroRedundancyOptimizer([tb.nn.Parameter(tb.zeros(3))], tb.optim.SGD, lr=0.1)
    opt.consolidate_state_dict(to=1)
    try:
        opt.state_dict()
    except RuntimeError as e:
        return str(e)
    return "ok"


def test_state_dict_needs_consolidation(workers):
    res = workers(f"{HERE}:_unconsolidated", 2)
    assert "consolidate_state_dict(to=0)" in res[0] and res[1] == "ok"


def _mismatch(rank, world):
    ZeroRedundancyOptimizer([tb.nn.Parameter(tb.zeros(3 + rank))], tb.optim.SGD, lr=0.1)


def test_different_params_on_ranks_is_an_error(workers):
    from tensorbrain.testing.distributed import WorkerFailure
    with pytest.raises(WorkerFailure, match=r"rank 1 passed 1 parameters \[\(4,\) float32\]"):
        workers(f"{HERE}:_mismatch", 2)


def test_errors_without_group_and_overlap():
    p = tb.nn.Parameter(tb.zeros(2))
    with pytest.raises(NotImplementedError, match="overlap_with_ddp"):
        ZeroRedundancyOptimizer([p], tb.optim.SGD, overlap_with_ddp=True, lr=0.1)
    with pytest.raises(RuntimeError, match="init_process_group"):
        ZeroRedundancyOptimizer([p], tb.optim.SGD, lr=0.1)


def _more_ranks_than_params(rank, world):
    p = tb.nn.Parameter(tb.ones(3))
    opt = ZeroRedundancyOptimizer([p], tb.optim.Adam, lr=0.5)
    p.grad = tb.ones(3)
    opt.step()
    opt.consolidate_state_dict(to=world - 1)
    sd = opt.state_dict() if rank == world - 1 else None
    return [p.tolist(), len(opt.optim.state), None if sd is None else sorted(sd["state"])]


def test_a_rank_that_owns_nothing_still_syncs(workers):
    res = workers(f"{HERE}:_more_ranks_than_params", 3)
    # Adam's first step moves every element by lr (m/sqrt(v) = 1 after bias correction)
    for rank, (values, n_state, keys) in enumerate(res):
        assert values == pytest.approx([0.5] * 3)
        assert n_state == (1 if rank == 0 else 0)
        assert keys == ([0] if rank == 2 else None)


_GROUPS = [[7, 300, 7, 64, 64, 1], [50, 3, 50], [1000]]  # element counts, per parameter group


def _torch_partition(rank, world):
    import torch
    import torch.distributed as tdist
    from torch.distributed.optim import ZeroRedundancyOptimizer as TorchZero
    tdist.init_process_group("gloo")
    groups = [[torch.nn.Parameter(torch.zeros(n)) for n in sizes] for sizes in _GROUPS]
    opt = TorchZero(groups[0], torch.optim.SGD, lr=0.1)
    for g in groups[1:]:
        opt.add_param_group({"params": g})
    index = {id(p): (gi, pi) for gi, g in enumerate(groups) for pi, p in enumerate(g)}
    out = [[[index[id(p)] for p in g["params"]] for g in per_rank]
           for per_rank in opt._partition_parameters()]
    tdist.destroy_process_group()
    return out


def _our_partition(rank, world):
    groups = [[tb.nn.Parameter(tb.zeros(n)) for n in sizes] for sizes in _GROUPS]
    opt = ZeroRedundancyOptimizer(groups[0], tb.optim.SGD, lr=0.1)
    for g in groups[1:]:
        opt.add_param_group({"params": g})
    index = {id(p): [gi, pi] for gi, g in enumerate(groups) for pi, p in enumerate(g)}
    return [[[index[id(p)] for p in g["params"]] for g in per_rank]
            for per_rank in opt._partition_parameters()]


@pytest.mark.parametrize("world", [2, 3])
def test_partition_is_torchs(workers, world):
    pytest.importorskip("torch")
    want = workers(f"{HERE}:_torch_partition", world, init=None, timeout=120)[0]
    got = workers(f"{HERE}:_our_partition", world)[0]
    assert got == [[[list(ix) for ix in g] for g in per_rank] for per_rank in want]


def _subgroups(rank, world, name):
    """Ranks {0, 1} and {2, 3} each run DDP + ZeRO in their own group on the full batch split
    in two; the state is consolidated on group rank 1 (global ranks 1 and 3)."""
    pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    group = pairs[rank // 2]
    model = DistributedDataParallel(_model(), process_group=group)
    cls, kw = _optim_cls(name)
    opt = ZeroRedundancyOptimizer(model.parameters(), cls, process_group=group, **kw)
    _train(model, opt, 4, rank % 2, 2)
    opt.consolidate_state_dict(to=1)
    n_state = len(opt.state_dict()["state"]) if rank % 2 == 1 else None
    return {"params": _params(model.module), "n_state": n_state}


def test_process_group_subgroups(workers):
    res = workers(f"{HERE}:_subgroups", 4, "adam", timeout=120)
    ref = _reference("adam", 4)
    for r in res:
        for got, want in zip(r["params"], ref, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert [r["n_state"] for r in res] == [None, 4, None, 4]
