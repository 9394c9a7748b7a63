"""Worker functions for the FSDP tests (imported by name in each process)."""
import numpy as np

import tensorbrain as tb
from tensorbrain.distributed.fsdp import (CPUOffload, FullStateDictConfig,
                                          FullyShardedDataParallel as FSDP, MixedPrecision,
                                          ShardingStrategy, StateDictType)
from tensorbrain.distributed.fsdp.wrap import ModuleWrapPolicy

STEPS, BATCH = 3, 8


def make_model(seed=0):
    tb.manual_seed(seed)
    return tb.nn.Sequential(tb.nn.Linear(6, 9), tb.nn.Tanh(), tb.nn.Linear(9, 7), tb.nn.Tanh(),
                            tb.nn.Linear(7, 3))


def data():
    rng = np.random.RandomState(1)
    x = rng.randn(STEPS, BATCH, 6).astype(np.float32)
    y = rng.randn(STEPS, BATCH, 3).astype(np.float32)
    return x, y


def make_optim(params, kind):
    if kind == "adam":
        return tb.optim.Adam(params, lr=0.05)
    return tb.optim.SGD(params, lr=0.1, momentum=0.9)


def reference(opt="sgd", steps=STEPS):
    """One process, full batch: the state dict after ``steps`` steps, as NumPy arrays."""
    model = make_model()
    optim = make_optim(model.parameters(), opt)
    x, y = data()
    for s in range(steps):
        optim.zero_grad()
        loss = ((model(tb.tensor(x[s])) - tb.tensor(y[s])) ** 2).mean()
        loss.backward()
        optim.step()
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def train_many(rank, world, cfgs):
    """Train once per config dict (keywords of ``train``); one state dict per config."""
    return [train(rank, world, **cfg) for cfg in cfgs]


def train(rank, world, strategy="FULL_SHARD", wrap="linear", opt="sgd", mp=None, offload=False,
          orig=False, mesh_shape=None, prefetch="BACKWARD_PRE", forward_prefetch=False):
    from tensorbrain.distributed.fsdp import BackwardPrefetch
    from tensorbrain.distributed.device_mesh import init_device_mesh
    model = make_model()
    kw = dict(sharding_strategy=ShardingStrategy[strategy], use_orig_params=orig,
              backward_prefetch=BackwardPrefetch[prefetch] if prefetch else None,
              forward_prefetch=forward_prefetch)
    if wrap == "linear":
        kw["auto_wrap_policy"] = ModuleWrapPolicy({tb.nn.Linear})
    if mp is not None:
        kw["mixed_precision"] = MixedPrecision(param_dtype=mp, reduce_dtype=mp)
    if offload:
        kw["cpu_offload"] = CPUOffload(offload_params=True)
    if mesh_shape is not None:
        kw["device_mesh"] = init_device_mesh("cpu", tuple(mesh_shape))
    fsdp = FSDP(model, **kw)
    optim = make_optim(fsdp.parameters(), opt)
    x, y = data()
    per = BATCH // world
    lo, hi = rank * per, (rank + 1) * per
    for s in range(STEPS):
        optim.zero_grad()
        out = fsdp(tb.tensor(x[s, lo:hi]))
        loss = ((out.float() - tb.tensor(y[s, lo:hi])) ** 2).mean()
        loss.backward()
        optim.step()
    with tb.no_grad():       # an evaluation forward on the whole batch (reshards after it)
        ev = fsdp(tb.tensor(x[0])).float().numpy().tolist()
    cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=False)
    with FSDP.state_dict_type(fsdp, StateDictType.FULL_STATE_DICT, cfg):
        sd = fsdp.state_dict()
    return {"sd": {k: v.numpy().tolist() for k, v in sd.items()}, "eval": ev}


def reference_adam_state():
    """One process, Adam, full batch: parameters and exp_avg/exp_avg_sq by parameter name."""
    model = make_model()
    optim = make_optim(model.parameters(), "adam")
    x, y = data()
    for s in range(STEPS):
        optim.zero_grad()
        ((model(tb.tensor(x[s])) - tb.tensor(y[s])) ** 2).mean().backward()
        optim.step()
    names = {id(p): n for n, p in model.named_parameters()}
    return {names[id(p)]: {k: np.asarray(v).copy() for k, v in st.items()}
            for p, st in optim.state.items()}


