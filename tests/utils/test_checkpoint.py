"""Activation checkpointing: gradients equal the plain run's (dropout included), and the
activations inside a checkpointed segment are really freed."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.utils.checkpoint import checkpoint, checkpoint_sequential


def _net(seed, p=0.0):
    tb.manual_seed(seed)
    layers = []
    for _ in range(4):
        layers += [tb.nn.Linear(8, 8), tb.nn.Tanh(), tb.nn.Dropout(p)]
    return tb.nn.Sequential(*layers)


def _grads(net):
    return [p.grad.numpy().copy() for p in net.parameters()]


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_matches_plain_with_dropout(use_reentrant):
    x0 = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    plain = _net(1, p=0.3)
    x = tb.tensor(x0, requires_grad=True)
    tb.manual_seed(7)
    plain(x).pow(2).sum().backward()
    ref_x, ref = x.grad.numpy().copy(), _grads(plain)

    ck = _net(1, p=0.3)
    x = tb.tensor(x0, requires_grad=True)
    tb.manual_seed(7)
    h = checkpoint(ck[:6], x, use_reentrant=use_reentrant)
    out = checkpoint(ck[6:], h, use_reentrant=use_reentrant)
    tb.manual_seed(99)   # the generator moves on before backward: the recompute must not see it
    out.pow(2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), ref_x, rtol=1e-5, atol=1e-6)
    for a, b in zip(_grads(ck), ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_without_rng_restore_dropout_differs():
    # the counter-test: preserve_rng_state=False recomputes with a new mask, so gradients differ
    x0 = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    plain = _net(1, p=0.5)
    tb.manual_seed(7)
    plain(tb.tensor(x0)).sum().backward()
    ck = _net(1, p=0.5)
    tb.manual_seed(7)
    checkpoint(ck, tb.tensor(x0), use_reentrant=False, preserve_rng_state=False).sum().backward()
    assert not np.allclose(_grads(ck)[0], _grads(plain)[0])


def test_checkpoint_sequential_matches_plain_and_torch():
    x0 = np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32)
    plain, ck = _net(3), _net(3)
    plain(tb.tensor(x0)).sum().backward()
    for segments in (1, 2, 4):
        ck.zero_grad()
        y = checkpoint_sequential(ck, segments, tb.tensor(x0), use_reentrant=False)
        y.sum().backward()
        for a, b in zip(_grads(ck), _grads(plain), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    torch = pytest.importorskip("torch")
    tnet = torch.nn.Sequential(*[torch.nn.Linear(8, 8) if i % 3 == 0 else torch.nn.Tanh()
                                 for i in range(12) if i % 3 != 2])
    with torch.no_grad():
        for tl, bl in zip([m for m in tnet if isinstance(m, torch.nn.Linear)],
                          [m for m in ck if isinstance(m, tb.nn.Linear)], strict=True):
            tl.weight.copy_(torch.tensor(bl.weight.detach().numpy()))
            tl.bias.copy_(torch.tensor(bl.bias.detach().numpy()))
    from torch.utils.checkpoint import checkpoint_sequential as tcs
    tcs(tnet, 2, torch.tensor(x0), use_reentrant=False).sum().backward()
    np.testing.assert_allclose(tnet[0].weight.grad.numpy(), _grads(plain)[0], rtol=1e-4,
                               atol=1e-5)


def test_segment_activations_are_freed():
    import gc
    import weakref
    seen = []

    def fn(x):
        h = x * 2.0
        seen.append(weakref.ref(h))
        return h.tanh()
    x = tb.randn(4, 4, requires_grad=True)
    y = checkpoint(fn, x, use_reentrant=False)
    gc.collect()
    assert seen[0]() is None          # the inner activation is gone after the forward
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - np.tanh(2 * x.detach().numpy()) ** 2), rtol=1e-5)


def test_errors_and_no_grad():
    with pytest.raises(NotImplementedError, match="returned 2 values"):
        checkpoint(lambda a: (a, a), tb.randn(2, requires_grad=True), use_reentrant=False)
    with pytest.raises(NotImplementedError, match="context_fn"):
        checkpoint(lambda a: a, tb.randn(2), context_fn=object())
    with pytest.raises(ValueError, match="segments=5"):
        checkpoint_sequential([abs, abs], 5, tb.randn(2))
    with tb.no_grad():
        assert checkpoint(lambda a: a * 2, tb.ones(2)).tolist() == [2.0, 2.0]


def test_backward_frees_activations_the_loss_still_references():
    # checkpointing only saves memory if backward frees the plain part's activations as it goes
    import gc
    import weakref
    x = tb.randn(4, 4, requires_grad=True)
    h = (x * 2.0).tanh()
    ref = weakref.ref(h)
    loss = (h * 3.0).sum()
    del h
    gc.collect()
    assert ref() is not None          # the graph holds it until backward
    loss.backward()
    gc.collect()
    assert ref() is None              # gone although `loss` is still alive


class _Halves(tb.nn.Module):
    """Two checkpointed halves of a net, inside one module (what DDP wraps)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, h):
        h = checkpoint(self.net[:6], h, use_reentrant=False)
        return checkpoint(self.net[6:], h, use_reentrant=False)


