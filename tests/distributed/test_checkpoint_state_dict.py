"""get_state_dict/set_state_dict + dcp.save/load: DDP and ZeRO training resumed at another world
size matches one process trained on the full batch without interruption."""
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed.checkpoint as dcp
from tensorbrain.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                           get_optimizer_state_dict,
                                                           get_state_dict, set_state_dict)
from tensorbrain.distributed.optim import ZeroRedundancyOptimizer
from tensorbrain.nn.parallel import DistributedDataParallel
from tests.distributed.test_zero import _data, _model, _optim_cls, _params, _reference, _train

HERE = "tests.distributed.test_checkpoint_state_dict"


def _build(world, name, zero):
    net = _model()
    model = DistributedDataParallel(net) if world > 1 else net
    cls, kw = _optim_cls(name)
    if zero:
        opt = ZeroRedundancyOptimizer(model.parameters(), cls, **kw)
    else:
        opt = cls(model.parameters(), **kw)
    return model, opt


def _save_run(rank, world, name, zero, path, steps):
    model, opt = _build(world, name, zero)
    _train(model, opt, steps, rank, world)
    model_sd, optim_sd = get_state_dict(model, opt)
    assert all(not k.startswith("module.") for k in model_sd)
    dcp.save({"model": model_sd, "optim": optim_sd, "epoch": steps}, checkpoint_id=path)
    return sorted(optim_sd["state"])


def _resume_run(rank, world, name, zero, path, steps):
    model, opt = _build(world, name, zero)
    model_sd, optim_sd = get_state_dict(model, opt)  # creates the optimizer state to load into
    sd = {"model": model_sd, "optim": optim_sd, "epoch": 0}
    dcp.load(sd, checkpoint_id=path)
    set_state_dict(model, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
    _train(model, opt, steps, rank, world, first=sd["epoch"])
    return _params(model.module if world > 1 else model)


@pytest.mark.parametrize("name,save,load", [("adam", (2, True), (3, True)),
                                            ("adam", (3, True), (1, False)),
                                            ("sgd", (1, False), (2, True)),
                                            ("sgd", (2, False), (2, True))])
def test_resume_at_another_world_size_matches_one_process(workers, tmp_path, name, save, load):
    path = str(tmp_path / "ckpt")
    owned = workers(f"{HERE}:_save_run", save[0], name, save[1], path, 3, timeout=120)
    if save[1]:  # ZeRO: each rank holds the state of its own parameters only
        assert sorted(k for o in owned for k in o) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    ref = _reference(name, 6)
    for r in workers(f"{HERE}:_resume_run", load[0], name, load[1], path, 3, timeout=120):
        for got, want in zip(r, ref, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _full_zero_state(rank, world):
    model, opt = _build(world, "adam", True)
    _train(model, opt, 2, rank, world)
    full = get_optimizer_state_dict(model, opt, options=StateDictOptions(full_state_dict=True))
    offload = get_state_dict(model, opt, options=StateDictOptions(full_state_dict=True,
                                                                  cpu_offload=True))
    return {"state": {k: v["exp_avg_sq"].numpy().copy() for k, v in full["state"].items()},
            "step": [v["step"] for v in full["state"].values()],
            "groups": full["param_groups"], "offload_empty": offload == ({}, {})}


def test_full_state_dict_of_zero_matches_plain_adam(workers):
    model = _model()
    cls, kw = _optim_cls("adam")
    plain = cls(model.parameters(), **kw)
    _train(model, plain, 2)
    names = [n for n, _ in model.named_parameters()]
    want = {n: plain.state[p]["exp_avg_sq"] for n, p in zip(names, model.parameters(),
                                                              strict=True)}
    res = workers(f"{HERE}:_full_zero_state", 2)
    for rank, r in enumerate(res):
        assert sorted(r["state"]) == sorted(names) and r["step"] == [2.0] * 4
        for n in names:
            np.testing.assert_allclose(r["state"][n], want[n], rtol=1e-5, atol=1e-8)
        assert r["groups"][0]["params"] == names and r["groups"][0]["lr"] == kw["lr"]
        assert r["offload_empty"] == (rank != 0)


def test_fresh_optimizer_state_is_created_without_moving_params():
    model = _model()
    before = _params(model)
    opt = tb.optim.Adam(model.parameters(), lr=0.1, weight_decay=0.1)
    sd = get_optimizer_state_dict(model, opt)
    assert sorted(sd["state"]) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert opt.param_groups[0]["lr"] == 0.1
    for a, b in zip(_params(model), before, strict=True):
        np.testing.assert_array_equal(a, b)
    assert all(p.grad is None for p in model.parameters())


def test_errors():
    model = _model()
    stranger = tb.nn.Parameter(tb.zeros(2))
    with pytest.raises(KeyError, match=r"not parameters of the model \(shapes \[\(2,\)\]\)"):
        get_optimizer_state_dict(model, tb.optim.SGD([stranger], lr=0.1))
    opt = tb.optim.Adam(model.parameters())
    x, y = _data(0)
    ((model(x) - y) ** 2).mean().backward()
    with pytest.raises(RuntimeError, match="zero_grad"):
        get_optimizer_state_dict(model, opt)
    with pytest.raises(ValueError, match=r"broadcast_from_rank0=True\) needs full_state_dict"):
        get_model_state_dict(model, options=StateDictOptions(broadcast_from_rank0=True))
    # with full_state_dict it is accepted; one process has nothing to broadcast
    sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True,
                                                              broadcast_from_rank0=True))
    assert list(sd) == list(model.state_dict())


