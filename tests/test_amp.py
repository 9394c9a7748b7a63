"""tb.autocast and tb.amp.GradScaler: against written-out expectations (float32 math rounded to
the low dtype, the scaler's documented scale sequence) always, and against torch where it is
installed."""
import threading
import warnings

import ml_dtypes
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.nn.functional as F
from tensorbrain.amp import autocast_mode

rng = np.random.default_rng(0)


def rounded(a, dtype):
    """``a`` rounded to ``dtype`` and back to float32: the exact low-precision values."""
    return np.asarray(a, np.float32).astype(dtype).astype(np.float32)


# ***** autocast: what runs in which dtype *****
@pytest.mark.parametrize("low", [tb.bfloat16, tb.float16])
def test_matmul_is_float32_math_on_rounded_inputs_rounded_once(low):
    a = rng.standard_normal((16, 32)).astype(np.float32)
    b = rng.standard_normal((32, 8)).astype(np.float32)
    with tb.autocast("cpu", dtype=low):
        out = tb.from_numpy(a) @ tb.from_numpy(b)
    assert out.dtype == low
    expected = (rounded(a, low).astype(np.float64) @ rounded(b, low)).astype(np.float32).astype(low)
    np.testing.assert_array_equal(out.numpy().astype(np.float32), expected.astype(np.float32))


def test_linear_and_conv_lower_softmax_and_losses_as_torch_cpu():
    x, w, b = tb.randn(4, 8), tb.randn(6, 8, requires_grad=True), tb.randn(6, requires_grad=True)
    img, k = tb.randn(2, 3, 6, 6), tb.randn(4, 3, 3, 3, requires_grad=True)
    target = tb.tensor([0, 1, 2, 3])
    with tb.autocast("cpu"):
        y = F.linear(x, w, b)
        c = F.conv2d(img, k, padding=1)
        assert y.dtype == tb.bfloat16 and c.dtype == tb.bfloat16
        assert tb.matmul(x, w.t()).dtype == tb.bfloat16 and x.mm(w.t()).dtype == tb.bfloat16
        # not on the CPU lists: they run in the dtype they are given
        assert F.softmax(y, 1).dtype == tb.bfloat16 and F.relu(y).dtype == tb.bfloat16
        assert y.sum().dtype == tb.bfloat16 and F.max_pool2d(c, 2).dtype == tb.bfloat16
        assert (y + x[:, :6]).dtype == tb.float32                     # promotion, as torch
        # the float32 list: losses
        loss = F.cross_entropy(y, target)
        assert loss.dtype == tb.float32
        assert F.mse_loss(y, tb.zeros(4, 6)).dtype == tb.float32
        # TensorBrain's "input" policy: batch/layer norm keep the input's dtype (as torch)
        assert tb.nn.BatchNorm2d(4)(c).dtype == tb.bfloat16
        assert F.layer_norm(y, (6,), tb.ones(6), tb.zeros(6)).dtype == tb.bfloat16
    # the float32 loss equals cross_entropy of the (exact) bfloat16 logits in float32
    ref = F.cross_entropy(tb.from_numpy(y._data.astype(np.float32)), target)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-6)
    loss.backward()
    assert w.grad.dtype == tb.float32 and b.grad.dtype == tb.float32   # the parameter's dtype
    assert x.dtype == tb.float32 and y.dtype == tb.bfloat16


def test_output_dtypes_match_torch_cpu_autocast():
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    a = rng.standard_normal((4, 8)).astype(np.float32)
    t = np.array([0, 1, 2, 3])
    cases = {
        "matmul": (lambda m, f, x: x @ x.t(), None),
        "linear": (lambda m, f, x: f.linear(x, x), None),
        "softmax": (lambda m, f, x: f.softmax(x @ x.t(), dim=1), None),
        "log_softmax": (lambda m, f, x: f.log_softmax(x @ x.t(), dim=1), None),
        "cross_entropy": (lambda m, f, x: f.cross_entropy(x @ x.t(), m.tensor(t)), None),
        "mse": (lambda m, f, x: f.mse_loss(x @ x.t(), x @ x.t()), None),
        "sum": (lambda m, f, x: (x @ x.t()).sum(), None),
        "exp": (lambda m, f, x: (x @ x.t()).exp(), None),
        "add_f32": (lambda m, f, x: (x @ x.t()) + x[:, :4], None),
        "layer_norm": (lambda m, f, x: f.layer_norm(x @ x.t(), (4,)), None),
        "bce_logits": (lambda m, f, x: f.binary_cross_entropy_with_logits(x @ x.t(), x[:, :4].sigmoid()), None),
    }
    for name, (fn, _) in cases.items():
        with torch.autocast("cpu"):
            theirs = fn(torch, tF, torch.from_numpy(a)).dtype
        with tb.autocast("cpu"):
            ours = fn(tb, F, tb.from_numpy(a)).dtype
        assert str(ours) == str(theirs).split(".")[1], name


