"""tb.bfloat16: storage, rounding, promotion, reductions, printing, files; against written-out
values always and against torch where it is installed."""
import os

import ml_dtypes
import numpy as np
import pytest

import tensorbrain as tb


def test_dtype_identity_and_finfo():
    assert tb.bfloat16 == np.dtype(ml_dtypes.bfloat16)
    assert tb.bfloat16.itemsize == 2
    fi = tb.finfo(tb.bfloat16)
    assert float(fi.eps) == 2.0 ** -7 and fi.bits == 16
    assert float(fi.tiny) == 2.0 ** -126
    assert float(fi.max) == pytest.approx(3.3895313892515355e38)
    assert float(tb.finfo(tb.float16).max) == 65504.0
    assert tb.finfo().bits == 32                      # the default dtype
    assert tb.iinfo(tb.int8).min == -128
    with pytest.raises(TypeError, match="not a floating point dtype"):
        tb.finfo(tb.int64)


def test_rounding_is_round_to_nearest_even():
    # the bfloat16 step at 1.0 is 2**-7: 1 + 2**-8 is a tie (to even: 1.0), 1 + 3*2**-8 a tie
    # (to even: 1 + 2**-6), pi -> 3.140625
    x = tb.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 3.14159265, -2.0 ** -130])
    b = x.bfloat16()
    assert b.dtype == tb.bfloat16 and b.is_floating_point()
    assert b.float().tolist() == [1.0, 1.0 + 2 ** -6, 3.140625, -2.0 ** -130]
    assert x.to(tb.bfloat16).dtype == tb.bfloat16 and x.to("bfloat16").dtype == tb.bfloat16


def test_rounding_matches_torch():
    torch = pytest.importorskip("torch")
    v = np.random.default_rng(0).standard_normal(1000).astype(np.float32) * 1e3
    ours = tb.tensor(v).bfloat16().float().numpy()
    theirs = torch.from_numpy(v).bfloat16().float().numpy()
    np.testing.assert_array_equal(ours, theirs)


def test_promotion_follows_torch_table():
    b = tb.tensor([1.5, 2.25]).bfloat16()
    assert (b + tb.tensor([1.0, 1.0], dtype=tb.float16)).dtype == tb.float32   # NumPy: error
    assert (b + tb.tensor([1, 2])).dtype == tb.bfloat16                          # NumPy: float64
    assert (tb.tensor([1, 2]) * b).dtype == tb.bfloat16
    assert (b + tb.tensor([1.0, 1.0])).dtype == tb.float32
    assert (b * 2.5).dtype == tb.bfloat16 and (b * 2.5).float().tolist() == [3.75, 5.625]
    assert (1.0 - b).dtype == tb.bfloat16 and (b * 3).dtype == tb.bfloat16
    assert tb.promote_types(tb.bfloat16, tb.float64) == tb.float64
    assert tb.promote_types(tb.bool, tb.bfloat16) == tb.bfloat16


def test_promotion_against_torch():
    torch = pytest.importorskip("torch")
    pairs = [(tb.bfloat16, tb.float16), (tb.bfloat16, tb.int64), (tb.bfloat16, tb.uint8),
             (tb.bfloat16, tb.float32), (tb.int32, tb.bfloat16), (tb.bfloat16, tb.float64)]
    for a, b in pairs:
        ta, tb_ = (getattr(torch, str(d)) for d in (a, b))
        assert str(tb.promote_types(a, b)) == str(torch.promote_types(ta, tb_)).split(".")[1]


def test_sum_accumulates_in_float32():
    # 70,000 ones: bfloat16 accumulation would stop at 256; float32 accumulation gives 70000,
    # rounded to bfloat16 (step 512 there) 70144 -- what torch returns
    ones = tb.ones(70000, dtype=tb.bfloat16)
    assert ones.sum().dtype == tb.bfloat16 and ones.sum().item() == 70144.0
    assert ones.reshape(700, 100).sum(0).float().tolist() == [700.0] * 100
    assert ones.mean().item() == 1.0
    # a broadcast add's gradient is summed the same way
    bias = tb.zeros(1, dtype=tb.bfloat16, requires_grad=True)
    (tb.ones(70000, dtype=tb.bfloat16) + bias).sum().backward()
    assert bias.grad.dtype == tb.bfloat16 and bias.grad.item() == 70144.0


