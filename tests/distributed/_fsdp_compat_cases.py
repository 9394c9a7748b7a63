"""Worker functions for tests/distributed/test_fsdp_compat.py: torch FSDP idioms beyond the
basic strategies (activation checkpointing inside units, FSDP2's explicit prefetching and
other setters, full state dicts into fully_shard, ShardedGradScaler)."""
import numpy as np

import tensorbrain as tb
from tensorbrain.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointWrapper, apply_activation_checkpointing, checkpoint_wrapper)
from tensorbrain.distributed.fsdp import FullyShardedDataParallel as FSDP
from tensorbrain.distributed.fsdp import (FullStateDictConfig, StateDictType, fully_shard,
                                          register_fsdp_forward_method)
from tensorbrain.distributed.fsdp.wrap import ModuleWrapPolicy

STEPS, BATCH = 3, 8


class Block(tb.nn.Module):
    """A residual MLP block with its own inner Sequential (what checkpointing wraps)."""

    def __init__(self, width=8):
        super().__init__()
        self.norm = tb.nn.LayerNorm(width)
        self.mlp = tb.nn.Sequential(tb.nn.Linear(width, 2 * width), tb.nn.Tanh(),
                                    tb.nn.Linear(2 * width, width))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Net(tb.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = tb.nn.Linear(5, 8)
        self.blocks = tb.nn.ModuleList([Block(), Block(), Block()])
        self.out = tb.nn.Linear(8, 3)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return self.out(h)

    def decode(self, x):
        """A method other than forward (torch's ``generate``): needs
        register_fsdp_forward_method under fully_shard."""
        return self.forward(x) * 2.0


def make_model():
    tb.manual_seed(0)
    return Net()


def data():
    rng = np.random.RandomState(4)
    return (rng.randn(STEPS, BATCH, 5).astype(np.float32),
            rng.randn(STEPS, BATCH, 3).astype(np.float32))


def _loss(out, y):
    return ((out - tb.tensor(y)) ** 2).mean()


def reference(steps=STEPS, method="forward"):
    """One process, full batch, Adam: the parameters after ``steps`` steps."""
    model = make_model()
    optim = tb.optim.Adam(model.parameters(), lr=0.02)
    x, y = data()
    for s in range(steps):
        optim.zero_grad()
        _loss(getattr(model, method)(tb.tensor(x[s])), y[s]).backward()
        optim.step()
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def _full(model):
    from tensorbrain.distributed.tensor import DTensor
    return {k: (v.full_tensor() if isinstance(v, DTensor) else v).numpy().tolist()
            for k, v in model.state_dict().items()}


def _train(model, rank, world, method="forward", micro=None):
    optim = tb.optim.Adam(model.parameters(), lr=0.02)
    x, y = data()
    per = BATCH // world
    lo, hi = rank * per, (rank + 1) * per
    call = model if method == "forward" else getattr(model, method)   # forward: through hooks
    for s in range(STEPS):
        optim.zero_grad()
        if micro is None:
            _loss(call(tb.tensor(x[s, lo:hi])), y[s, lo:hi]).backward()
        else:
            micro(model, x[s, lo:hi], y[s, lo:hi])
        optim.step()
    return model


def checkpointed(rank, world):
    """Activation checkpointing inside FSDP units, in the orders torch's recipes use."""
    out = {}
    # FSDP2 (torchtitan's order): checkpoint_wrapper each block, then fully_shard the wrappers
    model = make_model()
    for i, b in enumerate(model.blocks):
        model.blocks[i] = fully_shard(checkpoint_wrapper(b))
    fully_shard(model)
    out["fsdp2"] = _full(_train(model, rank, world))
    # FSDP1 (torch's FSDP tutorial): wrap first, then apply_activation_checkpointing
    for orig in (False, True):
        model = FSDP(make_model(), auto_wrap_policy=ModuleWrapPolicy({Block}),
                     use_orig_params=orig)
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, tb.nn.Sequential))
        assert sum(isinstance(m, CheckpointWrapper) for m in model.modules()) == 3
        _train(model, rank, world)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                                  FullStateDictConfig(rank0_only=False)):
            out[f"fsdp1_orig={orig}"] = {k: v.numpy().tolist()
                                         for k, v in model.state_dict().items()}
    return out