def test_values_and_gradients_close_to_torch():
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w1 = rng.standard_normal((32, 16)).astype(np.float32) * 0.25
    w2 = rng.standard_normal((5, 32)).astype(np.float32) * 0.25
    y = np.array([0, 1, 2, 3, 4, 0, 1, 2])
    res = {}
    for lib, f in ((tb, F), (torch, torch.nn.functional)):
        p1 = lib.tensor(w1, requires_grad=True)
        p2 = lib.tensor(w2, requires_grad=True)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            h = f.relu(f.linear(lib.tensor(x), p1))
            loss = f.cross_entropy(f.linear(h, p2), lib.tensor(y))
        loss.backward()
        res[lib.__name__] = (loss.item(), p1.grad.float().numpy(), p2.grad.float().numpy(),
                             str(p1.grad.dtype))
    (l_tb, g1_tb, g2_tb, d_tb), (l_t, g1_t, g2_t, d_t) = res["tensorbrain"], res["torch"]
    assert l_tb == pytest.approx(l_t, rel=1e-2)
    np.testing.assert_allclose(g1_tb, g1_t, rtol=5e-2, atol=2e-3)
    np.testing.assert_allclose(g2_tb, g2_t, rtol=5e-2, atol=2e-3)
    assert d_tb == "float32" and d_t == "torch.float32"


def test_pure_bfloat16_linear_outside_autocast():
    a = rng.standard_normal((4, 8)).astype(np.float32)
    w = rng.standard_normal((3, 8)).astype(np.float32)
    out = F.linear(tb.tensor(a).bfloat16(), tb.tensor(w).bfloat16())
    assert out.dtype == tb.bfloat16
    expected = (rounded(a, ml_dtypes.bfloat16) @ rounded(w, ml_dtypes.bfloat16).T).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out.float().numpy(), expected.astype(np.float32))
    with pytest.raises(RuntimeError, match="same dtype"):
        F.linear(tb.tensor(a).bfloat16(), tb.tensor(w))


# ***** autocast: the region itself *****
def test_nesting_disable_and_restore():
    x = tb.randn(2, 2)
    assert not tb.is_autocast_enabled("cpu")
    with tb.autocast("cpu"):
        assert tb.is_autocast_enabled("cpu")
        with tb.autocast("cpu", enabled=False):
            assert (x @ x).dtype == tb.float32
            with tb.autocast("cpu", dtype=tb.float16):
                assert (x @ x).dtype == tb.float16
            assert (x @ x).dtype == tb.float32
        assert (x @ x).dtype == tb.bfloat16
        assert tb.get_autocast_dtype("cpu") == tb.bfloat16
    assert not tb.is_autocast_enabled("cpu") and (x @ x).dtype == tb.float32


def test_exception_inside_region_restores_state():
    with pytest.raises(ValueError):
        with tb.autocast("cpu"):
            raise ValueError("boom")
    assert not tb.is_autocast_enabled("cpu")


def test_decorator_forms():
    @tb.autocast("cpu")
    def f(a):
        return a @ a

    @tb.cpu.amp.autocast()
    def g(a):
        return a @ a

    x = tb.randn(3, 3)
    assert f(x).dtype == tb.bfloat16 and g(x).dtype == tb.bfloat16
    assert (x @ x).dtype == tb.float32
    with tb.amp.autocast(device_type="cpu", dtype=tb.float16):
        assert (x @ x).dtype == tb.float16


def test_thread_local():
    x = tb.randn(3, 3)
    seen = {}

    def other():
        seen["dtype"] = (x @ x).dtype
        seen["enabled"] = tb.is_autocast_enabled("cpu")

    with tb.autocast("cpu"):
        th = threading.Thread(target=other)
        th.start()
        th.join()
        assert (x @ x).dtype == tb.bfloat16
    assert seen == {"dtype": tb.float32, "enabled": False}


