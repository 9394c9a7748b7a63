"""The FSDP2 idiom for models too big for one device: build on the meta device, fully_shard,
to_empty, reset_parameters; it trains like the same model built normally (same weights given
the same seed), at 2 ranks."""
import numpy as np
import pytest

pytestmark = pytest.mark.timeout(120)


def _net(tb):
    class Block(tb.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = tb.nn.Linear(6, 6)
            self.norm = tb.nn.LayerNorm(6)

        def forward(self, x):
            return self.norm(tb.tanh(self.fc(x))) + x

    class Net(tb.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = tb.nn.Linear(5, 6)
            self.blocks = tb.nn.ModuleList([Block(), Block()])
            self.head = tb.nn.Linear(6, 3)

        def forward(self, x):
            x = self.emb(x)
            for b in self.blocks:
                x = b(x)
            return self.head(x)
    return Net


def _train(tb, model, xs, ys, rows):
    opt = tb.optim.AdamW(model.parameters(), lr=0.02)
    losses = []
    for x, y in zip(xs, ys):
        loss = tb.nn.functional.cross_entropy(model(tb.tensor(x[rows])), tb.tensor(y[rows]))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.item()))
    return losses


def _meta_fsdp2(rank, world_size):
    import tensorbrain as tb
    from tensorbrain.distributed.fsdp import fully_shard
    Net = _net(tb)
    data = np.random.default_rng(0)
    xs = data.standard_normal((4, 8, 5)).astype(np.float32)
    ys = data.integers(0, 3, (4, 8))
    # the reference: built normally, one process on the whole batch
    tb.manual_seed(7)
    ref = Net()
    start = {n: p.detach().numpy().copy() for n, p in ref.named_parameters()}
    ref_losses = _train(tb, ref, xs, ys, slice(None))
    # the idiom: meta, shard, storage, initialise
    with tb.device("meta"):
        model = Net()
    assert all(p.is_meta for p in model.parameters())
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    model.to_empty(device="cpu")
    tb.manual_seed(7)
    for m in model.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()
    got_start = {n: p.full_tensor().detach().numpy() for n, p in model.named_parameters()}
    half = slice(rank * 4, rank * 4 + 4)
    losses = _train(tb, model, xs, ys, half)
    final = {n: p.full_tensor().detach().numpy() for n, p in model.named_parameters()}
    return {"start": max(float(np.abs(got_start[n] - start[n]).max()) for n in start),
            "final": max(float(np.abs(final[n] - ref.state_dict()[n].numpy()).max())
                         for n in start),
            "names": sorted(final) == sorted(start), "losses": losses, "ref": ref_losses}


def test_meta_built_fully_sharded_model_trains_like_the_normal_one(workers):
    for r in workers("tests.distributed.test_meta_fsdp:_meta_fsdp2", 2):
        assert r["names"] and r["start"] == 0.0          # same weights given the same seed
        assert r["final"] < 1e-5, r["final"]             # trains like one process, full batch
    # each rank's loss is on its half; their mean is the full batch's loss
    r0, r1 = workers("tests.distributed.test_meta_fsdp:_meta_fsdp2", 2)
    np.testing.assert_allclose((np.array(r0["losses"]) + r1["losses"]) / 2, r0["ref"], rtol=1e-5)


def test_every_layer_with_parameters_can_be_reset_after_to_empty():
    """reset_parameters() on every layer that owns parameters (the idiom calls it on each)."""
    import tensorbrain as tb
    layers = [tb.nn.Linear(3, 2), tb.nn.Conv1d(2, 3, 3), tb.nn.Conv2d(2, 3, 3),
              tb.nn.Embedding(5, 3), tb.nn.LayerNorm(3), tb.nn.BatchNorm1d(3),
              tb.nn.GroupNorm(1, 3), tb.nn.LSTM(3, 4), tb.nn.GRU(3, 4), tb.nn.PReLU(),
              tb.nn.MultiheadAttention(4, 2), tb.nn.RMSNorm(3)]
    with tb.device("meta"):
        metas = [type(layer)(*_args(layer)) for layer in layers]
    for normal, meta in zip(layers, metas):
        assert all(p.is_meta for p in meta.parameters()), type(meta).__name__
        meta.to_empty(device="cpu")
        tb.manual_seed(3)
        # children first: MultiheadAttention builds (and initialises) out_proj before its own
        # _reset_parameters, so that order draws the random numbers as construction did
        for m in reversed(list(meta.modules())):
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
            elif hasattr(m, "_reset_parameters"):
                m._reset_parameters()
        tb.manual_seed(3)
        again = type(normal)(*_args(normal))
        for (n, a), b in zip(meta.named_parameters(), again.parameters()):
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(),
                                          err_msg=f"{type(meta).__name__}.{n}")


def _args(layer):
    import tensorbrain as tb
    table = {tb.nn.Linear: (3, 2), tb.nn.Conv1d: (2, 3, 3), tb.nn.Conv2d: (2, 3, 3),
             tb.nn.Embedding: (5, 3), tb.nn.LayerNorm: (3,), tb.nn.BatchNorm1d: (3,),
             tb.nn.GroupNorm: (1, 3), tb.nn.LSTM: (3, 4), tb.nn.GRU: (3, 4), tb.nn.PReLU: (),
             tb.nn.MultiheadAttention: (4, 2), tb.nn.RMSNorm: (3,)}
    return table[type(layer)]