def _step(fsdp, optim, x, y, rank, world):
    per = x.shape[0] // world
    lo, hi = rank * per, (rank + 1) * per
    optim.zero_grad()
    ((fsdp(tb.tensor(x[lo:hi])) - tb.tensor(y[lo:hi])) ** 2).mean().backward()
    optim.step()


def state_dicts(rank, world, orig):
    """Train 3 steps with Adam; return full/sharded model and optimizer state dicts, then
    reload them into a fresh FSDP model + optimizer and train one more step."""
    from tensorbrain.distributed.tensor import DTensor, Shard
    from tensorbrain.distributed.fsdp import (FullOptimStateDictConfig,
                                              ShardedStateDictConfig)
    policy = ModuleWrapPolicy({tb.nn.Linear})
    fsdp = FSDP(make_model(), auto_wrap_policy=policy, use_orig_params=orig)
    optim = make_optim(fsdp.parameters(), "adam")
    x, y = data()
    for s in range(STEPS):
        _step(fsdp, optim, x[s], y[s], rank, world)
    out = {}
    with FSDP.state_dict_type(fsdp, StateDictType.FULL_STATE_DICT,
                              FullStateDictConfig(rank0_only=True),
                              FullOptimStateDictConfig()):
        full = fsdp.state_dict()
        osd = FSDP.optim_state_dict(fsdp, optim)
    out["full_keys"] = list(full)
    out["full"] = {k: v.numpy().tolist() for k, v in full.items()}
    out["optim"] = {k: {kk: (vv.numpy().tolist() if hasattr(vv, "numpy") else vv)
                        for kk, vv in st.items()} for k, st in osd["state"].items()}
    out["optim_groups"] = [g["params"] for g in osd["param_groups"]]
    with FSDP.state_dict_type(fsdp, StateDictType.SHARDED_STATE_DICT, ShardedStateDictConfig()):
        sharded = fsdp.state_dict()
        sosd = FSDP.optim_state_dict(fsdp, optim)
    out["sharded"] = {k: [type(v).__name__, v.placements == (Shard(0),), list(v.shape),
                          v.to_local().numpy().tolist(), v.full_tensor().numpy().tolist()]
                      for k, v in sharded.items() if isinstance(v, DTensor)}
    # reload everything into a fresh model (different init) and take one more step
    fsdp2 = FSDP(make_model(seed=5), auto_wrap_policy=policy, use_orig_params=orig)
    optim2 = make_optim(fsdp2.parameters(), "adam")
    with FSDP.state_dict_type(fsdp2, StateDictType.SHARDED_STATE_DICT):
        fsdp2.load_state_dict(sharded)
        optim2.load_state_dict(FSDP.optim_state_dict_to_load(fsdp2, optim2, sosd))
    rng = np.random.RandomState(2)
    x4, y4 = rng.randn(BATCH, 6).astype(np.float32), rng.randn(BATCH, 3).astype(np.float32)
    _step(fsdp2, optim2, x4, y4, rank, world)
    with FSDP.state_dict_type(fsdp2, StateDictType.FULL_STATE_DICT):
        out["resumed"] = {k: v.numpy().tolist() for k, v in fsdp2.state_dict().items()}
    return out