def test_parameter_cast_cache():
    w = tb.randn(4, 4, requires_grad=True)
    x = tb.randn(2, 4)
    with tb.autocast("cpu"):
        x @ w
        (_, _, c1), = autocast_mode._state.cache.values()
        x @ w
        (_, _, c2), = autocast_mode._state.cache.values()
        assert c1 is c2                                  # one cast per parameter per region
        with tb.no_grad():
            w.mul_(2.0)                                  # an in-place change drops the entry
        x @ w
        (_, _, c3), = autocast_mode._state.cache.values()
        assert c3 is not c1 and np.array_equal(c3.detach().float().numpy(), rounded(w._data, ml_dtypes.bfloat16))
    assert autocast_mode._state.cache == {}              # cleared on leaving the region
    with tb.autocast("cpu", cache_enabled=False):
        x @ w
        assert autocast_mode._state.cache == {}


def test_two_backward_passes_in_one_region():
    w = tb.randn(4, 4, requires_grad=True)
    with tb.autocast("cpu"):
        for _ in range(2):   # gradient accumulation inside one region reuses the cached cast
            (tb.randn(2, 4) @ w).float().sum().backward()
    assert w.grad.dtype == tb.float32


def test_errors_and_cuda_without_gpu():
    with pytest.raises(RuntimeError, match="not supported on cpu"):
        tb.autocast("cpu", dtype=tb.float64)
    with pytest.raises(RuntimeError, match="'cpu' or 'cuda'"):
        tb.autocast("tpu")
    if not tb.cuda.is_available():
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            ctx = tb.cuda.amp.autocast()
            scaler = tb.cuda.amp.GradScaler()
        assert any("CUDA is not available" in str(r.message) for r in rec)
        with ctx:
            assert (tb.randn(2, 2) @ tb.randn(2, 2)).dtype == tb.float32
        assert not scaler.is_enabled() and scaler.get_scale() == 1.0


def test_torch_style_imports():
    from tensorbrain.cuda.amp import GradScaler, autocast  # noqa: F401
    from tensorbrain.cpu.amp import autocast as cpu_autocast  # noqa: F401
    assert tb.amp.GradScaler is not None and tb.autocast is tb.amp.autocast


# ***** GradScaler *****
def _model_and_opt(lr=0.5):
    tb.manual_seed(0)
    model = tb.nn.Linear(3, 1)
    return model, tb.optim.SGD(model.parameters(), lr=lr)


def test_scaler_scales_unscales_and_steps_like_plain_sgd():
    model, opt = _model_and_opt()
    w0 = model.weight._data.copy()
    scaler = tb.amp.GradScaler("cpu")
    x = tb.tensor([[1.0, 2.0, 3.0]])
    loss = model(x).sum()
    scaled = scaler.scale(loss)
    assert scaled.item() == pytest.approx(loss.item() * 65536.0)
    scaled.backward()
    assert model.weight.grad.tolist() == [[65536.0, 131072.0, 196608.0]]
    scaler.step(opt)
    np.testing.assert_allclose(model.weight._data, w0 - 0.5 * np.array([[1.0, 2.0, 3.0]]))
    scaler.update()
    assert scaler.get_scale() == 65536.0


def test_scaler_skips_step_and_backs_off_on_inf_then_grows():
    model, opt = _model_and_opt()
    scaler = tb.amp.GradScaler("cpu", init_scale=8.0, growth_interval=3)
    scales = []
    for i in range(8):
        opt.zero_grad()
        scaler.scale(model(tb.ones(1, 3)).sum()).backward()
        if i in (0, 5):
            model.weight.grad._data[0, 0] = np.inf if i == 0 else np.nan
        before = model.weight._data.copy()
        scaler.step(opt)
        skipped = np.array_equal(before, model.weight._data)
        assert skipped == (i in (0, 5))
        scaler.update()
        scales.append(scaler.get_scale())
    # backoff at 0; three clean steps (1, 2, 3) grow; 4 is clean; 5 backs off; 6, 7 are clean
    assert scales == [4.0, 4.0, 4.0, 8.0, 8.0, 4.0, 4.0, 4.0]
    assert scaler.state_dict()["_growth_tracker"] == 2


