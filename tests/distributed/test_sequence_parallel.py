"""Sequence parallel at 2 ranks, written as torch's tensor-parallel tutorial writes it
(SequenceParallel norms, PrepareModuleInput, ColwiseParallel(input_layouts=Shard(1)),
RowwiseParallel(output_layouts=Shard(1)), a row-split embedding that scatters the sequence):
after K steps every parameter equals the unsplit model's trained in one process."""
import math

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain.distributed.device_mesh import init_device_mesh
from tensorbrain.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from tensorbrain.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                     PrepareModuleInputOutput,
                                                     PrepareModuleOutput, RowwiseParallel,
                                                     SequenceParallel, parallelize_module)
from tensorbrain.testing.distributed import run_workers

HERE = "tests.distributed.test_sequence_parallel"
D, HEADS, VOCAB, SEQ, STEPS = 16, 4, 40, 6, 3
F = tb.nn.functional


class RMSNorm(tb.nn.Module):
    """LLaMA's Python RMSNorm (the custom module torch's SequenceParallel names)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = tb.nn.Parameter(tb.ones(dim))

    def forward(self, x):
        return x * tb.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(tb.nn.Module):
    def __init__(self):
        super().__init__()
        self.hd = D // HEADS
        self.wq, self.wk, self.wv = (tb.nn.Linear(D, D, bias=False) for _ in range(3))
        self.wo = tb.nn.Linear(D, D, bias=False)

    def forward(self, x):
        B, T, _ = x.shape   # x: a Replicate DTensor under PrepareModuleInput (global shape)

        def heads(t):       # -1: the local head count under tensor parallel
            return t.view(B, T, -1, self.hd).transpose(1, 2)
        q, k, v = heads(self.wq(x)), heads(self.wk(x)), heads(self.wv(x))
        att = F.softmax((q @ k.transpose(-2, -1)) / math.sqrt(self.hd), dim=-1)
        return self.wo((att @ v).transpose(1, 2).contiguous().view(B, T, -1))


class FeedForward(tb.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1, self.w3 = tb.nn.Linear(D, 3 * D), tb.nn.Linear(D, 3 * D)
        self.w2 = tb.nn.Linear(3 * D, D)     # a bias added to sequence chunks

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(tb.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm, self.attention = tb.nn.LayerNorm(D), Attention()
        self.ffn_norm, self.feed_forward = RMSNorm(D), FeedForward()
        self.dropout = tb.nn.Dropout(0.0)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.dropout(self.feed_forward(self.ffn_norm(h)))


class Model(tb.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = tb.nn.Embedding(VOCAB, D)
        self.layers = tb.nn.ModuleList([Block() for _ in range(2)])
        self.norm = tb.nn.RMSNorm(D)
        self.output = tb.nn.Linear(D, VOCAB, bias=False)

    def forward(self, ids):
        h = self.tok_embeddings(ids)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


def _plan(mesh, model, variant):
    """torch's tutorial plan; variant "output" gathers the logits with PrepareModuleOutput."""
    top = {"tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
           "norm": SequenceParallel(),
           "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())}
    if variant == "output":
        top["output"] = ColwiseParallel(input_layouts=Shard(1), use_local_output=False)
    parallelize_module(model, mesh, top)
    if variant == "output":
        parallelize_module(model, mesh, PrepareModuleOutput(output_layouts=Shard(-1),
                                                            desired_output_layouts=Replicate()))
    for layer in model.layers:
        parallelize_module(layer, mesh, {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1),),
                                            desired_input_layouts=(Replicate(),)),
            "attention.w[qkv]": ColwiseParallel(use_local_output=False),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),),
                                               desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward.w3": ColwiseParallel(),
            "dropout": SequenceParallel(use_local_output=True),
        })
    return model


def _data():
    rng = np.random.default_rng(0)
    return (tb.tensor(rng.integers(0, VOCAB, (3, SEQ))),
            tb.tensor(rng.integers(0, VOCAB, (3, SEQ))))


