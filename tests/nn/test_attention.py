"""Attention and transformer layers: finite differences always, torch op by op where installed
(same weights through a state dict)."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import nn
from tensorbrain.nn import functional as F
from tensorbrain.testing import gradcheck

RNG = np.random.default_rng(1)


def _torch_fn(fn):
    """``fn(torch.nn.functional)`` where torch is installed, else None."""
    try:
        import torch
    except ImportError:
        return None
    return fn(torch)


# ***** F.scaled_dot_product_attention *****
@pytest.mark.parametrize("case", ["plain", "causal", "bool_mask", "float_mask", "scale",
                                  "broadcast", "gqa", "cross"])
def test_sdpa_gradients(case):
    q = RNG.standard_normal((2, 2, 3, 4))
    kv_shape = {"gqa": (2, 1, 5, 4), "cross": (2, 2, 5, 4), "broadcast": (1, 2, 3, 4)}
    k = RNG.standard_normal(kv_shape.get(case, (2, 2, 3, 4)))
    v = RNG.standard_normal(k.shape[:-1] + (3,))
    S = k.shape[-2]
    kw = {"causal": {"is_causal": True}, "scale": {"scale": 0.3},
          "gqa": {"enable_gqa": True}}.get(case, {})
    inputs = [q, k, v]
    if case == "bool_mask":
        inputs.append(RNG.random((3, S)) > 0.3)
        inputs[-1][:, 0] = True
    elif case == "float_mask":
        inputs.append(RNG.standard_normal((2, 1, 3, S)))
    def fn(q, k, v, m=None):
        return (F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw))
    tfn = _torch_fn(lambda torch: lambda q, k, v, m=None:
                    torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw))
    gradcheck(fn, inputs, torch_fn=tfn)


def test_sdpa_dropout_is_a_rescaled_mask():
    q = tb.randn(2, 6, 8)
    tb.manual_seed(3)
    dropped = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert not np.allclose(dropped.numpy(), F.scaled_dot_product_attention(q, q, q).numpy())
    assert float(F.scaled_dot_product_attention(q, q, q, dropout_p=1.0).abs().sum()) == 0

    def fn(x):
        tb.manual_seed(0)   # the same mask in every finite-difference evaluation
        return F.scaled_dot_product_attention(x, x, x, dropout_p=0.3)
    gradcheck(fn, [RNG.standard_normal((2, 3, 4))])


def test_sdpa_errors():
    q = tb.randn(2, 3, 4)
    with pytest.raises(RuntimeError, match="is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=tb.ones(3, 3), is_causal=True)
    with pytest.raises(RuntimeError, match="last"):
        F.scaled_dot_product_attention(q, tb.randn(2, 3, 5), q)


# ***** nn.MultiheadAttention *****
MHA_CASES = [
    ({}, {}), ({"batch_first": True}, {"need_weights": False}),
    ({"kdim": 3, "vdim": 5}, {}), ({"add_bias_kv": True, "add_zero_attn": True}, {}),
    ({"bias": False}, {"average_attn_weights": False}),
    ({}, {"key_padding_mask": "bool", "attn_mask": "float"}),
    ({"batch_first": True}, {"attn_mask": "bool3d", "key_padding_mask": "float"}),
]


def _mha_inputs(mod_kw, call_kw, N=2, L=3, S=4, E=4, H=2):
    shape = (lambda n, s, e: (n, s, e)) if mod_kw.get("batch_first") else \
        (lambda n, s, e: (s, n, e))
    q = RNG.standard_normal(shape(N, L, E))
    k = RNG.standard_normal(shape(N, S, mod_kw.get("kdim", E)))
    v = RNG.standard_normal(shape(N, S, mod_kw.get("vdim", E)))
    masks = {}
    if call_kw.get("key_padding_mask") == "bool":
        masks["key_padding_mask"] = np.array([[False, False, True, True], [False] * 4])
    elif call_kw.get("key_padding_mask") == "float":
        masks["key_padding_mask"] = RNG.standard_normal((N, S))
    if call_kw.get("attn_mask") == "float":
        masks["attn_mask"] = RNG.standard_normal((L, S))
    elif call_kw.get("attn_mask") == "bool3d":
        m = RNG.random((N * H, L, S)) > 0.6
        m[..., 0] = False
        masks["attn_mask"] = m
    rest = {k: v for k, v in call_kw.items() if k not in masks}
    return q, k, v, masks, rest


@pytest.mark.parametrize("mod_kw,call_kw", MHA_CASES)
def test_multihead_attention_against_torch_and_finite_differences(mod_kw, call_kw):
    m = nn.MultiheadAttention(4, 2, **mod_kw).double()
    names = [n for n, _ in m.named_parameters()]
    params = [p.detach().numpy().copy() for _, p in m.named_parameters()]
    q, k, v, masks, rest = _mha_inputs(mod_kw, call_kw)
    mask_names = sorted(masks)

    def fn(q, k, v, *rest_args):
        ms = dict(zip(mask_names, rest_args[:len(mask_names)], strict=True))
        for n, p in zip(names, rest_args[len(mask_names):], strict=True):
            _set(m, n, p)
        out, w = m(q, k, v, **ms, **rest)
        return (out,) if w is None else (out, w)

    tfn = None
    try:
        import torch
        tm = torch.nn.MultiheadAttention(4, 2, **mod_kw).double()
        assert names == [n for n, _ in tm.named_parameters()]

        def tfn(q, k, v, *rest_args):
            ms = dict(zip(mask_names, rest_args[:len(mask_names)], strict=True))
            ps = dict(zip(names, rest_args[len(mask_names):], strict=True))
            out, w = torch.func.functional_call(tm, ps, (q, k, v), {**ms, **rest})
            return (out,) if w is None else (out, w)
    except ImportError:
        pass
    gradcheck(fn, [q, k, v, *[masks[n] for n in mask_names], *params], torch_fn=tfn,
              grad_inputs=[0, 1, 2] + list(range(3 + len(masks), 3 + len(masks) + len(params))))


def _set(module, dotted, value):
    *path, leaf = dotted.split(".")
    for p in path:
        module = getattr(module, p)
    module._parameters[leaf] = value


def test_multihead_attention_unbatched_and_state_dict_from_torch():
    torch = pytest.importorskip("torch")
    tm = torch.nn.MultiheadAttention(6, 3, kdim=4, vdim=5)
    m = nn.MultiheadAttention(6, 3, kdim=4, vdim=5)
    m.load_state_dict({k: tb.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    q, k, v = (RNG.standard_normal(s).astype(np.float32) for s in ((3, 6), (5, 4), (5, 5)))
    out, w = m(tb.tensor(q), tb.tensor(k), tb.tensor(v))
    tout, tw = tm(torch.tensor(q), torch.tensor(k), torch.tensor(v))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), atol=1e-6)


def test_multihead_attention_errors():
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(6, 4)
    m = nn.MultiheadAttention(4, 2)
    x = tb.randn(3, 2, 4)
    with pytest.raises(RuntimeError, match="2D attn_mask"):
        m(x, x, x, attn_mask=tb.zeros(2, 2))
    with pytest.raises(RuntimeError, match="is_causal"):
        m(x, x, x, is_causal=True)


# ***** transformer layers *****
def _copy_from_torch(ours, theirs):
    ours.load_state_dict({k: tb.tensor(v.detach().numpy())
                          for k, v in theirs.state_dict().items()})


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_matches_torch(norm_first):
    torch = pytest.importorskip("torch")
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
              dim_feedforward=16, dropout=0.0, norm_first=norm_first)
    tm, m = torch.nn.Transformer(**kw).double(), nn.Transformer(**kw).double()
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    _copy_from_torch(m, tm)
    src, tgt = RNG.standard_normal((5, 2, 8)), RNG.standard_normal((4, 2, 8))
    mask = nn.Transformer.generate_square_subsequent_mask(4).double()
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4).double()
    np.testing.assert_array_equal(mask.numpy(), tmask.numpy())
    kpm = np.array([[False] * 5, [False, False, False, True, True]])
    s, t = tb.tensor(src, requires_grad=True), tb.tensor(tgt, requires_grad=True)
    ts, tt = torch.tensor(src, requires_grad=True), torch.tensor(tgt, requires_grad=True)
    out = m(s, t, tgt_mask=mask, src_key_padding_mask=tb.tensor(kpm),
            memory_key_padding_mask=tb.tensor(kpm))
    tout = tm(ts, tt, tgt_mask=tmask, src_key_padding_mask=torch.tensor(kpm),
              memory_key_padding_mask=torch.tensor(kpm))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), atol=1e-10)
    g = RNG.standard_normal(out.shape)
    out.backward(tb.tensor(g))
    tout.backward(torch.tensor(g))
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), atol=1e-10)
    for (n, p), (_, tp) in zip(m.named_parameters(), tm.named_parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), atol=1e-10, err_msg=n)


def test_decoder_layer_finite_differences_with_callable_activation():
    layer = nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0, activation=F.silu,
                                       batch_first=True, norm_first=True).double()
    names = [n for n, _ in layer.named_parameters()]
    params = [p.detach().numpy().copy() for _, p in layer.named_parameters()]
    mask = np.triu(np.ones((3, 3), dtype=bool), 1)

    def fn(tgt, mem, mask, *ps):
        for n, p in zip(names, ps, strict=True):
            _set(layer, n, p)
        return layer(tgt, mem, tgt_mask=mask, tgt_is_causal=True)
    gradcheck(fn, [RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 5, 4)), mask, *params])


def test_encoder_clones_are_independent_and_norm_applies():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    enc = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(8))
    assert len(enc.layers) == 3
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    out = enc(tb.randn(5, 2, 8))
    np.testing.assert_allclose(out.mean(-1).detach().numpy(), 0, atol=1e-5)


def test_view_splits_a_dim_of_a_sliced_tensor_without_copying():
    # nanoGPT: q, k, v = qkv.split(C, dim=2); q.view(B, T, nh, hs)
    x = tb.randn(2, 3, 12)
    q = x.split(4, dim=2)[1]
    v = q.view(2, 3, 2, 2)
    np.testing.assert_array_equal(v.numpy(), x.numpy()[:, :, 4:8].reshape(2, 3, 2, 2))
    with pytest.raises(RuntimeError, match="view"):
        x.transpose(0, 1).view(-1)


def test_attention_weights_changed_in_place_are_refused_in_backward():
    m = nn.MultiheadAttention(4, 2)
    x = tb.randn(3, 2, 4)
    out, w = m(x, x, x, average_attn_weights=False)
    w.mul_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def _varlen_reference(torch, q0, k0, v0, cq, ck, window, rep):
    """Per-sequence torch SDPA with the window as a boolean mask (torch's varlen kernel is
    CUDA-only): the reference for varlen_attn's values, lse and gradients."""
    q, k, v = (torch.tensor(a, requires_grad=True) for a in (q0, k0, v0))
    outs, lses = [], []
    for i in range(len(cq) - 1):
        qi = q[cq[i]:cq[i + 1]].transpose(0, 1)
        ki, vi = (t[ck[i]:ck[i + 1]].repeat_interleave(rep, 1).transpose(0, 1) for t in (k, v))
        lq, lk = qi.shape[1], ki.shape[1]
        rel = torch.arange(lk)[None, :] - torch.arange(lq)[:, None] - (lk - lq)
        keep = torch.ones(lq, lk, dtype=torch.bool)
        if window[0] >= 0:
            keep &= rel >= -window[0]
        if window[1] >= 0:
            keep &= rel <= window[1]
        s = (qi @ ki.transpose(-1, -2) / np.sqrt(q0.shape[-1])).masked_fill(~keep, float("-inf"))
        lses.append(torch.logsumexp(s, -1).transpose(0, 1))
        outs.append(torch.nn.functional.scaled_dot_product_attention(
            qi, ki, vi, attn_mask=keep).transpose(0, 1))
    o = torch.cat(outs)
    (o.sum() + (o ** 2).sum()).backward()
    return [o, torch.cat(lses), q.grad, k.grad, v.grad]


