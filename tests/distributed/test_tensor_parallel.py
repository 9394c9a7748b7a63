"""Tensor parallel at 2 ranks: a Megatron MLP block, a Megatron attention block and split
embeddings train exactly like the unsplit model in one process (parameters compared after K
steps, gathered with full_tensor())."""
import math

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain.distributed.device_mesh import init_device_mesh
from tensorbrain.distributed.tensor import DTensor, Replicate, Shard
from tensorbrain.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                     parallelize_module)
from tensorbrain.testing.distributed import run_workers

HERE = "tests.distributed.test_tensor_parallel"
D, HEADS, VOCAB, STEPS = 8, 4, 11, 3
F = tb.nn.functional


class MLP(tb.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1, self.w2 = tb.nn.Linear(D, 4 * D), tb.nn.Linear(4 * D, D)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class Attention(tb.nn.Module):
    def __init__(self):
        super().__init__()
        self.hd = D // HEADS
        self.wq, self.wk, self.wv = (tb.nn.Linear(D, D) for _ in range(3))
        self.wo = tb.nn.Linear(D, D)

    def forward(self, x):
        B, T, _ = x.shape

        def heads(t):   # -1: the local head count under tensor parallel
            return t.reshape(B, T, -1, self.hd).transpose(1, 2)
        q, k, v = heads(self.wq(x)), heads(self.wk(x)), heads(self.wv(x))
        att = F.softmax((q @ k.transpose(-2, -1)) / math.sqrt(self.hd), dim=-1)
        return self.wo((att @ v).transpose(1, 2).reshape(B, T, -1))


class Tiny(tb.nn.Module):
    """Embeddings (vocabulary split, then feature split) + attention + MLP: every style."""

    def __init__(self):
        super().__init__()
        self.tok = tb.nn.Embedding(VOCAB, D)
        self.pos = tb.nn.Embedding(6, D)
        self.attn, self.mlp = Attention(), MLP()
        self.norm = tb.nn.LayerNorm(D)

    def forward(self, ids):
        h = self.tok(ids) + self.pos(tb.arange(ids.shape[1]).unsqueeze(0).expand(ids.shape[0], -1))
        h = h + self.attn(self.norm(h))
        return h + self.mlp(h)


PLANS = {
    "mlp": {"w1": ColwiseParallel(), "w2": RowwiseParallel()},
    "attention": {"wq": ColwiseParallel(), "wk": ColwiseParallel(), "wv": ColwiseParallel(),
                  "wo": RowwiseParallel()},
    "tiny": {"tok": RowwiseParallel(), "pos": ColwiseParallel(output_layouts=Replicate()),
             "attn.w[qkv]": ColwiseParallel(), "attn.wo": RowwiseParallel(),
             "mlp.w1": ColwiseParallel(), "mlp.w2": RowwiseParallel()},
}


def _build(name):
    tb.manual_seed(0)
    return {"mlp": MLP, "attention": Attention, "tiny": Tiny}[name]()


def _data(name):
    rng = np.random.default_rng(1)
    if name == "tiny":
        x = tb.tensor(rng.integers(0, VOCAB, (3, 5)))
    else:
        x = tb.tensor(rng.standard_normal((3, 5, D)).astype(np.float32))
    return x, tb.tensor(rng.standard_normal((3, 5, D)).astype(np.float32))


def _train(model, name):
    opt = tb.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = _data(name)
    for _ in range(STEPS):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()


def _full(p):
    return (p.full_tensor() if isinstance(p, DTensor) else p).detach().numpy()


def _tp(rank, world, names):
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    out = {}
    for name in names:
        model = parallelize_module(_build(name), mesh, PLANS[name])
        _train(model, name)
        out[name] = {n: _full(p).tolist() for n, p in model.named_parameters()}
        out[name + "_local"] = {n: list(p._data.shape) for n, p in model.named_parameters()}
    return out


def test_mlp_attention_and_embeddings_match_one_process():
    names = ["mlp", "attention", "tiny"]
    res = run_workers(f"{HERE}:_tp", 2, names, timeout=120)
    for name in names:
        ref = _build(name)
        _train(ref, name)
        for r in res:
            for n, p in ref.named_parameters():
                np.testing.assert_allclose(np.asarray(r[name][n]), p.detach().numpy(),
                                           rtol=1e-5, atol=1e-6, err_msg=f"{name}.{n}")
    local = res[0]["mlp_local"]   # really split: each rank holds half of w1's rows, w2's columns
    assert local == {"w1.weight": [16, 8], "w1.bias": [16], "w2.weight": [8, 16], "w2.bias": [8]}
    assert res[1]["tiny_local"]["tok.weight"] == [5, D]     # 11 rows: chunks of 6 and 5


def test_errors():
    dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    try:
        mesh2 = init_device_mesh("cpu", (1, 1))
        with pytest.raises(ValueError, match="1-D mesh"):
            parallelize_module(MLP(), mesh2, {"w1": ColwiseParallel()})
        mesh = init_device_mesh("cpu", (1,))
        with pytest.raises(ValueError, match="'w3' matches no sub-module"):
            parallelize_module(MLP(), mesh, {"w3": ColwiseParallel()})
        with pytest.raises(ValueError, match="already a DTensor"):
            parallelize_module(MLP(), mesh, {"w*": ColwiseParallel(), "w2": RowwiseParallel()})
        with pytest.raises(NotImplementedError, match="LayerNorm is not supported"):
            parallelize_module(tb.nn.LayerNorm(4), mesh, ColwiseParallel())
        with pytest.raises(NotImplementedError, match=r"output: Shard\(dim=0\) is not supported"):
            ColwiseParallel(output_layouts=Shard(0))
        with pytest.raises(NotImplementedError, match="SequenceParallel takes norms"):
            parallelize_module(tb.nn.LayerNorm(4), mesh, RowwiseParallel())
        m = parallelize_module(MLP(), mesh, {"w1": ColwiseParallel(use_local_output=False),
                                             "w2": RowwiseParallel(use_local_output=False)})
        out = m(tb.ones(2, D))
        assert isinstance(out, DTensor) and out.placements == (Replicate(),)
        assert isinstance(m.w1.weight, DTensor) and m.w1.weight.placements == (Shard(0),)
    finally:
        dist.destroy_process_group()