def _train(model):
    opt = tb.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    ids, y = _data()
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(ids).flatten(0, 1), y.flatten(0, 1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _build():
    tb.manual_seed(0)
    return Model()


def _sp(rank, world, variant):
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    model = _plan(mesh, _build(), variant)
    seen = {}
    model.layers[0].ffn_norm.register_forward_hook(
        lambda m, args, out: seen.update(local=list(out.to_local().shape),
                                         placements=str(out.placements)))
    losses = _train(model)
    params = {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().numpy().tolist()
              for n, p in model.named_parameters()}
    kinds = {n: str(p.placements) for n, p in model.named_parameters()}
    return {"params": params, "losses": losses, "seen": seen, "kinds": kinds}


@pytest.mark.parametrize("variant", ["tutorial", "output"])
def test_sequence_parallel_transformer_matches_one_process(variant):
    res = run_workers(f"{HERE}:_sp", 2, variant, timeout=180)
    ref = _build()
    ref_losses = _train(ref)
    for r in res:
        np.testing.assert_allclose(r["losses"], ref_losses, rtol=1e-5)
        for n, p in ref.named_parameters():
            np.testing.assert_allclose(np.asarray(r["params"][n]), p.detach().numpy(),
                                       rtol=1e-5, atol=1e-6, err_msg=n)
    # the norm ran on half the sequence and returned a sequence-sharded DTensor
    assert res[0]["seen"] == {"local": [3, SEQ // 2, D], "placements": "(Shard(dim=1),)"}
    kinds = res[1]["kinds"]
    assert kinds["norm.weight"] == kinds["layers.0.ffn_norm.weight"] == "(Replicate(),)"
    assert kinds["layers.0.feed_forward.w2.bias"] == "(Replicate(),)"


def _uneven(rank, world):
    """A DTensor input keeps the global size, so a sequence of 5 over 2 ranks works."""
    mesh = init_device_mesh("cpu", (world,))
    tb.manual_seed(0)
    block = tb.nn.ModuleDict({"norm": tb.nn.LayerNorm(D), "w1": tb.nn.Linear(D, 2 * D),
                              "w2": tb.nn.Linear(2 * D, D)})
    parallelize_module(block, mesh, {
        "norm": SequenceParallel(), "w1": ColwiseParallel(input_layouts=Shard(1)),
        "w2": RowwiseParallel(output_layouts=Shard(1), use_local_output=False)})
    rng = np.random.default_rng(2)
    x = tb.tensor(rng.standard_normal((2, 5, D)).astype(np.float32))
    xd = distribute_tensor(x, mesh, [Shard(1)])
    xd.requires_grad_()
    out = block["w2"](F.gelu(block["w1"](block["norm"](xd))))
    assert isinstance(out, DTensor) and out.placements == (Shard(1),)
    (out.full_tensor() ** 2).sum().backward()
    grads = {n: (p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad).numpy().tolist()
             for n, p in block.named_parameters()}
    return {"out": out.full_tensor().detach().numpy().tolist(), "grads": grads,
            "local": list(out.to_local().shape), "xgrad": xd.grad.full_tensor().numpy().tolist()}


def test_uneven_sequence_through_dtensors_matches_one_process():
    res = run_workers(f"{HERE}:_uneven", 2, timeout=120)
    tb.manual_seed(0)
    norm, w1, w2 = tb.nn.LayerNorm(D), tb.nn.Linear(D, 2 * D), tb.nn.Linear(2 * D, D)
    rng = np.random.default_rng(2)
    x = tb.tensor(rng.standard_normal((2, 5, D)).astype(np.float32), requires_grad=True)
    out = w2(F.gelu(w1(norm(x))))
    (out ** 2).sum().backward()
    assert [r["local"] for r in res] == [[2, 3, D], [2, 2, D]]
    named = {"norm." + n: p for n, p in norm.named_parameters()}
    named.update({"w1." + n: p for n, p in w1.named_parameters()})
    named.update({"w2." + n: p for n, p in w2.named_parameters()})
    for r in res:
        np.testing.assert_allclose(np.asarray(r["out"]), out.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(np.asarray(r["xgrad"]), x.grad.numpy(), rtol=1e-4, atol=1e-5)
        for n, p in named.items():
            np.testing.assert_allclose(np.asarray(r["grads"][n]), p.grad.numpy(), rtol=1e-4,
                                       atol=1e-5, err_msg=n)


def _uneven_local(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    emb = parallelize_module(tb.nn.Embedding(VOCAB, D), mesh,
                             RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)))
    emb(tb.zeros(2, 5, dtype=tb.long))


def test_uneven_sequence_into_local_tensors_says_so():
    res = run_workers(f"{HERE}:_uneven_local", 2, timeout=60, raise_on_error=False)
    for r in res:
        assert r.error_type == "ValueError", r.describe()
        assert "dimension 1 of size 5 unevenly over 2 ranks" in r.message


def test_styles_in_one_process_and_errors():
    dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        with pytest.raises(ValueError, match="same length"):
            PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=Replicate())
        with pytest.raises(ValueError, match="same length"):
            PrepareModuleOutput(output_layouts=(Shard(1), None), desired_output_layouts=Shard(1))
        lin = parallelize_module(tb.nn.Linear(4, 4), mesh, PrepareModuleInputOutput(
            input_layouts=Shard(0), desired_input_layouts=Replicate(),
            output_layouts=Replicate(), desired_output_layouts=Shard(0), use_local_output=False))
        out = lin(tb.ones(2, 4))
        assert isinstance(out, DTensor) and out.placements == (Shard(0),)
        with pytest.raises(ValueError, match="got 2 positional inputs but input_layouts has 1"):
            lin(tb.ones(2, 4), tb.ones(1))
        kw = tb.nn.Module()
        kw.forward = lambda x, *, mask: (x, mask)
        parallelize_module(kw, mesh, PrepareModuleInput(
            input_layouts=(None,), desired_input_layouts=(None,),
            input_kwarg_layouts={"mask": Shard(0)},
            desired_input_kwarg_layouts={"mask": Replicate()}))
        a, m = kw(tb.ones(1), mask=tb.ones(3))
        assert not isinstance(a, DTensor) and m.placements == (Replicate(),)
        assert repr(SequenceParallel()) == "SequenceParallel(sequence_dim=1, use_local_output=False)"
        with pytest.raises(NotImplementedError, match="output: Shard"):
            ColwiseParallel(output_layouts=Shard(1))
    finally:
        dist.destroy_process_group()


# ***** sequence parallel inside FSDP on a (dp, tp) mesh, 4 ranks *****
class _SPBlock(tb.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = tb.nn.LayerNorm(D)
        self.w1, self.w2 = tb.nn.Linear(D, 2 * D), tb.nn.Linear(2 * D, D)

    def forward(self, x):
        return x + self.w2(F.gelu(self.w1(self.norm(x))))


def _sp_net():
    tb.manual_seed(0)
    return tb.nn.Sequential(_SPBlock(), _SPBlock())


def _sp_data():
    rng = np.random.default_rng(4)
    return (tb.tensor(rng.standard_normal((4, SEQ, D)).astype(np.float32)),
            tb.tensor(rng.standard_normal((4, SEQ, D)).astype(np.float32)))


def _sp_steps(model, x, y):
    opt = tb.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    for _ in range(STEPS):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()


def _sp_fsdp(rank, world):
    from tensorbrain.distributed.fsdp import FullyShardedDataParallel as FSDP
    from tensorbrain.distributed.fsdp import fully_shard
    from tensorbrain.distributed.fsdp.wrap import ModuleWrapPolicy
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    dp = mesh.get_local_rank("dp")
    x, y = _sp_data()
    x, y = x[2 * dp:2 * dp + 2], y[2 * dp:2 * dp + 2]     # this replica's half of the batch
    out = {}
    for kind in ("fully_shard", "fsdp"):
        model = _sp_net()
        # the whole batch in and out on every tp rank; the blocks in between see SEQ / 2
        parallelize_module(model, mesh["tp"], PrepareModuleInputOutput(
            input_layouts=Replicate(), desired_input_layouts=Shard(1), use_local_input=True,
            output_layouts=Shard(1), desired_output_layouts=Replicate()))
        parallelize_module(model, mesh["tp"], {
            "*.norm": SequenceParallel(), "*.w1": ColwiseParallel(input_layouts=Shard(1)),
            "*.w2": RowwiseParallel(output_layouts=Shard(1))})
        if kind == "fully_shard":
            for block in model:
                fully_shard(block, mesh=mesh["dp"])
            fully_shard(model, mesh=mesh["dp"])
            _sp_steps(model, x, y)
            out[kind] = {n: p.full_tensor().detach().numpy().tolist()
                         for n, p in model.named_parameters()}
        else:
            wrapped = FSDP(model, device_mesh=mesh["dp"], auto_wrap_policy=ModuleWrapPolicy(
                {_SPBlock}))
            _sp_steps(wrapped, x, y)
            out[kind] = {k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().numpy()
                         .tolist() for k, v in wrapped.state_dict().items()}
    return out


def test_sequence_parallel_inside_fsdp_matches_one_process():
    res = run_workers(f"{HERE}:_sp_fsdp", 4, timeout=240)
    ref = _sp_net()
    _sp_steps(ref, *_sp_data())
    for r in res:
        for kind, params in r.items():
            assert sorted(params) == sorted(n for n, _ in ref.named_parameters()), kind
            for n, p in ref.named_parameters():
                np.testing.assert_allclose(np.asarray(params[n]), p.detach().numpy(), rtol=2e-5,
                                           atol=2e-6, err_msg=f"{kind} {n}")