@pytest.mark.parametrize("window", [(-1, -1), (-1, 0), (1, 0), (2, 1)])
def test_varlen_attn_matches_torch_per_sequence(window):
    torch = pytest.importorskip("torch")
    from tensorbrain.nn.attention.varlen import AuxRequest, varlen_attn, varlen_attn_out
    rng = np.random.default_rng(0)
    lens_q, lens_k = [3, 1, 4], [5, 2, 4]
    q0 = rng.standard_normal((8, 4, 8))
    k0, v0 = rng.standard_normal((11, 2, 8)), rng.standard_normal((11, 2, 8))
    cq, ck = np.cumsum([0] + lens_q), np.cumsum([0] + lens_k)
    q, k, v = (tb.tensor(a, requires_grad=True) for a in (q0, k0, v0))
    cu_q, cu_k = tb.tensor(cq, dtype=tb.int32), tb.tensor(ck, dtype=tb.int32)
    o, lse = varlen_attn(q, k, v, cu_q, cu_k, 4, 5, return_aux=AuxRequest(lse=True),
                         window_size=window, enable_gqa=True)
    (o.sum() + (o ** 2).sum()).backward()
    want = _varlen_reference(torch, q0, k0, v0, cq, ck, window, 2)
    for got, ref in zip([o, lse, q.grad, k.grad, v.grad], want):
        np.testing.assert_allclose(got.detach().numpy(), ref.detach().numpy(), atol=1e-12)
    out = tb.zeros(8, 4, 8, dtype=tb.float64)
    assert varlen_attn_out(out, q.detach(), k.detach(), v.detach(), cu_q, cu_k, 4, 5,
                           window_size=window, enable_gqa=True) is out
    np.testing.assert_allclose(out.numpy(), want[0].detach().numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="enable_gqa"):
        varlen_attn(q, k, v, cu_q, cu_k, 4, 5)


