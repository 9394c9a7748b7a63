"""Recurrent layers and packed sequences: finite differences always, torch op by op where
installed (same weights through a state dict)."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import nn
from tensorbrain.nn.utils import rnn as rnn_utils
from tensorbrain.testing import gradcheck

RNG = np.random.default_rng(0)


def _functional(module, names, fn_out):
    """A function of (x, *params) running ``module`` with those tensors as its parameters."""
    def fn(x, *params):
        for n, p in zip(names, params, strict=True):
            module._parameters[n] = p
        return fn_out(module, x)
    return fn


def _outputs(mode):
    def run(m, x):
        out, h = m(x)
        if mode == "LSTM":
            return out, h[0], h[1]
        return out, h
    return run


CONFIGS = [
    ("LSTM", {}), ("LSTM", {"num_layers": 2, "bidirectional": True}), ("LSTM", {"proj_size": 2}),
    ("LSTM", {"bias": False, "batch_first": True}),
    ("GRU", {}), ("GRU", {"num_layers": 2, "bidirectional": True}), ("GRU", {"bias": False}),
    ("RNN", {}), ("RNN", {"nonlinearity": "relu", "bidirectional": True}),
]


@pytest.mark.parametrize("mode,kw", CONFIGS)
def test_recurrent_layer_finite_differences(mode, kw):
    m = getattr(nn, mode)(3, 3, **kw).double()
    names = [n for n, _ in m.named_parameters()]
    params = [p.detach().numpy().copy() for _, p in m.named_parameters()]
    x = RNG.standard_normal((4, 2, 3))
    gradcheck(_functional(m, names, _outputs(mode)), [x, *params], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("mode,kw", CONFIGS)
def test_recurrent_layer_matches_torch(mode, kw):
    torch = pytest.importorskip("torch")
    tm = getattr(torch.nn, mode)(3, 4, **kw).double()
    m = getattr(nn, mode)(3, 4, **kw).double()
    m.load_state_dict({k: tb.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    names = [n for n, _ in m.named_parameters()]
    assert names == [n for n, _ in tm.named_parameters()]
    x = RNG.standard_normal((2, 5, 3) if kw.get("batch_first") else (5, 2, 3))
    params = [p.detach().numpy().copy() for _, p in m.named_parameters()]

    def torch_fn(x, *ps):
        params = dict(zip(names, ps, strict=True))
        return _flatten(mode, torch.func.functional_call(tm, params, (x,)))

    gradcheck(_functional(m, names, _outputs(mode)), [x, *params], torch_fn=torch_fn,
              check_grad=True, eps=1e-6, atol=1e-6, rtol=1e-5)


def _flatten(mode, out):
    y, h = out
    return (y, h[0], h[1]) if mode == "LSTM" else (y, h)


def test_initial_states_and_unbatched_input():
    torch = pytest.importorskip("torch")
    tm = torch.nn.LSTM(3, 4, num_layers=2)
    m = nn.LSTM(3, 4, num_layers=2)
    m.load_state_dict({k: tb.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    h0 = RNG.standard_normal((2, 4)).astype(np.float32)
    c0 = RNG.standard_normal((2, 4)).astype(np.float32)
    out, (h, c) = m(tb.tensor(x), (tb.tensor(h0), tb.tensor(c0)))
    tout, (th, tc) = tm(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
    assert tuple(out.shape) == (5, 4) and tuple(h.shape) == (2, 4)
    for a, b in ((out, tout), (h, th), (c, tc)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-5)


@pytest.mark.parametrize("given", ["zero", "random"])
def test_lstm_weight_gradients_with_initial_states_match_torch(given):
    """dW_hh takes each step's entering state: h0 for the first (left out when it is zero, as
    when no state is given), forward and reverse."""
    torch = pytest.importorskip("torch")
    tm = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True).double()
    m = nn.LSTM(3, 4, num_layers=2, bidirectional=True).double()
    m.load_state_dict({k: tb.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = RNG.standard_normal((5, 2, 3))
    h0, c0 = (RNG.standard_normal((4, 2, 4)) * (given == "random") for _ in range(2))
    w = RNG.standard_normal((5, 2, 8))
    out, _ = m(tb.tensor(x), (tb.tensor(h0), tb.tensor(c0)))
    (out * tb.tensor(w)).sum().backward()
    tout, _ = tm(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
    (tout * torch.tensor(w)).sum().backward()
    for (name, p), tp in zip(m.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-9, atol=1e-10, err_msg=name)


def test_default_init_range_and_names():
    m = nn.LSTM(5, 10, num_layers=2, bidirectional=True, proj_size=3)
    sd = m.state_dict()
    assert "weight_hr_l1_reverse" in sd and tuple(sd["weight_ih_l1"].shape) == (40, 6)
    assert all(float(v.abs().max()) <= 10 ** -0.5 for v in sd.values())
    assert repr(m) == "LSTM(5, 10, proj_size=3, num_layers=2, bidirectional=True)"


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_packed_sequence_equals_running_each_sequence_alone(mode, bidirectional):
    m = getattr(nn, mode)(3, 4, bidirectional=bidirectional).double()
    lengths = [2, 5, 3]
    seqs = [tb.tensor(RNG.standard_normal((n, 3)), requires_grad=True) for n in lengths]
    packed = rnn_utils.pack_sequence(seqs, enforce_sorted=False)
    out, h = m(packed)
    padded, lens = rnn_utils.pad_packed_sequence(out, batch_first=True)
    assert lens.tolist() == lengths
    h_n = h[0] if mode == "LSTM" else h
    (padded.sum() + h_n.sum()).backward()
    for b, s in enumerate(seqs):
        x = tb.tensor(s.detach().numpy(), requires_grad=True)
        o1, h1 = m(x.unsqueeze(1))
        h1 = h1[0] if mode == "LSTM" else h1
        np.testing.assert_allclose(padded[b, :lengths[b]].detach().numpy(),
                                   o1[:, 0].detach().numpy(), atol=1e-12)
        assert float(padded[b, lengths[b]:].abs().sum()) == 0
        np.testing.assert_allclose(h_n[:, b].detach().numpy(), h1[:, 0].detach().numpy(),
                                   atol=1e-12)
        (o1.sum() + h1.sum()).backward()
        np.testing.assert_allclose(s.grad.numpy(), x.grad.numpy(), atol=1e-12)


def test_packed_matches_torch_with_hx():
    torch = pytest.importorskip("torch")
    tm = torch.nn.GRU(3, 4, num_layers=2, bidirectional=True).double()
    m = nn.GRU(3, 4, num_layers=2, bidirectional=True).double()
    m.load_state_dict({k: tb.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = RNG.standard_normal((5, 3, 3))
    h0 = RNG.standard_normal((4, 3, 4))
    lengths = [3, 5, 1]
    tp = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), lengths, enforce_sorted=False)
    p = rnn_utils.pack_padded_sequence(tb.tensor(x), lengths, enforce_sorted=False)
    np.testing.assert_array_equal(p.batch_sizes.numpy(), tp.batch_sizes.numpy())
    np.testing.assert_allclose(p.data.numpy(), tp.data.numpy())
    tout, th = tm(tp, torch.tensor(h0))
    out, h = m(p, tb.tensor(h0))
    np.testing.assert_allclose(out.data.detach().numpy(), tout.data.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(h.detach().numpy(), th.detach().numpy(), atol=1e-12)
    pad, lens = rnn_utils.pad_packed_sequence(out, total_length=6)
    tpad, tlens = torch.nn.utils.rnn.pad_packed_sequence(tout, total_length=6)
    np.testing.assert_allclose(pad.detach().numpy(), tpad.detach().numpy(), atol=1e-12)
    assert lens.tolist() == tlens.tolist()


@pytest.mark.parametrize("cell", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_finite_differences_and_torch(cell):
    m = getattr(nn, cell)(3, 2).double()
    names = [n for n, _ in m.named_parameters()]
    params = [p.detach().numpy().copy() for _, p in m.named_parameters()]
    x, h = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 2))
    c = RNG.standard_normal((4, 2))

    def fn(x, h, c, *ps):
        for n, p in zip(names, ps, strict=True):
            m._parameters[n] = p
        return m(x, (h, c)) if cell == "LSTMCell" else m(x, h)

    torch_fn = None
    try:
        import torch
        tm = getattr(torch.nn, cell)(3, 2).double()

        def torch_fn(x, h, c, *ps):
            args = (x, (h, c)) if cell == "LSTMCell" else (x, h)
            return torch.func.functional_call(tm, dict(zip(names, ps, strict=True)), args)
    except ImportError:
        pass
    gradcheck(fn, [x, h, c, *params], torch_fn=torch_fn, atol=1e-6, rtol=1e-5)


def test_cell_unbatched_and_defaults():
    cell = nn.LSTMCell(3, 2)
    h, c = cell(tb.randn(3))
    assert tuple(h.shape) == (2,) and tuple(c.shape) == (2,)
    assert tuple(nn.GRUCell(3, 2, bias=False)(tb.randn(5, 3)).shape) == (5, 2)


def test_pad_sequence_and_torch():
    torch = pytest.importorskip("torch")
    seqs = [RNG.standard_normal((n, 2)) for n in (3, 1, 4)]
    for kw in ({}, {"batch_first": True, "padding_value": -1.0}, {"padding_side": "left"}):
        got = rnn_utils.pad_sequence([tb.tensor(s) for s in seqs], **kw)
        want = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], **kw)
        np.testing.assert_allclose(got.numpy(), want.numpy())


def test_pad_sequence_batch_first_is_contiguous_and_views():
    # a tagger's ``tags.view(-1)`` after pad_sequence(batch_first=True) failed: the result was
    # a transposed time-major array
    seqs = [RNG.standard_normal((n, 2)) for n in (3, 1, 4)]
    for side in ("right", "left"):
        out = rnn_utils.pad_sequence([tb.tensor(s) for s in seqs], batch_first=True,
                                     padding_value=-1.0, padding_side=side)
        assert out.is_contiguous()
        want = np.full((3, 4, 2), -1.0)
        for b, s in enumerate(seqs):
            if side == "right":
                want[b, :len(s)] = s
            else:
                want[b, 4 - len(s):] = s
        np.testing.assert_allclose(out.view(-1).numpy(), want.reshape(-1))
    ints = rnn_utils.pad_sequence([tb.tensor([1, 2]), tb.tensor([3])], batch_first=True)
    assert ints.view(-1).tolist() == [1, 2, 3, 0]


def test_pad_sequence_batch_first_gradients():
    def fn(a, b):
        return rnn_utils.pad_sequence([a, b], batch_first=True, padding_value=0.5)
    gradcheck(fn, [RNG.standard_normal((3, 2)), RNG.standard_normal((1, 2))])


def test_pack_pad_gradients_finite_differences():
    def fn(x):
        p = rnn_utils.pack_padded_sequence(x, [3, 1, 2], batch_first=True, enforce_sorted=False)
        return rnn_utils.pad_packed_sequence(p, batch_first=True, padding_value=1.0)[0]
    gradcheck(fn, [RNG.standard_normal((3, 4, 2))])


def test_errors_name_the_problem():
    m = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(RuntimeError, match="input_size. Expected 3, got 5"):
        m(tb.randn(2, 1, 5))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(2, 1, 4\)"):
        m(tb.randn(2, 1, 3), (tb.zeros(1, 1, 4), tb.zeros(2, 1, 4)))
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        rnn_utils.pack_padded_sequence(tb.randn(4, 2, 3), [2, 4])
    with pytest.raises(ValueError, match="proj_size"):
        nn.RNNBase("GRU", 3, 4, proj_size=2)
    with pytest.raises(ValueError, match="dropout should be"):
        nn.LSTM(3, 4, dropout=1.5)


def test_dropout_between_layers_only_in_training():
    m = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = tb.randn(5, 2, 3)
    m.eval()
    a, _ = m(x)
    b, _ = m(x)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    m.train()
    c, _ = m(x)
    assert not np.allclose(a.detach().numpy(), c.detach().numpy())


def test_in_place_change_of_the_output_is_refused_in_backward():
    out = nn.RNNCell(3, 4)(tb.randn(2, 3))     # the layer's own output, not a view of it
    out.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