# ***** DTensor parameters (fully_shard's layout): state saved as shards, loaded anywhere *****
def _grads(step):
    rng = np.random.RandomState(50 + step)
    return [rng.standard_normal(p.shape).astype(np.float32) for p in _model().parameters()]


def _sharded_adam_save(rank, world, path, steps):
    """Parameters as DTensor Shard(0) parameters; Adam steps the local shards with the local
    shards of fixed full gradients (Adam is elementwise: the same as one process on the whole)."""
    from tensorbrain.distributed.device_mesh import init_device_mesh
    from tensorbrain.distributed.tensor import DTensor, Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (world,))
    model = _model()
    for mod in (model[0], model[2]):
        for name in ("weight", "bias"):
            full = getattr(mod, name)
            setattr(mod, name, DTensor._as_parameter(distribute_tensor(full.detach(), mesh,
                                                                       [Shard(0)])))
    opt = tb.optim.Adam(model.parameters(), lr=0.05)
    for s in range(steps):
        for p, g in zip(model.parameters(), _grads(s), strict=True):
            p.grad = tb.tensor(g)  # the full gradient, sliced to this rank's rows below
            d = distribute_tensor(p.grad, mesh, [Shard(0)])
            p.grad = tb.tensor(d._data.copy())
        opt.step()
    model_sd, optim_sd = get_state_dict(model, opt)
    assert type(optim_sd["state"]["0.weight"]["exp_avg"]).__name__ == "DTensor"
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=path)


