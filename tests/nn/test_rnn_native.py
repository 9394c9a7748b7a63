"""The fused LSTM cell's C++ kernels (csrc/kernels/lstm.cpp, act_avx2.cpp, fused_avx512.cpp)
against their NumPy twins (tensorbrain/_ops/rnn.py): each kernel alone, and whole LSTM layers
forward and backward through either. (Both are checked against torch and finite differences in
test_rnn.py.)"""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import _native
from tensorbrain._ops import rnn

pytestmark = pytest.mark.skipif(not _native.is_available(), reason="tensorbrain._C not built")
rng = np.random.default_rng(0)
EPS = float(np.finfo(np.float32).eps)


@pytest.mark.parametrize("path", ["baseline", "avx2+f16c", "avx512"])
def test_tanh_within_two_ulp_of_numpy_and_keeps_nan(path):
    C = _native.module()
    try:
        C._force_cpu_path(path)
    except ValueError:
        pytest.skip(f"this CPU cannot run the {path} loops")
    try:
        x = np.concatenate([np.linspace(-30, 30, 200_001), [0.0, 0.624, 0.626, 1e-20, -1e-20, 88.0, -100.0]])
        x = x.astype(np.float32)
        y = x.copy()
        C._tanh_f32(y[3:])                    # an odd length and offset: the vector tail too
        ref = np.tanh(x.astype(np.float64))
        assert np.all(np.abs(y[3:] - ref[3:]) <= 2 * np.spacing(np.abs(ref[3:]).astype(np.float32)) + 1e-45)
        z = np.array([np.nan, np.inf, -np.inf, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0], np.float32)
        C._tanh_f32(z)
        assert np.isnan(z[0]) and z[1] == 1.0 and z[2] == -1.0
    finally:
        C._force_cpu_path("auto")


def test_cell_kernels_match_twins():
    C = _native.module()
    B, H = 5, 11
    g = rng.standard_normal((4, B, H)).astype(np.float32)
    r = rng.standard_normal((4, B, H)).astype(np.float32)
    cp = rng.standard_normal((B, H)).astype(np.float32)
    outs = []
    for fn in (C.lstm_cell_forward, rnn.lstm_cell_forward):
        gg, c, tc, h = g.copy(), np.empty_like(cp), np.empty_like(cp), np.empty_like(cp)
        fn(gg, r, cp, c, tc, h)
        outs.append((gg, c, tc, h))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=4 * EPS, atol=4 * EPS)
    dh, dc, gy, tc, cp = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(5))
    gates = np.tanh(rng.standard_normal((4, B, H))).astype(np.float32)
    outs = []
    for fn in (C.lstm_cell_backward, rnn.lstm_cell_backward):
        dh2, dc2, dg = dh.copy(), dc.copy(), np.empty((B, 4 * H), np.float32)
        fn(dh2, dc2, gy, gates, tc, cp, dg)
        outs.append((dh2, dc2, dg))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=8 * EPS, atol=8 * EPS)
    with pytest.raises(ValueError, match="C-contiguous float32 array of 220 values"):
        C.lstm_cell_forward(g[:, :, :5], r, cp, c, tc, h)


def test_cell_backward_same_bits_on_every_path():
    """The cell's backward (csrc/kernels/lstm_cell.h) is one loop compiled for the baseline ISA
    and for AVX-512 without contraction: the same bits on both, a row length with a vector tail."""
    C = _native.module()
    B, H = 3, 37
    dh, dc, gy, tc, cp = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(5))
    gates = np.tanh(rng.standard_normal((4, B, H))).astype(np.float32)
    outs = []
    for path in ("baseline", "avx512"):
        try:
            C._force_cpu_path(path)
        except ValueError:
            pytest.skip(f"this CPU cannot run the {path} loops")
        try:
            dh2, dc2, dg = dh.copy(), dc.copy(), np.empty((B, 4 * H), np.float32)
            C.lstm_cell_backward(dh2, dc2, gy, gates, tc, cp, dg)
            outs.append((dh2, dc2, dg))
        finally:
            C._force_cpu_path("auto")
    for a, b in zip(*outs):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("proj", [0, 3])
