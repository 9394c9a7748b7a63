"""torch's SyncBatchNorm pieces (tb.batch_norm_stats ...) against the whole-batch batch norm:
the batch split over two "ranks", statistics gathered, normalised, and the backward sums
combined give F.batch_norm's values, running statistics and gradients (torch runs these five
on CUDA only, so the reference is the whole-batch computation, itself checked against torch in
tests/nn)."""
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.nn.functional as F


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (4, 2, 3, 3)])
def test_split_batch_matches_whole_batch(shape):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float64) * 2 + 1
    w = rng.standard_normal(shape[1])
    b = rng.standard_normal(shape[1])
    dy = rng.standard_normal(shape)
    eps, momentum = 1e-5, 0.1
    # reference: the whole batch through F.batch_norm with autograd
    xt = tb.tensor(x, requires_grad=True)
    wt, bt = tb.tensor(w, requires_grad=True), tb.tensor(b, requires_grad=True)
    rm_ref, rv_ref = tb.zeros(shape[1], dtype=tb.float64), tb.ones(shape[1], dtype=tb.float64)
    ref = F.batch_norm(xt, rm_ref, rv_ref, wt, bt, training=True, momentum=momentum, eps=eps)
    (ref * tb.tensor(dy)).sum().backward()
    # two ranks of unequal size
    cut = shape[0] // 2 - 1 if shape[0] > 4 else 1
    parts = [tb.tensor(x[:cut]), tb.tensor(x[cut:])]
    dys = [tb.tensor(dy[:cut]), tb.tensor(dy[cut:])]
    stats = [tb.batch_norm_stats(p, eps) for p in parts]
    per_channel = int(np.prod(shape)) // shape[1]
    counts = tb.tensor([float(p.shape[0] * per_channel // shape[0]) for p in parts],
                       dtype=tb.float64)
    rm, rv = tb.zeros(shape[1], dtype=tb.float64), tb.ones(shape[1], dtype=tb.float64)
    mean, invstd = tb.batch_norm_gather_stats_with_counts(
        parts[0], tb.stack([s[0] for s in stats]), tb.stack([s[1] for s in stats]), rm, rv,
        momentum, eps, counts)
    out = tb.cat([tb.batch_norm_elemt(p, tb.tensor(w), tb.tensor(b), mean, invstd, eps)
                  for p in parts])
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(rm.numpy(), rm_ref.numpy(), rtol=1e-10)
    np.testing.assert_allclose(rv.numpy(), rv_ref.numpy(), rtol=1e-10)
    sums = [tb.batch_norm_backward_reduce(g, p, mean, invstd, tb.tensor(w), True, True, True)
            for g, p in zip(dys, parts)]
    sum_dy = sums[0][0] + sums[1][0]
    sum_dy_xmu = sums[0][1] + sums[1][1]
    np.testing.assert_allclose((sums[0][2] + sums[1][2]).numpy(), wt.grad.numpy(), rtol=1e-9)
    np.testing.assert_allclose((sums[0][3] + sums[1][3]).numpy(), bt.grad.numpy(), rtol=1e-9)
    gx = tb.cat([tb.batch_norm_backward_elemt(g, p, mean, invstd, tb.tensor(w), sum_dy,
                                              sum_dy_xmu, counts)
                 for g, p in zip(dys, parts)])
    np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), rtol=1e-8, atol=1e-10)
    assert tb.batch_norm_backward_reduce(dys[0], parts[0], mean, invstd, None,
                                         False, False, False) == (None, None, None, None)


def test_bad_input():
    with pytest.raises(ValueError, match="channel dimension"):
        tb.batch_norm_stats(tb.ones(3), 1e-5)


def test_conv_tbc_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(s) for s in ((7, 3, 4), (3, 4, 5), (5,)))
    for pad in (0, 1, 2):
        bt = [tb.tensor(a, requires_grad=True) for a in (x, w, b)]
        tt = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
        out_b, out_t = tb.conv_tbc(*bt, pad), torch.conv_tbc(*tt, pad)
        np.testing.assert_allclose(out_b.detach().numpy(), out_t.detach().numpy(), rtol=1e-10)
        (out_b * out_b).sum().backward()
        (out_t * out_t).sum().backward()
        for p, q in zip(bt, tt):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-9)
    assert F.conv_tbc is tb.conv_tbc
    with pytest.raises(RuntimeError, match="input channels 4"):
        tb.conv_tbc(tb.ones(7, 3, 4), tb.ones(3, 2, 5), tb.ones(5))