def test_dtensor_parameters_save_sharded_and_load_into_a_plain_model(workers, tmp_path):
    path = str(tmp_path / "ckpt")
    workers(f"{HERE}:_sharded_adam_save", 2, path, 3)
    import json
    import os
    entries = json.load(open(os.path.join(path, ".metadata")))["state_dict_metadata"]
    for key in ("model.0.weight", "optim.state.0.weight.exp_avg"):  # 7 rows: 4 + 3, one per rank
        assert [c["lengths"] for c in entries[key]["chunks"]] == [[4, 5], [3, 5]]
    model = _model()
    opt = tb.optim.Adam(model.parameters(), lr=0.05)
    model_sd, optim_sd = get_state_dict(model, opt)
    dcp.load({"model": model_sd, "optim": optim_sd}, checkpoint_id=path)
    set_state_dict(model, opt, model_state_dict=model_sd, optim_state_dict=optim_sd)
    for s in range(3, 5):
        for p, g in zip(model.parameters(), _grads(s), strict=True):
            p.grad = tb.tensor(g)
        opt.step()
    ref = _model()
    ref_opt = tb.optim.Adam(ref.parameters(), lr=0.05)
    for s in range(5):
        for p, g in zip(ref.parameters(), _grads(s), strict=True):
            p.grad = tb.tensor(g)
        ref_opt.step()
    for got, want in zip(_params(model), _params(ref), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ***** torch's tutorial pattern: an AppState (Stateful) in the state dict *****
class AppState:
    """As in torch's "Getting Started with Distributed Checkpoint" (no base class needed)."""

    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def state_dict(self):
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        return {"model": model_sd, "optim": optim_sd}

    def load_state_dict(self, state_dict):
        set_state_dict(self.model, self.optimizer, model_state_dict=state_dict["model"],
                       optim_state_dict=state_dict["optim"])


def _app_state(rank, world, path, mode, steps):
    model, opt = _build(world, "adam", False)
    sd = {"app": AppState(model, opt), "epoch": 0}
    if mode == "load":
        dcp.load(sd, checkpoint_id=path)
    first = sd["epoch"]
    _train(model, opt, steps, rank, world, first=first)
    sd["epoch"] = first + steps
    dcp.save(sd, checkpoint_id=path)
    return _params(model.module if world > 1 else model)


def test_stateful_app_state_as_in_torchs_tutorial(workers, tmp_path):
    assert isinstance(AppState(None, None), dcp.Stateful)
    path = str(tmp_path / "ckpt")
    workers(f"{HERE}:_app_state", 2, path, "save", 3, timeout=120)
    res = workers(f"{HERE}:_app_state", 1, path, "load", 3, timeout=120)
    for got, want in zip(res[0], _reference("adam", 6), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    sd = {"epoch": -1}
    dcp.load(sd, checkpoint_id=path)
    assert sd == {"epoch": 6}


# ***** FSDP1 (flat parameters): torch's DCP tutorial pattern *****
def _fsdp_build(name):
    from tensorbrain.distributed.fsdp import FullyShardedDataParallel
    model = FullyShardedDataParallel(_model())
    cls, kw = _optim_cls(name)
    return model, cls(model.parameters(), **kw)


def _full_params(model):
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    return [full[k].numpy().copy() for k in ("0.weight", "0.bias", "2.weight", "2.bias")]


def _fsdp_save(rank, world, name, path, steps):
    model, opt = _fsdp_build(name)
    _train(model, opt, steps, rank, world)
    model_sd, optim_sd = get_state_dict(model, opt)     # sharded: DTensor values
    dcp.save({"model": model_sd, "optim": optim_sd, "epoch": steps}, checkpoint_id=path)
    return sorted(model_sd), sorted(optim_sd["state"])


def _fsdp_resume(rank, world, name, path, steps):
    model, opt = _fsdp_build(name)
    model_sd, optim_sd = get_state_dict(model, opt)
    sd = {"model": model_sd, "optim": optim_sd, "epoch": 0}
    dcp.load(sd, checkpoint_id=path)
    set_state_dict(model, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
    _train(model, opt, steps, rank, world, first=sd["epoch"])
    return _full_params(model)


@pytest.mark.parametrize("name", ["adam"])
def test_fsdp1_sharded_checkpoint_resumes_as_one_process(workers, tmp_path, name):
    path = str(tmp_path / "ckpt")
    names = ["0.bias", "0.weight", "2.bias", "2.weight"]
    saved = workers(f"{HERE}:_fsdp_save", 2, name, path, 3, timeout=120)
    assert saved[0] == (names, names)          # original parameter names, not flat ones
    ref = _reference(name, 6)
    for got in workers(f"{HERE}:_fsdp_resume", 2, name, path, 3, timeout=120):
        for g, want in zip(got, ref, strict=True):
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
    # the same files resume a plain single-process model (resharded to one rank)
    for got in workers(f"{HERE}:_resume_run", 1, name, False, path, 3, timeout=120):
        for g, want in zip(got, ref, strict=True):
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