def test_varlen_attn_paged_cache_and_flex_aux_match_torch():
    """block_table + seqused_k read the same keys as the packed layout; flex_attention's
    return_aux=AuxRequest(lse=True) gives torch's (out, AuxOutput)."""
    torch = pytest.importorskip("torch")
    from tensorbrain.nn.attention import flex_attention as tflex
    from tensorbrain.nn.attention.varlen import varlen_attn
    rng = np.random.default_rng(1)
    pages = rng.standard_normal((6, 2, 2, 4))            # 6 pages of 2 tokens
    table = tb.tensor([[4, 1], [0, 5]], dtype=tb.int32)  # sequence 0: pages 4, 1; 1: 0, 5
    used = tb.tensor([3, 4], dtype=tb.int32)
    q = tb.tensor(rng.standard_normal((3, 2, 4)))
    cu_q = tb.tensor([0, 1, 3], dtype=tb.int32)
    got = varlen_attn(q, tb.tensor(pages), tb.tensor(pages), cu_q, None, 2, 4,
                      seqused_k=used, block_table=table)
    packed = np.concatenate([pages[[4, 1]].reshape(4, 2, 4)[:3], pages[[0, 5]].reshape(4, 2, 4)])
    cu_k = tb.tensor([0, 3, 7], dtype=tb.int32)
    want = varlen_attn(q, tb.tensor(packed), tb.tensor(packed), cu_q, cu_k, 2, 4)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)
    x = rng.standard_normal((1, 2, 4, 8))
    out, aux = tflex.flex_attention(tb.tensor(x), tb.tensor(x), tb.tensor(x),
                                    return_aux=tflex.AuxRequest(lse=True))
    from torch.nn.attention import flex_attention as ref
    t_out, t_aux = ref.flex_attention(torch.tensor(x), torch.tensor(x), torch.tensor(x),
                                      return_aux=ref.AuxRequest(lse=True))
    np.testing.assert_allclose(out.numpy(), t_out.numpy(), atol=1e-12)
    np.testing.assert_allclose(aux.lse.numpy(), t_aux.lse.numpy(), atol=1e-12)
    assert aux.max_scores is None and t_aux.max_scores is None
    with pytest.raises(ValueError, match="Cannot specify both"):
        tflex.flex_attention(tb.tensor(x), tb.tensor(x), tb.tensor(x), return_lse=True,
                             return_aux=tflex.AuxRequest(lse=True))