def _ddp_checkpointed(rank, world):
    net = _net(4)
    model = tb.nn.parallel.DistributedDataParallel(_Halves(net))
    fired = []
    for p in net.parameters():
        p.register_post_accumulate_grad_hook(lambda t: fired.append(id(t)))
    x0 = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    model(tb.tensor(x0[rank * 4:(rank + 1) * 4])).pow(2).mean().backward()
    return {"grads": [p.grad.numpy().tolist() for p in net.parameters()],
            "fired": len(fired), "params": len(list(net.parameters()))}


def test_checkpoint_under_ddp_matches_one_process():
    from tensorbrain.testing.distributed import run_workers
    res = run_workers("tests.utils.test_checkpoint:_ddp_checkpointed", 2, timeout=90)
    ref = _net(4)
    x0 = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    ref(tb.tensor(x0)).pow(2).mean().backward()
    for r in res:
        assert r["fired"] == r["params"]            # each parameter's hook fired exactly once
        for a, b in zip(r["grads"], _grads(ref), strict=True):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-6)


# ***** with FSDP: each block checkpointed inside the model's forward, blocks sharded *****
class _Block(tb.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = tb.nn.Linear(8, 16), tb.nn.Linear(16, 8)

    def forward(self, x):
        return x + self.fc2(tb.nn.functional.gelu(self.fc1(x)))


class _Blocks(tb.nn.Module):
    def __init__(self, ckpt):
        super().__init__()
        tb.manual_seed(3)
        self.blocks = tb.nn.ModuleList([_Block() for _ in range(3)])
        self.head = tb.nn.Linear(8, 2)
        self.ckpt = ckpt

    def forward(self, x):
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False) if self.ckpt else b(x)
        return self.head(x)


def _blocks_data():
    rng = np.random.default_rng(0)
    return (tb.tensor(rng.standard_normal((8, 8)).astype(np.float32)),
            tb.tensor(rng.standard_normal((8, 2)).astype(np.float32)))


def _train_blocks(model, x, y):
    opt = tb.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        opt.zero_grad()
        tb.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def _fsdp_checkpointed(rank, world):
    from tensorbrain.distributed.device_mesh import init_device_mesh
    from tensorbrain.distributed.fsdp import FullyShardedDataParallel as FSDP
    from tensorbrain.distributed.fsdp import fully_shard
    from tensorbrain.distributed.fsdp.wrap import ModuleWrapPolicy
    x, y = _blocks_data()
    x, y = x[rank * 4:(rank + 1) * 4], y[rank * 4:(rank + 1) * 4]
    out = {}
    net = _Blocks(ckpt=True)
    mesh = init_device_mesh("cpu", (world,))
    for b in net.blocks:
        fully_shard(b, mesh=mesh)
    fully_shard(net, mesh=mesh)
    _train_blocks(net, x, y)
    out["fully_shard"] = {n: p.full_tensor().detach().numpy().tolist()
                          for n, p in net.named_parameters()}
    for orig in (False, True):
        m = FSDP(_Blocks(ckpt=True), auto_wrap_policy=ModuleWrapPolicy({_Block}),
                 use_orig_params=orig)
        _train_blocks(m, x, y)
        out[f"fsdp1_orig={orig}"] = {n: v.numpy().tolist() for n, v in m.state_dict().items()}
    return out


def test_checkpoint_under_fsdp_matches_one_process():
    from tensorbrain.testing.distributed import run_workers
    res = run_workers("tests.utils.test_checkpoint:_fsdp_checkpointed", 2, timeout=120)
    ref = _Blocks(ckpt=False)
    _train_blocks(ref, *_blocks_data())
    for r in res:
        assert sorted(r) == ["fsdp1_orig=False", "fsdp1_orig=True", "fully_shard"]
        for kind, params in r.items():
            for n, p in ref.named_parameters():
                np.testing.assert_allclose(np.asarray(params[n]), p.detach().numpy(), rtol=1e-5,
                                           atol=1e-6, err_msg=f"{kind} {n}")