@pytest.mark.parametrize("packed", [False, True])
def test_lstm_layer_native_matches_twin(proj, packed, monkeypatch):
    lstm = tb.nn.LSTM(6, 7, 2, proj_size=proj, bidirectional=True)
    x = rng.standard_normal((5, 3, 6)).astype(np.float32)

    def run(native):
        monkeypatch.setattr(rnn, "_NATIVE_CELL", native)
        lstm.zero_grad()
        xt = tb.tensor(x, requires_grad=True)
        inp = tb.nn.utils.rnn.pack_padded_sequence(xt, [5, 4, 2]) if packed else xt
        out, (h, c) = lstm(inp)
        y = out.data if packed else out
        (y * tb.tensor(np.linspace(-1, 1, y.numel()).reshape(y.shape).astype(np.float32))).sum().backward(retain_graph=True)
        (h.sum() + 2 * c.sum()).backward()
        return [y.detach().numpy(), h.detach().numpy(), c.detach().numpy(), xt.grad.numpy()] + \
            [p.grad.numpy() for p in lstm.parameters()]
    for a, b in zip(run(True), run(False)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_step_kernels_with_packed_weights_match_twins(cpu_path):
    """lstm_step_forward/backward: the recurrent GEMM on a packed W_hh plus the cell, in one
    call, against the twins (batched matmul, then the twin cell)."""
    C = cpu_path
    B, H, K = 7, 21, 13                               # 21 = a 16-column panel and a partial one
    Ws = rng.standard_normal((4 * H, K)).astype(np.float32) * 0.3
    hp = rng.standard_normal((B, K)).astype(np.float32)
    g = rng.standard_normal((4, B, H)).astype(np.float32)
    cp = rng.standard_normal((B, H)).astype(np.float32)
    outs = []
    for mod in (C, rnn._Twins):
        gg, c, tc, h = g.copy(), np.empty_like(cp), np.empty_like(cp), np.empty_like(cp)
        mod.lstm_step_forward(mod.PackedMatrix(Ws.T, 4), hp, gg, cp, c, tc, h)
        outs.append((gg, c, tc, h))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    dh, dc, gy, tc = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(4))
    gates = np.tanh(rng.standard_normal((4, B, H))).astype(np.float32)
    outs = []
    for mod in (C, rnn._Twins):
        dh2, dc2, dg = dh.copy(), dc.copy(), np.empty((B, 4 * H), np.float32)
        out = np.empty((B, K), np.float32)
        mod.lstm_step_backward(mod.PackedMatrix(Ws, 1), dh2, dc2, gy, gates, tc, cp, dg, out)
        outs.append((dh2, dc2, dg, out))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="4 groups"):
        C.lstm_step_forward(C.PackedMatrix(Ws.T, 2), hp, g.copy(), cp, c, tc, h)


@pytest.mark.parametrize("reverse", [False, True])
def test_sequence_kernels_equal_their_steps(cpu_path, reverse):
    """lstm_seq_forward/backward (a whole layer in one call) against lstm_step_forward/backward
    called step by step in processing order, bit for bit, and the NumPy twins of the sequence
    kernels within rounding."""
    C = cpu_path
    T, B, H = 6, 5, 21
    Ws = rng.standard_normal((4 * H, H)).astype(np.float32) * 0.3
    h0, c0 = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(2))
    g0 = rng.standard_normal(T * 4 * B * H).astype(np.float32)
    order = list(range(T - 1, -1, -1) if reverse else range(T))
    rows = [slice(t * B, (t + 1) * B) for t in range(T)]
    blk = [slice(4 * H * t * B, 4 * H * (t + 1) * B) for t in range(T)]

    def seq(mod):
        g, y, c, tc = g0.copy(), *(np.empty((T * B, H), np.float32) for _ in range(3))
        mod.lstm_seq_forward(mod.PackedMatrix(Ws.T, 4), h0, c0, g, y, c, tc, reverse)
        return g, y, c, tc
    g, y, c, tc = (np.array(a) for a in seq(C))
    g2, y2, c2, tc2 = g0.copy(), *(np.empty((T * B, H), np.float32) for _ in range(3))
    for k, t in enumerate(order):
        p = order[k - 1] if k else None
        C.lstm_step_forward(C.PackedMatrix(Ws.T, 4), h0 if p is None else y2[rows[p]],
                            g2[blk[t]].reshape(4, B, H), c0 if p is None else c2[rows[p]],
                            c2[rows[t]], tc2[rows[t]], y2[rows[t]])
    for a, b in zip((g, y, c, tc), (g2, y2, c2, tc2)):
        assert np.array_equal(a, b)
    for a, b in zip((g, y, c, tc), seq(rnn._Twins)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)

    gy = rng.standard_normal((T * B, H)).astype(np.float32)
    dh0, dc0 = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(2))

    def seq_back(mod):
        dh, dc, dg = dh0.copy(), dc0.copy(), np.empty((T * B, 4 * H), np.float32)
        mod.lstm_seq_backward(mod.PackedMatrix(Ws, 1), dh, dc, gy, g, tc, c0, c, dg, reverse)
        return dh, dc, dg
    got = seq_back(C)
    dh, dc, dg = dh0.copy(), dc0.copy(), np.empty((T * B, 4 * H), np.float32)
    for k in range(T - 1, -1, -1):
        t = order[k]
        C.lstm_step_backward(C.PackedMatrix(Ws, 1), dh, dc, gy[rows[t]], g[blk[t]].reshape(4, B, H),
                             tc[rows[t]], c0 if k == 0 else c[rows[order[k - 1]]], dg[rows[t]], dh)
    for a, b in zip(got, (dh, dc, dg)):
        assert np.array_equal(a, b)
    for a, b in zip(got, seq_back(rnn._Twins)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="not packed for hidden = 21"):
        C.lstm_seq_forward(C.PackedMatrix(Ws, 1), h0, c0, g0.copy(), y, c, tc, reverse)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("with_proj,with_bias", [(True, False), (True, True), (False, True)])