def test_printing_shows_values_and_dtype():
    r = repr(tb.tensor([1.5, -2.25, 3.0]).bfloat16())
    assert "1.5" in r and "-2.25" in r and "dtype=bfloat16" in r
    assert tb.tensor([0.1]).bfloat16().tolist() == [0.10009765625]


def test_gradients_in_bfloat16_and_back_to_float32():
    x = tb.tensor([1.0, -2.0, 3.0], dtype=tb.bfloat16, requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.dtype == tb.bfloat16 and x.grad.float().tolist() == [2.0, -4.0, 6.0]
    w = tb.tensor([0.5, 0.25], requires_grad=True)
    (w.bfloat16() * 3.0).sum().backward()
    assert w.grad.dtype == tb.float32 and w.grad.tolist() == [3.0, 3.0]


def test_module_to_bfloat16_and_random():
    m = tb.nn.Linear(3, 2).to(tb.bfloat16)
    assert m.weight.dtype == tb.bfloat16 and m.weight.requires_grad
    y = m(tb.randn(4, 3, dtype=tb.bfloat16))
    assert y.dtype == tb.bfloat16 and tuple(y.shape) == (4, 2)
    y.float().sum().backward()
    assert m.weight.grad.dtype == tb.bfloat16
    assert tb.randn(5, dtype=tb.bfloat16).dtype == tb.bfloat16


def test_save_load_bfloat16(tmp_path):
    path = os.path.join(tmp_path, "bf16.safetensors")
    t = tb.tensor([1.5, -2.25, 3.140625]).bfloat16()
    tb.save({"w": t}, path)
    back = tb.load(path)["w"]
    assert back.dtype == tb.bfloat16 and back.float().tolist() == [1.5, -2.25, 3.140625]


def test_bfloat16_file_read_by_torch(tmp_path):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    path = os.path.join(tmp_path, "sd.safetensors")
    tb.save(tb.nn.Linear(3, 2).to(tb.bfloat16).state_dict(), path)
    sd = st.load_file(path)
    assert sd["weight"].dtype == torch.bfloat16
    st.save_file({"x": torch.tensor([0.5, 7.0]).bfloat16()}, path)
    x = tb.load(path)["x"]
    assert x.dtype == tb.bfloat16 and x.float().tolist() == [0.5, 7.0]


@pytest.mark.gpu
def test_bfloat16_on_cuda_or_a_clear_refusal():
    from tensorbrain import _xp
    why = _xp.cupy_bfloat16_unsupported()
    x = tb.tensor([0.5, 7.0, -3.25]).bfloat16()
    if why is not None:   # CuPy < 14: the move and autocast say why, naming CuPy's version
        with pytest.raises(TypeError, match="cannot move to CUDA: CuPy .* has no bfloat16"):
            x.cuda()
        with pytest.raises(RuntimeError, match="bfloat16 on cuda needs CuPy"):
            tb.autocast("cuda", dtype=tb.bfloat16)
        return
    g = x.cuda()
    assert g.is_cuda and g.dtype == tb.bfloat16 and g.cpu().float().tolist() == [0.5, 7.0, -3.25]


_OPS = {
    "add": lambda x, y: x + y, "mul": lambda x, y: x * y, "div": lambda x, y: x / (y.abs() + 1),
    "pow": lambda x, y: x ** 2, "exp": lambda x, y: x.exp(), "tanh": lambda x, y: x.tanh(),
    "sigmoid": lambda x, y: x.sigmoid(), "relu": lambda x, y: x.relu(),
    "gelu": lambda x, y: tb.nn.functional.gelu(x),
    "gelu_tanh": lambda x, y: tb.nn.functional.gelu(x, approximate="tanh"),
    "softmax": lambda x, y: tb.nn.functional.softmax(x, 1),
    "log_softmax": lambda x, y: tb.nn.functional.log_softmax(x, 1),
    "layer_norm": lambda x, y: tb.nn.functional.layer_norm(x, (6,)),
    "sum": lambda x, y: x.sum(1), "mean": lambda x, y: x.mean(0), "var": lambda x, y: x.var(1),
    "matmul": lambda x, y: x @ y.t(), "linear": lambda x, y: tb.nn.functional.linear(x, y),
    "max_pool2d": lambda x, y: tb.nn.functional.max_pool2d(x.reshape(1, 1, 4, 6), 2),
    "conv2d": lambda x, y: tb.nn.functional.conv2d(x.reshape(1, 1, 4, 6), y[:1, :4].reshape(1, 1, 2, 2)),
    "sdpa": lambda x, y: tb.nn.functional.scaled_dot_product_attention(x[None], y[None], y[None]),
}


@pytest.mark.parametrize("name", sorted(_OPS))
def test_ops_keep_bfloat16_and_match_float32_math(name):
    # the same op on the (exact) float32 values of the bfloat16 inputs, rounded to bfloat16:
    # torch's CPU kernels compute bfloat16 ops in float32 and round the result
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((4, 6)).astype(np.float32)
    yv = rng.standard_normal((4, 6)).astype(np.float32)
    x = tb.tensor(xv).bfloat16().requires_grad_()
    y = tb.tensor(yv).bfloat16()
    out = _OPS[name](x, y)
    assert out.dtype == tb.bfloat16, name
    ref = _OPS[name](x.detach().float(), y.float())
    np.testing.assert_allclose(out.float().detach().numpy(), ref.detach().numpy(),
                               rtol=2 ** -7, atol=2 ** -7)
    out.float().sum().backward()
    assert x.grad.dtype == tb.bfloat16 and bool(tb.isfinite(x.grad.float()).all())


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(_OPS))
def test_ops_on_cuda_bfloat16_match_the_cpu(name):
    from tensorbrain import _xp
    if _xp.cupy_bfloat16_unsupported():
        pytest.skip(_xp.cupy_bfloat16_unsupported())
    rng = np.random.default_rng(7)
    xv, yv = (rng.standard_normal((4, 6)).astype(np.float32) for _ in range(2))
    outs, grads = [], []
    for dev in ("cpu", "cuda"):
        x = tb.tensor(xv).bfloat16().to(dev).requires_grad_()
        y = tb.tensor(yv).bfloat16().to(dev)
        out = _OPS[name](x, y)
        assert out.dtype == tb.bfloat16 and out.device.type == dev, name
        out.float().sum().backward()
        outs.append(out.float().detach().cpu().numpy())
        grads.append(x.grad.float().cpu().numpy())
    # both round float32 math to bfloat16; cuBLAS/CuPy may order sums differently: 2 ulps
    np.testing.assert_allclose(outs[1], outs[0], rtol=2 ** -6, atol=2 ** -6)
    np.testing.assert_allclose(grads[1], grads[0], rtol=2 ** -5, atol=2 ** -5)