def full_optim_id_keyed(rank, world, orig):
    """torch's deprecated FSDP1 optimizer-state API: 3 Adam steps, ``full_optim_state_dict``
    (ID-keyed, rank 0) loaded into a plain Adam over a plain model; then
    ``scatter_full_optim_state_dict`` (and ``shard_``) back into a fresh FSDP model + Adam,
    which takes the fourth step of ``reference_resumed``."""
    policy = ModuleWrapPolicy({tb.nn.Linear})
    fsdp = FSDP(make_model(), auto_wrap_policy=policy, use_orig_params=orig)
    optim = make_optim(fsdp.parameters(), "adam")
    x, y = data()
    for s in range(STEPS):
        _step(fsdp, optim, x[s], y[s], rank, world)
    full = FSDP.full_optim_state_dict(fsdp, optim)
    everyone = FSDP.full_optim_state_dict(fsdp, optim, rank0_only=False)
    with FSDP.state_dict_type(fsdp, StateDictType.FULL_STATE_DICT):
        model_sd = fsdp.state_dict()
    out = {"empty_off_rank0": full == {} if rank else None}
    if rank == 0:
        plain = make_model(seed=9)
        plain.load_state_dict(model_sd)
        popt = make_optim(plain.parameters(), "adam")
        popt.load_state_dict(full)
        names = {id(p): n for n, p in plain.named_parameters()}
        out["plain_state"] = {names[id(p)]: {k: np.asarray(st[k]).tolist()
                                             for k in ("exp_avg", "exp_avg_sq")}
                              for p, st in popt.state.items()}
    fsdp2 = FSDP(make_model(seed=5), auto_wrap_policy=policy, use_orig_params=orig)
    optim2 = make_optim(fsdp2.parameters(), "adam")
    with FSDP.state_dict_type(fsdp2, StateDictType.FULL_STATE_DICT):
        fsdp2.load_state_dict(model_sd)
    optim2.load_state_dict(FSDP.scatter_full_optim_state_dict(full if rank == 0 else None,
                                                              fsdp2, optim=optim2))
    check = FSDP.shard_full_optim_state_dict(everyone, fsdp2, optim=optim2)
    out["shard_equals_scatter"] = all(
        np.array_equal(np.asarray(v), np.asarray(optim2.state_dict()["state"][i][k]))
        for i, st in check["state"].items() for k, v in st.items() if k != "step")
    rng = np.random.RandomState(2)
    x4, y4 = rng.randn(BATCH, 6).astype(np.float32), rng.randn(BATCH, 3).astype(np.float32)
    _step(fsdp2, optim2, x4, y4, rank, world)
    with FSDP.state_dict_type(fsdp2, StateDictType.FULL_STATE_DICT):
        out["resumed"] = {k: v.numpy().tolist() for k, v in fsdp2.state_dict().items()}
    return out


def reference_resumed():
    """One process: 3 Adam steps then one on the extra batch of ``state_dicts``."""
    model = make_model()
    optim = make_optim(model.parameters(), "adam")
    x, y = data()
    rng = np.random.RandomState(2)
    x4, y4 = rng.randn(BATCH, 6).astype(np.float32), rng.randn(BATCH, 3).astype(np.float32)
    for xs, ys in list(zip(x, y, strict=False)) + [(x4, y4)]:
        optim.zero_grad()
        ((model(tb.tensor(xs)) - tb.tensor(ys)) ** 2).mean().backward()
        optim.step()
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def no_sync_and_clip(rank, world):
    """Two micro-batches (the first under no_sync), then clip_grad_norm_ and one SGD step."""
    fsdp = FSDP(make_model(), auto_wrap_policy=ModuleWrapPolicy({tb.nn.Linear}))
    optim = tb.optim.SGD(fsdp.parameters(), lr=0.1)
    x, y = data()
    per = BATCH // world
    xs, ys = x[0, rank * per:(rank + 1) * per], y[0, rank * per:(rank + 1) * per]
    half = per // 2
    with fsdp.no_sync():
        ((fsdp(tb.tensor(xs[:half])) - tb.tensor(ys[:half])) ** 2).mean().backward()
    ((fsdp(tb.tensor(xs[half:])) - tb.tensor(ys[half:])) ** 2).mean().backward()
    norm = float(fsdp.clip_grad_norm_(0.5).item())
    optim.step()
    with FSDP.state_dict_type(fsdp, StateDictType.FULL_STATE_DICT):
        sd = {k: v.numpy().tolist() for k, v in fsdp.state_dict().items()}
    return [norm, sd]