@pytest.mark.parametrize("recipe", ["TensorWise", "RowWise"])
def test_scaled_mm_matches_torch(recipe):
    """F.scaled_mm on float8 operands (torch's CPU kernel: float32 products of the scaled
    operands); scaled_grouped_mm (CUDA-only in torch) against a per-group NumPy reference."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a0, b0 = rng.standard_normal((8, 16)), rng.standard_normal((16, 6))
    sa0 = np.array(0.5) if recipe == "TensorWise" else rng.random((8, 1)) + 0.5
    sb0 = np.array(2.0) if recipe == "TensorWise" else rng.random((1, 6)) + 0.5
    bias0 = rng.standard_normal(6)
    res = []
    for lib in (tb, torch):
        f8 = lib.float8_e4m3fn
        a, b = lib.tensor(a0).to(f8), lib.tensor(b0).to(f8)
        if lib is torch:
            b = b.t().contiguous().t()   # torch's kernel wants mat_b column-major
        kind = getattr(lib.nn.functional.ScalingType, recipe)
        out = lib.nn.functional.scaled_mm(
            a, b, lib.tensor(sa0, dtype=lib.float32), kind, lib.tensor(sb0, dtype=lib.float32),
            kind, bias=lib.tensor(bias0, dtype=lib.float32), output_dtype=lib.float32)
        res.append(out.numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-6, atol=1e-5)
    F = tb.nn.functional
    with pytest.raises(NotImplementedError, match="BlockWise1x32"):
        F.scaled_mm(tb.ones(2, 2), tb.ones(2, 2), tb.ones(1), F.ScalingType.BlockWise1x32,
                    tb.ones(1), F.ScalingType.TensorWise)
    # grouped: rows 0:3 with expert 0, 3:8 with expert 1, row-wise scales
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((2, 16, 6)).astype(np.float32)
    sa, sb = rng.random(8).astype(np.float32) + 0.5, rng.random((2, 6)).astype(np.float32) + 0.5
    got = F.scaled_grouped_mm(tb.tensor(a).to(tb.float8_e4m3fn), tb.tensor(b).to(tb.float8_e4m3fn),
                              tb.tensor(sa), F.ScalingType.RowWise, tb.tensor(sb),
                              F.ScalingType.RowWise, offs=tb.tensor([3, 8], dtype=tb.int32),
                              output_dtype=tb.float32)
    qa = tb.tensor(a).to(tb.float8_e4m3fn).float().numpy() * sa[:, None]
    qb = tb.tensor(b).to(tb.float8_e4m3fn).float().numpy() * sb[:, None, :]
    want = np.concatenate([qa[:3] @ qb[0], qa[3:] @ qb[1]])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