@pytest.mark.gpu
def test_autocast_cuda_bfloat16_trains_like_float32():
    from tensorbrain import _xp
    if _xp.cupy_bfloat16_unsupported():
        pytest.skip(_xp.cupy_bfloat16_unsupported())
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((64, 20)).astype(np.float32)
    yv = rng.integers(0, 5, 64)
    losses = {}
    for amp in (False, True):
        tb.manual_seed(0)
        model = tb.nn.Sequential(tb.nn.Linear(20, 32), tb.nn.ReLU(), tb.nn.Linear(32, 5)).cuda()
        opt = tb.optim.SGD(model.parameters(), lr=0.1)
        x, y = tb.tensor(xv).cuda(), tb.tensor(yv).cuda()
        trace = []
        for _ in range(20):
            opt.zero_grad()
            with tb.autocast("cuda", dtype=tb.bfloat16, enabled=amp):
                out = model(x)
                assert out.dtype == (tb.bfloat16 if amp else tb.float32)
                loss = tb.nn.functional.cross_entropy(out, y)
            loss.backward()
            assert model[0].weight.grad.dtype == tb.float32
            opt.step()
            trace.append(loss.item())
        losses[amp] = trace
    # the float32 run is the reference: bfloat16 autocast learns as it does, within bf16 rounding
    assert losses[False][-1] < losses[False][0] and losses[True][-1] < losses[True][0], losses
    assert abs(losses[True][-1] - losses[False][-1]) < 0.03 * losses[False][0], losses