def reference_no_sync_and_clip(world):
    """The same in one process: every micro-batch's mean loss, summed, averaged over ranks."""
    model = make_model()
    optim = tb.optim.SGD(model.parameters(), lr=0.1)
    x, y = data()
    per = BATCH // world
    total = 0
    for r in range(world):
        xs, ys = x[0, r * per:(r + 1) * per], y[0, r * per:(r + 1) * per]
        for a, b in ((0, per // 2), (per // 2, per)):
            total = total + ((model(tb.tensor(xs[a:b])) - tb.tensor(ys[a:b])) ** 2).mean()
    (total / world).backward()
    norm = float(tb.nn.utils.clip_grad_norm_(model.parameters(), 0.5).item())
    optim.step()
    return norm, {k: v.numpy().copy() for k, v in model.state_dict().items()}


def different_wrapping(rank, world):
    # rank 0 makes each Linear a unit, rank 1 wraps the whole model as one unit
    policy = ModuleWrapPolicy({tb.nn.Linear}) if rank == 0 else None
    model = FSDP(make_model(), auto_wrap_policy=policy)
    model(tb.randn(2, 6)).sum().backward()


def replaced_param(rank, world):
    model = FSDP(make_model(), auto_wrap_policy=ModuleWrapPolicy({tb.nn.Linear}),
                 use_orig_params=True)
    model(tb.randn(2, 6)).sum().backward()
    inner = model.module[2].module
    inner.weight = tb.nn.Parameter(tb.zeros(7, 9))
    model(tb.randn(2, 6))


def train_fsdp2(rank, world, cfgs):
    """fully_shard on each Linear and the root; the parameters (DTensors) after STEPS steps."""
    from tensorbrain.distributed.device_mesh import init_device_mesh
    from tensorbrain.distributed.fsdp import (CPUOffloadPolicy, MixedPrecisionPolicy,
                                              fully_shard)
    from tensorbrain.distributed.tensor import DTensor
    outs = []
    for cfg in cfgs:
        model = make_model()
        mesh = init_device_mesh("cpu", tuple(cfg.get("mesh", (world,))))
        kw = dict(mesh=mesh, reshard_after_forward=cfg.get("reshard", True))
        if cfg.get("mp"):
            kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=cfg["mp"], reduce_dtype=cfg["mp"])
        if cfg.get("offload"):
            kw["offload_policy"] = CPUOffloadPolicy()
        for layer in model:
            if isinstance(layer, tb.nn.Linear):
                fully_shard(layer, **kw)
        fully_shard(model, **kw)
        optim = make_optim(model.parameters(), cfg.get("opt", "sgd"))
        x, y = data()
        per = BATCH // world
        lo, hi = rank * per, (rank + 1) * per
        for s in range(STEPS):
            optim.zero_grad()
            xs, ys = x[s, lo:hi], y[s, lo:hi]
            if cfg.get("accumulate"):   # two micro-batches, the first without gradient sync
                half = per // 2
                model.set_requires_gradient_sync(False)
                (((model(tb.tensor(xs[:half])).float() - tb.tensor(ys[:half])) ** 2).mean()
                 / 2).backward()
                model.set_requires_gradient_sync(True)
                (((model(tb.tensor(xs[half:])).float() - tb.tensor(ys[half:])) ** 2).mean()
                 / 2).backward()
            else:
                ((model(tb.tensor(xs)).float() - tb.tensor(ys)) ** 2).mean().backward()
            optim.step()
        sd = model.state_dict()
        kinds = sorted({type(v).__name__ for v in sd.values()})
        grads = sorted({type(p.grad).__name__ for p in model.parameters()})
        full = {k: v.full_tensor().numpy().tolist() if isinstance(v, DTensor) else
                v.numpy().tolist() for k, v in sd.items()}
        local = {n: list(p.to_local().shape) for n, p in model.named_parameters()}
        outs.append([kinds, grads, type(model).__name__, full, local])
    return outs


class _Skipper(tb.nn.Module):
    """Rank 1 skips the middle unit: the collectives of the two ranks no longer match. b and c
    differ in size, so b's all-gather on rank 0 cannot pair with c's on rank 1 (same-size units
    would pair silently: docs/fsdp.md, "Errors")."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = tb.nn.Linear(4, 4), tb.nn.Linear(4, 4), tb.nn.Linear(4, 3)

    def forward(self, x):
        x = self.a(x)
        if tb.distributed.get_rank() == 0:
            x = self.b(x)
        return self.c(x)


def skipped_unit(rank, world):
    tb.manual_seed(0)
    model = FSDP(_Skipper(), auto_wrap_policy=ModuleWrapPolicy({tb.nn.Linear}))
    model(tb.randn(2, 4)).sum().backward()


def extras(rank, world):
    """sync_module_states, ignored_modules and summon_full_params."""
    model = make_model(seed=rank)            # different on each rank ...
    ignored = model[4]
    fsdp = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({tb.nn.Linear}),
                sync_module_states=True, ignored_modules=[ignored])   # ... until synced
    names = [n for n, _ in fsdp.named_parameters()]
    with FSDP.summon_full_params(fsdp):
        inner = fsdp.module[0].module
        w = inner.weight.detach().numpy().copy()
        inner.weight._data[...] = 1.0          # written back into the shards at exit
    with FSDP.state_dict_type(fsdp, StateDictType.FULL_STATE_DICT):
        sd = fsdp.state_dict()
    return [names, w.tolist(), sd["0.weight"].numpy().tolist(), sd["4.weight"].numpy().tolist()]


def fsdp2_state_dict(rank, world):
    """A fully_shard model's DTensor state dict loads into another fully_shard model."""
    from tensorbrain.distributed.fsdp import fully_shard

    def build(seed):
        m = make_model(seed)
        for layer in m:
            if isinstance(layer, tb.nn.Linear):
                fully_shard(layer)
        return fully_shard(m)
    a, b = build(0), build(7)
    b.load_state_dict(a.state_dict())
    x = tb.tensor(data()[0][0])
    with tb.no_grad():
        return [a(x).numpy().tolist(), b(x).numpy().tolist(),
                {k: v.full_tensor().numpy().tolist() for k, v in b.state_dict().items()}]


class _PartlyUsed(tb.nn.Module):
    """A unit with a parameter that never gets a gradient."""

    def __init__(self):
        super().__init__()
        self.used, self.unused = tb.nn.Linear(9, 3), tb.nn.Linear(9, 3)

    def forward(self, x):
        return self.used(x)


def partly_used_model():
    tb.manual_seed(0)
    return tb.nn.Sequential(tb.nn.Linear(6, 9), tb.nn.Tanh(), _PartlyUsed())


def partly_used(rank, world):
    fsdp = FSDP(partly_used_model(), auto_wrap_policy=ModuleWrapPolicy({_PartlyUsed}))
    optim = tb.optim.SGD(fsdp.parameters(), lr=0.1)
    x, y = data()
    for s in range(STEPS):
        _step(fsdp, optim, x[s], y[s], rank, world)
    with FSDP.state_dict_type(fsdp, StateDictType.FULL_STATE_DICT):
        return {k: v.numpy().tolist() for k, v in fsdp.state_dict().items()}


def reference_partly_used():
    model = partly_used_model()
    optim = tb.optim.SGD(model.parameters(), lr=0.1)
    x, y = data()
    for s in range(STEPS):
        optim.zero_grad()
        ((model(tb.tensor(x[s])) - tb.tensor(y[s])) ** 2).mean().backward()
        optim.step()
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def fsdp2_clip(rank, world, mesh_shape):
    """fully_shard + tb.nn.utils.clip_grad_norm_ on the DTensor gradients, then one SGD step."""
    from tensorbrain.distributed.device_mesh import init_device_mesh
    from tensorbrain.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", tuple(mesh_shape))
    model = make_model()
    for layer in model:
        if isinstance(layer, tb.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optim = tb.optim.SGD(model.parameters(), lr=0.1)
    x, y = data()
    per = BATCH // world
    xs, ys = x[0, rank * per:(rank + 1) * per], y[0, rank * per:(rank + 1) * per]
    ((model(tb.tensor(xs)) - tb.tensor(ys)) ** 2).mean().backward()
    norm = float(tb.nn.utils.clip_grad_norm_(model.parameters(), 0.5).item())
    optim.step()
    return [norm, {k: v.full_tensor().numpy().tolist() for k, v in model.state_dict().items()}]


def reference_clip():
    model = make_model()
    optim = tb.optim.SGD(model.parameters(), lr=0.1)
    x, y = data()
    ((model(tb.tensor(x[0])) - tb.tensor(y[0])) ** 2).mean().backward()
    norm = float(tb.nn.utils.clip_grad_norm_(model.parameters(), 0.5).item())
    optim.step()
    return norm, {k: v.numpy().copy() for k, v in model.state_dict().items()}