def test_scaler_sequence_matches_torch():
    torch = pytest.importorskip("torch")
    got = {}
    for lib in (tb, torch):
        lib.manual_seed(0)
        p = lib.nn.Parameter(lib.ones(3))
        opt = lib.optim.SGD([p], lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=4.0, growth_interval=2)
        seq = []
        for i in range(7):
            opt.zero_grad()
            scaler.scale((p * 2.0).sum()).backward()
            if i in (1, 4):
                with lib.no_grad():
                    p.grad[1] = float("inf")
            scaler.step(opt)
            scaler.update()
            seq.append((scaler.get_scale(), [round(v, 5) for v in p.detach().tolist()]))
        got[lib.__name__] = (seq, scaler.state_dict())
    assert got["tensorbrain"] == got["torch"]


def test_scaler_unscale_before_clipping_and_errors():
    model, opt = _model_and_opt()
    scaler = tb.amp.GradScaler("cpu")
    with pytest.raises(AssertionError, match="did not use scaler.scale"):
        scaler.step(opt)
    scaler.scale(model(tb.ones(1, 3)).sum()).backward()
    scaler.unscale_(opt)
    assert model.weight.grad.tolist() == [[1.0, 1.0, 1.0]]
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: None)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    with pytest.raises(AssertionError, match="No inf checks"):
        scaler.update()
    half = tb.nn.Parameter(tb.ones(2, dtype=tb.float16))
    half.grad = tb.ones(2, dtype=tb.float16)
    opt16 = tb.optim.SGD([half], lr=0.1)
    scaler.scale(tb.ones(1))
    with pytest.raises(ValueError, match="FP16 gradients"):
        scaler.unscale_(opt16)