def fsdp2_setters(rank, world, mesh_shape):
    """fully_shard with explicit prefetch lists, a registered forward method, the accepted
    no-op flags, and (on a 2-D mesh) HSDP accumulation with set_requires_all_reduce(False)."""
    from tensorbrain.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", tuple(mesh_shape))
    out = {}

    def shard(model):
        for b in model.blocks:
            fully_shard(b, mesh=mesh, reshard_after_forward=None)
        fully_shard(model, mesh=mesh)
        return model

    model = shard(make_model())
    blocks = list(model.blocks)
    for i, b in enumerate(blocks):   # torch's FSDP2 example: prefetch 2 blocks ahead / behind
        b.set_modules_to_forward_prefetch(blocks[i + 1:i + 3])
        b.set_modules_to_backward_prefetch(blocks[max(i - 2, 0):i][::-1])
    model.set_reshard_after_backward(False)   # accepted; no effect on results
    model.set_is_last_backward(True)
    register_fsdp_forward_method(model, "decode")
    out["prefetch_decode"] = _full(_train(model, rank, world, method="decode"))

    held = []

    def accumulate(model, xs, ys):   # two micro-batches; the first one not all-reduced
        half = xs.shape[0] // 2
        model.set_requires_all_reduce(False)
        (_loss(model(tb.tensor(xs[:half])), ys[:half]) / 2).backward()
        # HSDP keeps the partial gradients back (torch too); a 1-D mesh has nothing to hold
        held.append(all(p.grad is None for p in model.parameters()))
        model.set_requires_all_reduce(True)
        (_loss(model(tb.tensor(xs[half:])), ys[half:]) / 2).backward()
    out["all_reduce_accum"] = _full(_train(shard(make_model()), rank, world, micro=accumulate))
    out["held"] = held

    # set_gradient_divide_factor(1.0): gradients are the sum over ranks, not the mean
    model = shard(make_model())
    model.set_gradient_divide_factor(1.0)
    x, y = data()
    per = BATCH // world
    _loss(model(tb.tensor(x[0, rank * per:(rank + 1) * per])), y[0, rank * per:(rank + 1) *
                                                                    per]).backward()
    names = [n for n, _ in model.named_parameters()]
    out["sum_grads"] = {n: p.grad.full_tensor().numpy().tolist()
                        for n, p in zip(names, model.parameters(), strict=True)}
    return out


def reference_grads():
    model = make_model()
    x, y = data()
    _loss(model(tb.tensor(x[0])), y[0]).backward()
    return {n: p.grad.numpy().copy() for n, p in model.named_parameters()}


def full_into_fully_shard(rank, world):
    """Full state dicts (model + Adam) into a fresh fully_shard model, given on every rank or
    only on rank 0 (broadcast_from_rank0); and into FSDP1 by broadcast."""
    from tensorbrain.distributed.checkpoint.state_dict import (
        StateDictOptions, get_model_state_dict, get_optimizer_state_dict,
        set_model_state_dict, set_optimizer_state_dict)
    full = StateDictOptions(full_state_dict=True)

    def sharded():
        model = make_model()
        for b in model.blocks:
            fully_shard(b)
        return fully_shard(model)

    src = _train(sharded(), rank, world)
    optim = tb.optim.Adam(src.parameters(), lr=0.02)
    _loss(src(tb.randn(2, 5)), np.zeros((2, 3), np.float32)).backward()
    optim.step()
    msd = get_model_state_dict(src, options=full)
    osd = get_optimizer_state_dict(src, optim, options=full)

    def arrays(sd):
        return {k: np.asarray(v.numpy()).tolist() for k, v in sd.items()}

    want = {"model": arrays(msd),
            "optim": {k: arrays({n: v for n, v in st.items() if n != "step"})
                      for k, st in osd["state"].items()}}
    out = {"want": want}
    for mode in ("every_rank", "rank0"):
        bcast = mode == "rank0"
        opts = StateDictOptions(full_state_dict=True, broadcast_from_rank0=bcast)
        dst = sharded()
        dst_opt = tb.optim.Adam(dst.parameters(), lr=0.02)
        give = rank == 0 or not bcast
        set_model_state_dict(dst, msd if give else {}, options=opts)
        set_optimizer_state_dict(dst, dst_opt, osd if give else {}, options=opts)
        got_o = get_optimizer_state_dict(dst, dst_opt, options=full)
        out[mode] = {"model": arrays(get_model_state_dict(dst, options=full)),
                     "optim": {k: arrays({n: v for n, v in st.items() if n != "step"})
                               for k, st in got_o["state"].items()},
                     "local_rows": dst.blocks[0].mlp[0].weight.to_local().shape[0]}
    fsdp1 = FSDP(make_model(), auto_wrap_policy=ModuleWrapPolicy({Block}))
    set_model_state_dict(fsdp1, msd if rank == 0 else {},
                         options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    out["fsdp1"] = arrays(get_model_state_dict(fsdp1, options=full))
    return out


def sharded_scaler(rank, world):
    """An overflow in one rank's gradient shard makes every rank skip the step."""
    from tensorbrain.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
    model = FSDP(make_model(), auto_wrap_policy=ModuleWrapPolicy({Block}), use_orig_params=True)
    optim = tb.optim.SGD(model.parameters(), lr=0.1)
    scaler = ShardedGradScaler("cpu", init_scale=1024.0)
    before = _full_fsdp1(model)
    x, y = data()
    per = BATCH // world
    scaler.scale(_loss(model(tb.tensor(x[0, rank * per:(rank + 1) * per])),
                       y[0, rank * per:(rank + 1) * per])).backward()
    if rank == 1:   # an overflow in this rank's shard only
        p = next(p for p in model.parameters() if p.grad is not None and p.grad.numel())
        p.grad._data[0] = np.inf
    scaler.step(optim)
    scaler.update()
    return {"unchanged": _full_fsdp1(model) == before, "scale": scaler.get_scale()}


def _full_fsdp1(model):
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
        return {k: v.numpy().tolist() for k, v in model.state_dict().items()}