def test_sequence_forward_writes_gates_from_the_projection(cpu_path, reverse, with_proj, with_bias):
    """lstm_seq_forward given proj (x @ W_ih^T over all steps) and/or bias, both in torch's gate
    order (i, f, g, o) and unscaled, writes each step's gates from them in the cell's order and
    scale itself: the same as the call without them on gates reordered and scaled in float64
    beforehand (within rounding), and as its NumPy twin; a proj of the wrong size is refused."""
    C = cpu_path
    T, B, H, K = 5, 3, 21, 10
    Ws = rng.standard_normal((4 * H, H)).astype(np.float32) * 0.3
    Wx = rng.standard_normal((4 * H, K)).astype(np.float32) * 0.3
    x = rng.standard_normal((T * B, K)).astype(np.float32)
    proj = (x @ Wx.T).astype(np.float32) if with_proj else None
    bias = rng.standard_normal(4 * H).astype(np.float32) if with_bias else None
    h0, c0 = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(2))
    full = (0 if proj is None else proj.astype(np.float64)) + (0 if bias is None else bias.astype(np.float64))
    full = np.broadcast_to(full, (T * B, 4 * H)).reshape(T, B, 4, H)
    gates = np.stack([full[:, :, src] * s for src, s in zip(rnn._GATE_ORDER, rnn._GATE_SCALE)], axis=1)
    gates = gates.astype(np.float32).reshape(-1)          # (T, 4, B, H): the cell's blocks

    def run(mod, given):
        g = gates.copy() if not given else np.full_like(gates, np.nan)   # given: nothing read
        y, c, tc = (np.empty((T * B, H), np.float32) for _ in range(3))
        extra = (proj, bias) if given else ()
        mod.lstm_seq_forward(mod.PackedMatrix(Ws.T, 4), h0, c0, g, y, c, tc, reverse, *extra)
        return g, y, c, tc
    want = run(C, False)
    for got in (run(C, True), run(rnn._Twins, True)):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    g, y, c, tc = run(C, False)
    with pytest.raises(ValueError, match="proj must be a C-contiguous float32 array of 1260 values, got shape \\(15, 10\\)"):
        C.lstm_seq_forward(C.PackedMatrix(Ws.T, 4), h0, c0, g, y, c, tc, reverse, x)


@pytest.mark.parametrize("reverse", [False, True])
def test_sequence_kernels_split_by_rows_match_one_thread(cpu_path, reverse):
    """With tb.set_num_threads(2 or 3) the sequence kernels split the batch rows across threads
    for the whole sequence (csrc/kernels/lstm.cpp): the same bits as on one thread, forward with
    the input projection and backward, on every CPU path."""
    C = cpu_path
    T, B, H, K = 4, 27, 21, 10                            # 27 rows: 3 parts of 9 at most
    Ws = rng.standard_normal((4 * H, H)).astype(np.float32) * 0.3
    Wx = rng.standard_normal((4 * H, K)).astype(np.float32) * 0.3
    x = rng.standard_normal((T * B, K)).astype(np.float32)
    bias = rng.standard_normal(4 * H).astype(np.float32)
    h0, c0, dh0, dc0 = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(4))
    gy = rng.standard_normal((T * B, H)).astype(np.float32)

    def run():
        g = np.full(T * 4 * B * H, np.nan, np.float32)
        y, c, tc = (np.empty((T * B, H), np.float32) for _ in range(3))
        C.lstm_seq_forward(C.PackedMatrix(Ws.T, 4), h0, c0, g, y, c, tc, reverse, x @ Wx.T, bias)
        dh, dc, dg = dh0.copy(), dc0.copy(), np.empty((T * B, 4 * H), np.float32)
        C.lstm_seq_backward(C.PackedMatrix(Ws, 1), dh, dc, gy, g, tc, c0, c, dg, reverse)
        return g, y, c, tc, dh, dc, dg
    before = tb.get_num_threads()
    try:
        tb.set_num_threads(1)
        one = run()
        for n in (2, 3):
            tb.set_num_threads(n)
            for a, b in zip(run(), one):
                assert np.array_equal(a, b)
    finally:
        tb.set_num_threads(before)
    assert not np.isnan(one[0]).any()                     # every gate block was written