def test_scaler_state_dict_round_trip_and_disabled():
    scaler = tb.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=7)
    sd = scaler.state_dict()
    assert sd == {"scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                  "growth_interval": 7, "_growth_tracker": 0}
    other = tb.amp.GradScaler("cpu")
    other.load_state_dict(sd)
    assert other.state_dict() == sd
    off = tb.amp.GradScaler("cpu", enabled=False)
    loss = tb.ones(1)
    assert off.scale(loss) is loss and off.state_dict() == {} and off.get_scale() == 1.0
    with pytest.raises(RuntimeError, match="source state dict is empty"):
        other.load_state_dict({})
    with pytest.raises(AssertionError, match="growth factor"):
        tb.amp.GradScaler("cpu", growth_factor=1.0)


def test_scaler_with_float16_autocast_training_converges():
    # a float32 model trained under float16 autocast with a scaler: the loss goes down
    tb.manual_seed(0)
    model = tb.nn.Sequential(tb.nn.Linear(4, 16), tb.nn.ReLU(), tb.nn.Linear(16, 2))
    opt = tb.optim.SGD(model.parameters(), lr=0.1)
    scaler = tb.amp.GradScaler("cpu")
    x = tb.randn(64, 4)
    y = (x[:, 0] > 0).long()
    losses = []
    for _ in range(30):
        opt.zero_grad()
        with tb.autocast("cpu", dtype=tb.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert all(p.dtype == tb.float32 for p in model.parameters())
    assert losses[-1] < 0.6 * losses[0]


def test_one_thread_leaving_autocast_leaves_the_other_on():
    x = tb.randn(3, 3)
    inside, leave, seen = threading.Event(), threading.Event(), {}

    def other():
        with tb.autocast("cpu"):
            inside.set()
            leave.wait(10)
            seen["dtype"] = (x @ x).dtype

    th = threading.Thread(target=other)
    th.start()
    inside.wait(10)
    with tb.autocast("cpu"):
        assert (x @ x).dtype == tb.bfloat16
    assert (x @ x).dtype == tb.float32      # this thread is out; the other is still in
    leave.set()
    th.join(10)
    assert seen == {"dtype": tb.bfloat16}
    assert autocast_mode._threads_on[0] == 0


def test_custom_fwd_and_bwd():
    seen = {}

    class Scale(tb.autograd.Function):
        @staticmethod
        @tb.amp.custom_fwd(device_type="cpu", cast_inputs=tb.float32)
        def forward(ctx, x, w):
            seen["fwd"] = (x.dtype, w.dtype, tb.is_autocast_enabled("cpu"))
            ctx.save_for_backward(x, w)
            return x @ w

        @staticmethod
        @tb.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen["bwd"] = tb.is_autocast_enabled("cpu")
            x, w = ctx.saved_tensors
            return g @ w.t(), x.t() @ g

    x = tb.randn(2, 3).bfloat16()
    w = tb.randn(3, 4, requires_grad=True)
    with tb.autocast("cpu"):
        y = Scale.apply(x, w)
    assert y.dtype == tb.float32 and seen["fwd"] == (tb.float32, tb.float32, False)
    y.sum().backward()
    assert seen["bwd"] is True and w.grad.dtype == tb.float32
    y2 = Scale.apply(tb.randn(2, 3), w)           # outside autocast: nothing is cast
    assert y2.dtype == tb.float32 and seen["fwd"][2] is False
    from tensorbrain.cuda.amp import custom_bwd, custom_fwd  # noqa: F401  (torch's spelling)


@pytest.mark.parametrize("module", ["tensorbrain.amp", "tensorbrain.amp.autocast_mode",
                                    "tensorbrain.amp.grad_scaler", "tensorbrain._dtype"])
def test_docstring_examples_run(module):
    import doctest
    import importlib
    assert doctest.testmod(importlib.import_module(module)).failed == 0


def test_the_n_d_convolutions_and_margin_losses_follow_torchs_cpu_lists():
    # torch's CPU autocast list: conv1d/conv3d/conv_transpose*d run in the low dtype; the margin
    # and embedding losses run in float32 (checked op by op against torch where installed).
    F = tb.nn.functional
    x1, w1 = tb.randn(2, 3, 8), tb.randn(4, 3, 3)
    x3, w3 = tb.randn(1, 2, 4, 4, 4), tb.randn(2, 2, 3, 3, 3)
    with tb.autocast("cpu", dtype=tb.bfloat16):
        outs = {"conv1d": F.conv1d(x1, w1), "conv3d": F.conv3d(x3, w3),
                "conv_transpose1d": F.conv_transpose1d(tb.randn(2, 4, 5), w1),
                "conv_transpose2d": F.conv_transpose2d(tb.randn(1, 4, 3, 3), tb.randn(4, 2, 2, 2)),
                "margin_ranking_loss": F.margin_ranking_loss(tb.randn(3).bfloat16(),
                                                             tb.randn(3).bfloat16(), tb.ones(3))}
    assert {k: v.dtype for k, v in outs.items()} == {
        "conv1d": tb.bfloat16, "conv3d": tb.bfloat16, "conv_transpose1d": tb.bfloat16,
        "conv_transpose2d": tb.bfloat16, "margin_ranking_loss": tb.float32}


@pytest.mark.parametrize("low", [tb.float16, tb.bfloat16])
def test_conv_modules_autocast_as_the_functions_do(low):
    """nn.Conv1d/2d/3d and ConvTranspose*d go through the autocast hook (they once called the
    convolution body directly: float32 out under autocast, and a float16 input -- DeepSpeed's
    `inputs.to(torch.half)` idiom -- failed with a dtype mismatch); values equal the functions'."""
    tb.manual_seed(0)
    cases = [(tb.nn.Conv1d(3, 4, 3), tb.randn(2, 3, 8), F.conv1d),
             (tb.nn.Conv2d(3, 4, 3, padding=1), tb.randn(2, 3, 6, 6), F.conv2d),
             (tb.nn.Conv3d(2, 2, 3), tb.randn(1, 2, 4, 4, 4), F.conv3d),
             (tb.nn.ConvTranspose2d(3, 2, 2, stride=2), tb.randn(1, 3, 3, 3), F.conv_transpose2d)]
    for module, x, fn in cases:
        kwargs = {"stride": module.stride, "padding": module.padding}
        with tb.autocast("cpu", dtype=low):
            out, ref = module(x), fn(x, module.weight, module.bias, **kwargs)
            from_low = module(x.to(low))            # a low-precision input, float32 weights
        assert out.dtype == ref.dtype == from_low.dtype == low, type(module).__name__
        np.testing.assert_array_equal(out._data.astype(np.float32), ref._data.astype(np.float32))
        out.float().sum().backward()
        assert module.weight.grad.dtype == tb.float32
    assert tb.nn.Conv2d(3, 4, 3)(tb.randn(1, 3, 5, 5)).dtype == tb.float32   # off: as given
