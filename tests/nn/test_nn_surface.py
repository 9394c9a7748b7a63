"""The nn layers and functions added for issue 29 (_ops/nn_more.py, pooling.py, activations.py,
nn/functional.py, padding, instance norm, pooling, fold, activations, attention, parametrize,
spectral norm, prune, swa_utils, init aliases): values and gradients against torch, with the same weights."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import nn
from tensorbrain.testing import gradcheck

torch = pytest.importorskip("torch")
R = np.random.default_rng(0)


def A(*shape):
    return R.standard_normal(shape)


def _same_weights(ours, theirs):
    """Copy ``ours``' parameters and buffers into ``theirs`` (same names, as torch's)."""
    sd = {k: torch.tensor(v.detach().numpy() if isinstance(v, tb.Tensor) else v)
          for k, v in ours.state_dict().items()}
    theirs.load_state_dict(sd)


# name -> (build(lib) -> module or None, call(lib, module, *tensors), inputs)
CASES = {
    "ZeroPad2d": (lambda L: L.nn.ZeroPad2d((1, 2, 0, 1)), None, [A(1, 2, 3, 3)]),
    "ReflectionPad2d": (lambda L: L.nn.ReflectionPad2d(1), None, [A(1, 2, 3, 3)]),
    "ReplicationPad1d": (lambda L: L.nn.ReplicationPad1d((2, 1)), None, [A(2, 3, 4)]),
    "ConstantPad3d": (lambda L: L.nn.ConstantPad3d(1, 0.5), None, [A(1, 1, 2, 2, 2)]),
    "CircularPad2d": (lambda L: L.nn.CircularPad2d(1), None, [A(1, 1, 3, 3)]),
    "InstanceNorm2d": (lambda L: L.nn.InstanceNorm2d(3, affine=True), None, [A(2, 3, 4, 4)]),
    "InstanceNorm1d_stats": (lambda L: L.nn.InstanceNorm1d(3, track_running_stats=True), None,
                             [A(2, 3, 5)]),
    "BatchNorm3d": (lambda L: L.nn.BatchNorm3d(2), None, [A(3, 2, 2, 2, 2)]),
    "MaxPool1d": (lambda L: L.nn.MaxPool1d(3, 2, 1), None, [A(2, 3, 9)]),
    "MaxPool3d": (lambda L: L.nn.MaxPool3d(2, 1), None, [A(1, 2, 3, 3, 3)]),
    "MaxPool3d_pad": (lambda L: L.nn.MaxPool3d(3, 2, 1, ceil_mode=True), None,
                      [A(1, 1, 4, 5, 4)]),
    "AvgPool1d": (lambda L: L.nn.AvgPool1d(3, 2, 1, count_include_pad=False), None,
                  [A(2, 3, 8)]),
    "AvgPool3d": (lambda L: L.nn.AvgPool3d(2, 2, 1), None, [A(1, 2, 4, 3, 4)]),
    "AdaptiveAvgPool1d": (lambda L: L.nn.AdaptiveAvgPool1d(3), None, [A(2, 3, 7)]),
    "AdaptiveAvgPool3d": (lambda L: L.nn.AdaptiveAvgPool3d((2, 1, 3)), None, [A(1, 2, 5, 3, 4)]),
    "AdaptiveMaxPool1d": (lambda L: L.nn.AdaptiveMaxPool1d(3), None, [A(2, 3, 7)]),
    "AdaptiveMaxPool2d": (lambda L: L.nn.AdaptiveMaxPool2d((2, 3)), None, [A(2, 1, 5, 7)]),
    "AdaptiveMaxPool3d": (lambda L: L.nn.AdaptiveMaxPool3d(2), None, [A(1, 2, 3, 5, 4)]),
    "Unfold": (lambda L: L.nn.Unfold(2, dilation=1, padding=1, stride=2), None, [A(2, 3, 5, 4)]),
    "Fold": (lambda L: L.nn.Fold((4, 5), 2, padding=1, stride=2), None, [A(2, 12, 9)]),
    "GLU": (lambda L: L.nn.GLU(1), None, [A(2, 6)]),
    "SELU": (lambda L: L.nn.SELU(), None, [A(3, 4)]),
    "CELU": (lambda L: L.nn.CELU(0.7), None, [A(3, 4)]),
    "Softsign": (lambda L: L.nn.Softsign(), None, [A(3, 4)]),
    "Softshrink": (lambda L: L.nn.Softshrink(0.3), None, [A(3, 4)]),
    "Hardshrink": (lambda L: L.nn.Hardshrink(0.3), None, [A(3, 4)]),
    "Tanhshrink": (lambda L: L.nn.Tanhshrink(), None, [A(3, 4)]),
    "Threshold": (lambda L: L.nn.Threshold(0.1, -2.0), None, [A(3, 4)]),
    "Softmin": (lambda L: L.nn.Softmin(1), None, [A(3, 4)]),
    "Softmax2d": (lambda L: L.nn.Softmax2d(), None, [A(2, 3, 2, 2)]),
    "CosineSimilarity": (lambda L: L.nn.CosineSimilarity(1), None, [A(3, 4), A(3, 4)]),
    "PairwiseDistance": (lambda L: L.nn.PairwiseDistance(3), None, [A(3, 4), A(3, 4)]),
    "grid_sample": (None, lambda L, m, x, g: L.nn.functional.grid_sample(
        x, g, align_corners=False), [A(2, 3, 4, 5), R.uniform(-1.2, 1.2, (2, 3, 2, 2))]),
    "grid_sample_border": (None, lambda L, m, x, g: L.nn.functional.grid_sample(
        x, g, padding_mode="border", align_corners=True),
        [A(1, 2, 3, 3), R.uniform(-1.3, 1.3, (1, 4, 4, 2))]),
    "grid_sample_nearest": (None, lambda L, m, x, g: L.nn.functional.grid_sample(
        x, g, mode="nearest", align_corners=False), [A(1, 2, 3, 3), R.uniform(-1, 1, (1, 2, 2, 2))]),
    "affine_grid": (None, lambda L, m, t: L.nn.functional.affine_grid(t, (2, 3, 4, 5), False),
                    [A(2, 2, 3)]),
    "affine_grid_ac": (None, lambda L, m, t: L.nn.functional.affine_grid(t, (1, 1, 3, 2), True),
                       [A(1, 2, 3)]),
    "instance_norm_eval": (None, lambda L, m, x: L.nn.functional.instance_norm(
        x, L.tensor([0.5, -1.0, 0.0], dtype=x.dtype), L.tensor([1.5, 0.5, 2.0], dtype=x.dtype),
        use_input_stats=False), [A(2, 3, 4)]),
    "local_response_norm": (None, lambda L, m, x: L.nn.functional.local_response_norm(x, 3),
                            [A(2, 5, 3)]),
    "gaussian_nll": (None, lambda L, m, x, y, v: L.nn.functional.gaussian_nll_loss(
        x, y, v, full=True), [A(4, 2), A(4, 2), np.abs(A(4, 2)) + 0.1]),
    "poisson_nll": (None, lambda L, m, x, y: L.nn.functional.poisson_nll_loss(x, y, full=True),
                    [A(5), np.array([0.0, 1, 2, 3, 7])]),
    "poisson_nll_rates": (None, lambda L, m, x, y: L.nn.functional.poisson_nll_loss(
        x, y, log_input=False, reduction="sum"), [np.abs(A(5)) + 0.2, np.array([0.0, 1, 2, 3, 7])]),
    "leaky_relu_": (None, lambda L, m, x: L.nn.functional.leaky_relu_(x * 1, 0.2), [A(3, 4)]),
    "elu_": (None, lambda L, m, x: L.nn.functional.elu_(x * 1, 0.5), [A(3, 4)]),
}


# inputs that are data, not variables (the losses' targets)
NO_GRAD_INPUTS = {"poisson_nll": (1,), "poisson_nll_rates": (1,), "gaussian_nll": (1,)}


def _run(lib, case, arrays, name):
    build, call, _ = case
    ts = [lib.tensor(a, requires_grad=a.dtype.kind == "f" and i not in NO_GRAD_INPUTS.get(
        name, ())) for i, a in enumerate(arrays)]
    if build is not None:
        m = build(lib)
        return ts, m, m(*ts)
    return ts, None, call(lib, None, *ts)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    case = CASES[name]
    arrays = case[2]
    ts_a, ma, out_a = _run(tb, case, arrays, name)
    tt = [torch.tensor(a, requires_grad=a.dtype.kind == "f" and i not in NO_GRAD_INPUTS.get(
        name, ())) for i, a in enumerate(arrays)]
    if case[0] is not None:
        mb = case[0](torch).double()
        if ma is not None and list(ma.state_dict()):
            ma = ma.double() if hasattr(ma, "double") else ma
            _same_weights(ma, mb)
            ts_a, _, out_a = ts_a, None, ma(*ts_a)
        out_b = mb(*tt)
    else:
        out_b = case[1](torch, None, *tt)
    np.testing.assert_allclose(out_a.detach().numpy(), out_b.detach().numpy(), rtol=1e-7,
                               atol=1e-10, err_msg=name)
    cot = R.standard_normal(tuple(out_b.shape))
    (out_a * tb.tensor(cot)).sum().backward()
    (out_b * torch.tensor(cot)).sum().backward()
    for a, b in zip(ts_a, tt):
        if b.grad is not None:
            ga = np.zeros(b.shape) if a.grad is None else a.grad.numpy()   # nearest: no gradient
            np.testing.assert_allclose(ga, b.grad.numpy(), rtol=1e-7, atol=1e-10, err_msg=name)
    if ma is not None and case[0] is not None and name.startswith("InstanceNorm1d"):
        np.testing.assert_allclose(ma.running_mean.numpy(), mb.running_mean.detach().numpy())


def test_smooth_ones_against_finite_differences():
    F = nn.functional
    gradcheck(lambda x: F.max_pool3d(x, 2), [A(1, 1, 4, 4, 2)])
    gradcheck(lambda x: F.avg_pool1d(x, 2), [A(1, 2, 6)])
    gradcheck(lambda x, g: F.grid_sample(x, g, align_corners=True),
              [A(1, 1, 3, 3), R.uniform(-0.9, 0.9, (1, 2, 2, 2))])
    gradcheck(lambda x: F.fold(F.unfold(x, 2, padding=1), (3, 4), 2, padding=1), [A(1, 2, 3, 4)])


def test_multi_head_attention_forward_matches_torch():
    m = nn.MultiheadAttention(8, 2)
    tm = torch.nn.MultiheadAttention(8, 2)
    _same_weights(m, tm)
    q, k = A(5, 3, 8).astype(np.float32), A(4, 3, 8).astype(np.float32)
    mask = np.triu(np.ones((5, 4), bool), 1)
    pad = np.zeros((3, 4), bool)
    pad[1, -1] = True
    res = []
    for lib, mod in ((tb, m), (torch, tm)):
        out, w = lib.nn.functional.multi_head_attention_forward(
            lib.tensor(q), lib.tensor(k), lib.tensor(k), 8, 2, mod.in_proj_weight,
            mod.in_proj_bias, None, None, False, 0.0, mod.out_proj.weight, mod.out_proj.bias,
            key_padding_mask=lib.tensor(pad), attn_mask=lib.tensor(mask))
        res.append((out.detach().numpy(), w.detach().numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-5, atol=1e-6)


def test_flex_attention_and_sdpa_kernel_match_torch():
    from tensorbrain.nn.attention import SDPBackend, sdpa_kernel
    from tensorbrain.nn.attention.flex_attention import create_block_mask, flex_attention
    from torch.nn.attention.flex_attention import create_block_mask as t_cbm
    from torch.nn.attention.flex_attention import flex_attention as t_flex
    q0, k0, v0 = (A(2, 2, 6, 4) for _ in range(3))

    def causal(b, h, q, kv):
        return q >= kv

    def bias(score, b, h, q, kv):
        return score + (q - kv) * 0.1 + h

    res = []
    for lib, cbm, flex in ((tb, create_block_mask, flex_attention), (torch, t_cbm, t_flex)):
        q, k, v = (lib.tensor(a) for a in (q0, k0, v0))
        mask = cbm(causal, None, None, 6, 6, device="cpu")
        res.append(flex(q, k, v, score_mod=bias, block_mask=mask).numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-6, atol=1e-8)
    # torch's flex_attention has no backward on the CPU: finite differences check ours
    mask = create_block_mask(causal, None, None, 6, 6)
    gradcheck(lambda q, k, v: flex_attention(q, k, v, score_mod=bias, block_mask=mask),
              [q0[:1, :1], k0[:1, :1], v0[:1, :1]])
    with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]):
        tb.nn.functional.scaled_dot_product_attention(tb.ones(1, 2, 4), tb.ones(1, 2, 4),
                                                      tb.ones(1, 2, 4))
    assert int(SDPBackend.EFFICIENT_ATTENTION) == int(torch.nn.attention.SDPBackend
                                                      .EFFICIENT_ATTENTION)


def test_gumbel_softmax_is_a_distribution_and_hard_is_straight_through():
    F = nn.functional
    logits = tb.tensor(A(4, 5), requires_grad=True)
    soft = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(-1).detach().numpy(), 1.0, rtol=1e-6)
    hard = F.gumbel_softmax(logits, hard=True)
    assert set(np.unique(hard.detach().numpy())) <= {0.0, 1.0}
    (hard * tb.tensor(A(4, 5))).sum().backward()
    assert logits.grad is not None and np.abs(logits.grad.numpy()).sum() > 0


def _l1_then_ln(lib, w, amount):
    """``lib``'s Linear(4, 3) with weight ``w``, pruned by ``l1_unstructured(amount)`` and then
    ``ln_structured(amount=1, n=2, dim=0)``."""
    m = lib.nn.Linear(4, 3)
    with lib.no_grad():
        m.weight.copy_(lib.tensor(w))
    lib.nn.utils.prune.l1_unstructured(m, "weight", amount=amount)
    lib.nn.utils.prune.ln_structured(m, "weight", amount=1, n=2, dim=0)
    return m


def test_parametrize_spectral_norm_and_prune_match_torch():
    import torch.nn.utils.prune  # noqa: F401  (torch does not import it with torch.nn)
    w = A(3, 4).astype(np.float32)
    x = A(2, 4).astype(np.float32)
    outs = []
    for lib in (tb, torch):
        m = lib.nn.Linear(4, 3)
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w))
            m.bias.zero_()
        sn = lib.nn.utils.spectral_norm(m, n_power_iterations=30)
        with lib.no_grad():   # the same start for the power iteration
            sn.weight_u.copy_(lib.ones(3) / np.sqrt(3))
        y = sn(lib.tensor(x))
        y.sum().backward()
        outs.append((sorted(sn.state_dict()), y.detach().numpy(), sn.weight_orig.grad.numpy()))
    assert outs[0][0] == outs[1][0]
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs[0][2], outs[1][2], rtol=1e-3, atol=1e-4)
    pruned = []
    for lib in (tb, torch):
        m = _l1_then_ln(lib, w, 0.4)
        pruned.append((sorted(m.state_dict()), m.weight.detach().numpy().copy()))
        lib.nn.utils.prune.remove(m, "weight")
        assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight"]
    assert pruned[0][0] == pruned[1][0]
    np.testing.assert_array_equal(pruned[0][1], pruned[1][1])


def test_structured_pruning_after_pruning_matches_torch():
    """A second, structured pruning of a parameter: torch ranks slices by the norms of the
    parameter as pruned so far and chooses among slices that still keep an entry (here l1 has
    emptied row 2 and thinned row 1, so row 1 goes, not row 2 again)."""
    import torch.nn.utils.prune  # noqa: F401
    w = np.array([[1.0, -1.2, 0.9, 1.1], [0.05, 1.0, 0.8, -0.9], [0.01, -0.02, 0.03, 0.04]], np.float32)
    masks = [_l1_then_ln(lib, w, 5).weight_mask.detach().numpy().copy() for lib in (tb, torch)]
    np.testing.assert_array_equal(masks[0], masks[1])
    assert not masks[0][1:].any()
    for seed in range(6):             # random_structured: only the one row left can go
        tb.manual_seed(seed)
        m = tb.nn.Linear(4, 3)
        tb.nn.utils.prune.ln_structured(m, "weight", amount=2, n=1, dim=0)
        tb.nn.utils.prune.random_structured(m, "weight", amount=1, dim=0)
        assert not m.weight_mask.numpy().any()


def test_swa_and_init_aliases():
    ms = [lib.nn.Linear(3, 2) for lib in (tb, torch)]
    _same_weights(ms[0], ms[1])
    avgs = [tb.optim.swa_utils.AveragedModel(ms[0]), torch.optim.swa_utils.AveragedModel(ms[1])]
    for _ in range(3):
        for lib, m, avg in zip((tb, torch), ms, avgs):
            with lib.no_grad():
                m.weight.mul_(1.5).add_(0.1)
            avg.update_parameters(m)
    np.testing.assert_allclose(avgs[0].module.weight.detach().numpy(),
                               avgs[1].module.weight.detach().numpy(), rtol=1e-6)
    ema = tb.optim.swa_utils.AveragedModel(ms[0], multi_avg_fn=tb.optim.swa_utils
                                           .get_ema_multi_avg_fn(0.9))
    ema.update_parameters(ms[0])
    with pytest.warns(FutureWarning, match="deprecated"):
        nn.init.normal(tb.empty(2, 2))
    from tensorbrain.nn.modules.utils import _pair, _triple
    assert _pair(3) == (3, 3) and _triple((1, 2, 3)) == (1, 2, 3)


def test_lazy_modules_become_their_layer_and_keep_the_optimizers_parameters():
    for lazy, x, want in ((nn.LazyLinear(3), tb.ones(2, 5), nn.Linear),
                          (nn.LazyConv2d(4, 3, padding=1, groups=2), tb.ones(1, 2, 5, 5), nn.Conv2d),
                          (nn.LazyBatchNorm1d(), tb.randn(4, 3), nn.BatchNorm1d)):
        assert lazy.has_uninitialized_params()
        opt = tb.optim.SGD(lazy.parameters(), lr=0.1)
        y = lazy(x)
        assert type(lazy) is want and not isinstance(lazy.weight, nn.UninitializedParameter)
        y.sum().backward()
        opt.step()
        assert opt.param_groups[0]["params"][0] is lazy.weight
    t = torch.nn.LazyLinear(3)
    t(torch.ones(2, 5))
    assert type(t) is torch.nn.Linear and tuple(t.weight.shape) == (3, 5)


def test_bilinear_and_grouped_mm_match_torch():
    m, tm = nn.Bilinear(3, 4, 2), torch.nn.Bilinear(3, 4, 2)
    _same_weights(m, tm)
    x1, x2 = A(5, 3).astype(np.float32), A(5, 4).astype(np.float32)
    np.testing.assert_allclose(m(tb.tensor(x1), tb.tensor(x2)).detach().numpy(),
                               tm(torch.tensor(x1), torch.tensor(x2)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    F, TF = nn.functional, torch.nn.functional
    offs = np.array([4, 8], dtype=np.int32)
    for a_shape, b_shape, use_offs in (((8, 8), (2, 8, 8), True), ((2, 8, 8), (2, 8, 8), False),
                                       ((8, 8), (8, 8), True), ((2, 8, 8), (8, 8), True)):
        a, b = A(*a_shape).astype(np.float32), A(*b_shape).astype(np.float32)
        kw = {"offs": tb.tensor(offs)} if use_offs else {}
        tkw = {"offs": torch.tensor(offs)} if use_offs else {}
        np.testing.assert_allclose(F.grouped_mm(tb.tensor(a), tb.tensor(b), **kw).numpy(),
                                   TF.grouped_mm(torch.tensor(a), torch.tensor(b), **tkw).numpy(),
                                   rtol=1e-5, atol=1e-5)


def test_state_dict_prefix_helper_matches_torch():
    from tensorbrain.nn.modules.utils import consume_prefix_in_state_dict_if_present as ours
    from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present as theirs
    import collections
    for fn in (ours, theirs):
        sd = collections.OrderedDict([("module.a", 1), ("module.b.c", 2), ("d", 3)])
        fn(sd, "module.")
        assert sorted(sd) == ["a", "b.c", "d"]
