"""Conv1d/2d/3d, ConvTranspose1d/2d/3d, interpolate/Upsample and pixel shuffles: forward against
naive NumPy loops, gradients against float64 finite differences, both against torch when
installed (gradcheck skips that part without it)."""
import itertools

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.nn.functional as F
from tensorbrain import nn
from tensorbrain.testing import gradcheck

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = TF = None

rng = np.random.default_rng(2)


def tfn(make):
    return make(TF) if TF is not None else None


def _tup(v, nd):
    return (v,) * nd if isinstance(v, int) else tuple(v)


# ***** naive NumPy references: a loop over output (or input) positions *****
def np_conv(x, w, b, stride=1, padding=0, dilation=1, groups=1):
    nd = w.ndim - 2
    s, d = _tup(stride, nd), _tup(dilation, nd)
    ks = w.shape[2:]
    if padding == "same":
        tot = [dd * (k - 1) for dd, k in zip(d, ks, strict=True)]
        pads = [(t // 2, t - t // 2) for t in tot]
    else:
        pads = [(p, p) for p in _tup(0 if padding == "valid" else padding, nd)]
    xp = np.pad(x, [(0, 0), (0, 0)] + pads)
    n, c = x.shape[:2]
    oc = w.shape[0]
    outs = [(xp.shape[2 + i] - d[i] * (ks[i] - 1) - 1) // s[i] + 1 for i in range(nd)]
    out = np.zeros((n, oc, *outs))
    cg, ocg = c // groups, oc // groups
    for o in range(oc):
        g = o // ocg
        for pos in itertools.product(*(range(v) for v in outs)):
            sl = tuple(slice(p * s[i], p * s[i] + d[i] * (ks[i] - 1) + 1, d[i]) for i, p in enumerate(pos))
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            out[(slice(None), o) + pos] = (patch * w[o]).reshape(n, -1).sum(1) + (0 if b is None else b[o])
    return out


def np_conv_transpose(x, w, b, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    nd = w.ndim - 2
    s, p, op, d = (_tup(v, nd) for v in (stride, padding, output_padding, dilation))
    n, cin = x.shape[:2]
    ocg, ks = w.shape[1], w.shape[2:]
    oc, cg = ocg * groups, cin // groups
    full = [(x.shape[2 + i] - 1) * s[i] + d[i] * (ks[i] - 1) + 1 + op[i] for i in range(nd)]
    out = np.zeros((n, oc, *full))
    for ci in range(cin):
        g = ci // cg
        for pos in itertools.product(*(range(v) for v in x.shape[2:])):
            for k in itertools.product(*(range(v) for v in ks)):
                tgt = tuple(pos[i] * s[i] + k[i] * d[i] for i in range(nd))
                out[(slice(None), slice(g * ocg, (g + 1) * ocg)) + tgt] += \
                    x[(slice(None), ci) + pos][:, None] * w[(ci, slice(None)) + k]
    out = out[(slice(None), slice(None)) + tuple(slice(p[i], full[i] - p[i]) for i in range(nd))]
    return out if b is None else out + b.reshape((1, oc) + (1,) * nd)


# ***** convolution *****
CONV = [
    (1, dict()), (1, dict(stride=2, padding=2, dilation=2)), (1, dict(padding="same")),
    (2, dict(stride=(2, 1), padding=(1, 0))), (2, dict(groups=2, dilation=(1, 2))),
    (2, dict(padding="same", dilation=2)), (2, dict(padding="valid")),
    (3, dict(padding=1)), (3, dict(stride=(1, 2, 2), groups=2)),
]


# The ways to run a convolution, forced by the thresholds that normally choose them: a GEMM
# per image or one GEMM for the batch; the input gradient by strided col2im or by the flat
# col2im (all images in one GEMM, or one image per GEMM); the columns kept from forward for the
# weight gradient, or rebuilt in backward (what happens above _KEEP_COLS_BYTES).
# The NumPy paths run with the native 2-D columns off; the native ones (csrc/kernels/im2col.cpp)
# per image and over the whole batch.
_PER, _ONE = dict(_ONE_GEMM_MAX=0, _NATIVE_2D=False), dict(_ONE_GEMM_MAX=10 ** 9, _NATIVE_2D=False)
_STRIDED, _FLAT = dict(_FLAT_MAX_EXTRA=0.0), dict(_FLAT_MAX_EXTRA=1e9)
PATHS = {"per-image": {**_PER, **_STRIDED}, "flat-col2im": {**_PER, **_FLAT},
         "flat-col2im-image-by-image": {**_PER, **_FLAT, "_FLAT_CHUNK_BYTES": 1},
         "one-gemm": {**_ONE, **_STRIDED}, "one-gemm-flat-col2im": {**_ONE, **_FLAT},
         "per-image-rebuilt": {**_PER, **_STRIDED, "_KEEP_COLS_BYTES": 0},
         "one-gemm-rebuilt": {**_ONE, **_FLAT, "_KEEP_COLS_BYTES": 0},
         "native-per-image": {"_FOLD_CONV_MAX": 0}, "native-one-gemm": {"_FOLD_CONV_MAX": 10 ** 9},
         "native-rebuilt": {"_KEEP_COLS_BYTES": 0}}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("nd,kw", CONV, ids=[f"{nd}d-{kw}" for nd, kw in CONV])
def test_conv_nd(nd, kw, path, monkeypatch):
    from tensorbrain._ops import conv_columns, convnd
    for name, value in PATHS[path].items():   # the generic path's knobs, the 2-D columns' knobs
        for module in (convnd, conv_columns):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, value)
    sizes = {1: (9,), 2: (6, 7), 3: (5, 4, 5)}[nd]
    ks = {1: (4,), 2: (3, 2), 3: (3, 2, 3)}[nd]   # even kernels too: 'same' pads asymmetrically
    g = kw.get("groups", 1)
    x = rng.standard_normal((2, 4) + sizes)
    w = rng.standard_normal((6, 4 // g) + ks)
    b = rng.standard_normal(6)
    fn = getattr(F, f"conv{nd}d")
    gradcheck(lambda x, w, b: fn(x, w, b, **kw), [x, w, b],
              numpy_fn=lambda x, w, b: np_conv(x, w, b, **kw),
              torch_fn=tfn(lambda TF: lambda x, w, b: getattr(TF, f"conv{nd}d")(x, w, b, **kw)))




@pytest.mark.parametrize("path", ["per-image", "one-gemm", "native-per-image", "native-one-gemm"])
def test_conv_of_a_permuted_input(path, monkeypatch):
    """A non-contiguous input (a permuted view) on each path: the values and the input
    gradient of the reference (the native column kernels raised on it)."""
    from tensorbrain._ops import conv_columns, convnd
    for name, value in PATHS[path].items():
        for module in (convnd, conv_columns):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, value)
    x = rng.standard_normal((2, 4, 7, 6))
    w, b = rng.standard_normal((5, 4, 3, 3)), rng.standard_normal(5)
    xt = tb.tensor(x.transpose(0, 1, 3, 2).copy(), requires_grad=True)
    y = F.conv2d(xt.permute(0, 1, 3, 2), tb.tensor(w), tb.tensor(b), padding=1)
    np.testing.assert_allclose(y.detach().numpy(), np_conv(x, w, b, padding=1), atol=1e-12)
    y.sum().backward()
    want = tb.tensor(x, requires_grad=True)
    F.conv2d(want, tb.tensor(w), tb.tensor(b), padding=1).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), want.grad.numpy().transpose(0, 1, 3, 2), atol=1e-12)

def test_taps_on_input_against_every_output_position():
    """convnd._taps_on_input keeps every kernel tap that reads the input at some output
    position, and never leaves negative padding before the first tap kept."""
    from tensorbrain._ops.conv import _out_size
    from tensorbrain._ops.convnd import _taps_on_input
    for size, k, s, d, lo, hi in itertools.product(range(1, 6), range(1, 6), range(1, 4), range(1, 3),
                                                   range(0, 5), range(0, 3)):
        out = _out_size(size, k, s, d, lo + hi)
        if out <= 0:
            continue
        meet = {t for t in range(k) for o in range(out) if 0 <= o * s + t * d - lo < size}
        first, end = _taps_on_input(size, k, s, d, lo, out)
        assert 0 <= first < end <= k and first * d <= lo
        assert all(first <= t < end for t in meet), (size, k, s, d, lo, out)
        if meet:
            assert end - 1 == max(meet)


# Inputs smaller than the kernel's reach, where some taps only meet zero padding (a ResNet's
# last 3x3 convolutions on 1x1 inputs; the strided one before them on 2x2).
TRIM = [(2, (1, 1), (3, 3), dict(padding=1)), (2, (2, 2), (3, 3), dict(stride=2, padding=1)),
        (2, (1, 3), (3, 3), dict(padding=(2, 1), dilation=2)), (2, (2, 1), (3, 3), dict(padding=1, groups=2)),
        (1, (1,), (5,), dict(stride=2, padding=3)), (3, (1, 2, 1), (3, 3, 3), dict(padding=1))]


@pytest.mark.parametrize("path", ["per-image", "one-gemm", "native-per-image", "native-one-gemm"])
@pytest.mark.parametrize("nd,size,ks,kw", TRIM, ids=[f"{nd}d-{size}-{kw}" for nd, size, ks, kw in TRIM])
def test_conv_drops_taps_that_only_meet_padding(nd, size, ks, kw, path, monkeypatch):
    """The kernel shrinks to the taps that meet the input: values and gradients (zero for the
    dropped taps) against the loop reference, finite differences and torch, on each path."""
    from tensorbrain._ops import conv_columns, convnd
    for name, value in PATHS[path].items():
        for module in (convnd, conv_columns):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, value)
    trimmed, taps = [], convnd._taps_on_input
    monkeypatch.setattr(convnd, "_taps_on_input", lambda *a: trimmed.append(taps(*a) != (0, a[1])) or taps(*a))
    g = kw.get("groups", 1)
    x = rng.standard_normal((2, 4) + size)
    w, b = rng.standard_normal((6, 4 // g) + ks), rng.standard_normal(6)
    fn = getattr(F, f"conv{nd}d")
    gradcheck(lambda x, w, b: fn(x, w, b, **kw), [x, w, b],
              numpy_fn=lambda x, w, b: np_conv(x, w, b, **kw),
              torch_fn=tfn(lambda TF: lambda x, w, b: getattr(TF, f"conv{nd}d")(x, w, b, **kw)))
    assert any(trimmed), "no tap was dropped"
    one = fn(tb.tensor(x[0]), tb.tensor(w), tb.tensor(b), **kw)
    np.testing.assert_allclose(one.numpy(), np_conv(x[:1], w, b, **kw)[0], atol=1e-12)

def test_conv_batch_in_chunks_with_a_remainder(monkeypatch):
    """Forward's im2col + GEMM and the flat input gradient run 2 images at a time over a batch
    of 3 (a last chunk of 1)."""
    from tensorbrain._ops import conv_columns, convnd
    x, w, b = rng.standard_normal((3, 4, 6, 7)), rng.standard_normal((6, 4, 3, 3)), rng.standard_normal(6)
    per_image = 9 * 4 * (6 * 9) * 8      # kernel positions * channels * flat grid * float64
    monkeypatch.setattr(convnd, "_FLAT_CHUNK_BYTES", 2 * per_image)
    monkeypatch.setattr(convnd, "_ONE_GEMM_MAX", 0)
    monkeypatch.setattr(conv_columns, "_NATIVE_2D", False)
    assert 2 * per_image // (4 * 9 * 42 * 8) == 2      # forward's chunk is 2 images too
    gradcheck(lambda x, w, b: F.conv2d(x, w, b, padding=1), [x, w, b],
              numpy_fn=lambda x, w, b: np_conv(x, w, b, padding=1),
              torch_fn=tfn(lambda TF: lambda x, w, b: TF.conv2d(x, w, b, padding=1)))


def test_conv_pointwise_and_unbatched():
    x, w = rng.standard_normal((3, 5, 5)), rng.standard_normal((2, 3, 1, 1))
    gradcheck(lambda x, w: F.conv2d(x, w), [x, w],
              numpy_fn=lambda x, w: np_conv(x[None], w, None)[0],
              torch_fn=tfn(lambda TF: lambda x, w: TF.conv2d(x, w)))
    x1 = rng.standard_normal((2, 7))
    w1 = rng.standard_normal((3, 2, 3))
    gradcheck(lambda x, w: F.conv1d(x, w, stride=2), [x1, w1],
              numpy_fn=lambda x, w: np_conv(x[None], w, None, stride=2)[0])


TRANSPOSED = [
    (1, dict()), (1, dict(stride=3, padding=1, output_padding=2)),
    (2, dict(stride=2, padding=1)), (2, dict(stride=(2, 3), output_padding=(1, 2), dilation=(1, 2))),
    (2, dict(groups=2, stride=2, padding=(0, 1))),
    (3, dict(stride=2, padding=1, output_padding=1)), (3, dict(groups=2)),
]


@pytest.mark.parametrize("nd,kw", TRANSPOSED, ids=[f"{nd}d-{kw}" for nd, kw in TRANSPOSED])
@pytest.mark.parametrize("batch", [1, 3])
def test_conv_transpose_nd(nd, kw, batch):
    sizes = {1: (5,), 2: (3, 4), 3: (2, 3, 2)}[nd]
    ks = {1: (4,), 2: (3, 4), 3: (2, 3, 2)}[nd]
    g = kw.get("groups", 1)
    x = rng.standard_normal((batch, 4) + sizes)
    w = rng.standard_normal((4, 6 // g) + ks)
    b = rng.standard_normal(6)
    fn = getattr(F, f"conv_transpose{nd}d")
    gradcheck(lambda x, w, b: fn(x, w, b, **kw), [x, w, b],
              numpy_fn=lambda x, w, b: np_conv_transpose(x, w, b, **kw),
              torch_fn=tfn(lambda TF: lambda x, w, b: getattr(TF, f"conv_transpose{nd}d")(x, w, b, **kw)))


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("batch", [1, 3])
def test_conv_transpose_of_one_input_position_is_a_product(nd, batch, monkeypatch):
    """A 1x1 input whose output is exactly one kernel (DCGAN's first layer) runs as one
    product (convnd._conv_transpose_projection): values and gradients against the reference,
    finite differences and torch; unbatched as the batch of one."""
    from tensorbrain._ops import convnd
    taken, product = [], convnd._conv_transpose_projection
    monkeypatch.setattr(convnd, "_conv_transpose_projection",
                        lambda *a: taken.append(1) or product(*a))
    ks = {1: (4,), 2: (4, 3), 3: (2, 3, 2)}[nd]
    x = rng.standard_normal((batch, 5) + (1,) * nd)
    w, b = rng.standard_normal((5, 2) + ks), rng.standard_normal(2)
    fn = getattr(F, f"conv_transpose{nd}d")
    gradcheck(lambda x, w, b: fn(x, w, b, stride=2), [x, w, b],
              numpy_fn=lambda x, w, b: np_conv_transpose(x, w, b, stride=2),
              torch_fn=tfn(lambda TF: lambda x, w, b: getattr(TF, f"conv_transpose{nd}d")(x, w, b, stride=2)))
    one = fn(tb.tensor(x[0]), tb.tensor(w), tb.tensor(b), stride=2)
    np.testing.assert_allclose(one.numpy(), np_conv_transpose(x[:1], w, b, stride=2)[0], atol=1e-12)
    assert taken, "the product path was not taken"


def test_conv_transpose_large_input_takes_the_per_image_path(monkeypatch):
    """Inputs larger than the batch-folding threshold use a GEMM per image (on the NumPy path;
    the native 2-D path always folds): check that path."""
    from tensorbrain._ops import conv_columns, convnd
    x = rng.standard_normal((2, 3, 17, 16))
    assert 17 * 16 > convnd._FOLD_MAX
    monkeypatch.setattr(conv_columns, "_NATIVE_2D", False)
    w = rng.standard_normal((3, 2, 2, 2))
    want = np_conv_transpose(x, w, None, stride=2)
    np.testing.assert_allclose(F.conv_transpose2d(tb.tensor(x), tb.tensor(w), stride=2)._data,
                               want, atol=1e-10)


def test_conv_transpose_is_the_adjoint_of_conv():
    """<conv(x), y> == <x, conv_transpose(y)> for the same weight, stride and padding."""
    x = rng.standard_normal((2, 3, 9, 8))
    w = rng.standard_normal((5, 3, 3, 3))
    y = rng.standard_normal((2, 5, 5, 4))
    lhs = (F.conv2d(tb.tensor(x), tb.tensor(w), stride=2, padding=1)._data * y).sum()
    rhs = (x * F.conv_transpose2d(tb.tensor(y), tb.tensor(w), stride=2, padding=1,
                                  output_padding=(0, 1))._data).sum()
    assert lhs == pytest.approx(rhs, rel=1e-10)


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_modules_padding_modes_against_torch(mode, nd):
    torch = pytest.importorskip("torch")
    cls = getattr(nn, f"Conv{nd}d")
    m = cls(4, 6, 3, stride=1, padding=1 if nd != 2 else "same", padding_mode=mode, groups=2,
            dtype=tb.float64)
    tm = getattr(torch.nn, f"Conv{nd}d")(4, 6, 3, stride=1, padding=1 if nd != 2 else "same",
                                         padding_mode=mode, groups=2, dtype=torch.float64)
    with torch.no_grad():
        tm.weight.copy_(torch.from_numpy(m.weight._data))
        tm.bias.copy_(torch.from_numpy(m.bias._data))
    x = rng.standard_normal((2, 4) + (5,) * nd)
    xt = tb.tensor(x, requires_grad=True)
    Xt = torch.tensor(x, requires_grad=True)
    out, tout = m(xt), tm(Xt)
    np.testing.assert_allclose(out._data, tout.detach().numpy(), atol=1e-10)
    cot = rng.standard_normal(out.shape)
    out.backward(tb.tensor(cot))
    tout.backward(torch.from_numpy(cot))
    np.testing.assert_allclose(xt.grad._data, Xt.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(m.weight.grad._data, tm.weight.grad.numpy(), atol=1e-10)


def test_reflect_padding_matches_numpy():
    m = nn.Conv1d(1, 1, 3, padding=2, padding_mode="reflect", bias=False, dtype=tb.float64)
    x = rng.standard_normal((1, 1, 6))
    want = np_conv(np.pad(x, [(0, 0), (0, 0), (2, 2)], mode="reflect"), m.weight._data, None)
    np.testing.assert_allclose(m(tb.tensor(x))._data, want, atol=1e-12)


def test_conv_transpose_module_output_size_and_repr():
    m = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1)
    x = tb.randn(1, 4, 5, 5)
    assert m(x).shape == (1, 2, 9, 9)
    assert m(x, output_size=(10, 10)).shape == (1, 2, 10, 10)
    assert m(x, output_size=[1, 2, 10, 9]).shape == (1, 2, 10, 9)
    with pytest.raises(ValueError, match="not reachable"):
        m(x, output_size=(12, 12))
    assert m.weight.shape == (4, 2, 3, 3)
    assert "output_padding" not in repr(m) and "stride=(2, 2)" in repr(m)
    with pytest.raises(ValueError, match="zeros"):
        nn.ConvTranspose1d(2, 2, 3, padding_mode="reflect")


def test_module_init_like_torch():
    m = nn.Conv3d(2, 4, 3)
    bound = 1 / np.sqrt(2 * 27)
    assert np.abs(m.weight._data).max() <= bound and np.abs(m.bias._data).max() <= bound
    t = nn.ConvTranspose1d(3, 6, 5, groups=3)
    assert t.weight.shape == (3, 2, 5)   # fan_in of a transposed weight is (out/groups)*k
    assert np.abs(t.weight._data).max() <= 1 / np.sqrt(2 * 5)


def test_conv_errors_name_shapes():
    with pytest.raises(RuntimeError, match="4 channels"):
        F.conv1d(tb.randn(1, 4, 5), tb.randn(2, 3, 3))
    with pytest.raises(RuntimeError, match="expected a 4-D"):
        F.conv3d(tb.randn(1, 4, 5), tb.randn(2, 4, 3, 3, 3))
    with pytest.raises(RuntimeError, match="weight must be 3-D"):
        F.conv1d(tb.randn(1, 4, 5), tb.randn(2, 4, 3, 3))
    with pytest.raises(ValueError, match="output padding"):
        F.conv_transpose2d(tb.randn(1, 2, 3, 3), tb.randn(2, 2, 3, 3), stride=2, output_padding=2)
    with pytest.raises(ValueError, match="strided"):
        nn.Conv1d(1, 1, 3, stride=2, padding="same")
    with pytest.raises(RuntimeError, match="dtype"):
        F.conv2d(tb.randn(1, 1, 3, 3), tb.randn(1, 1, 2, 2, dtype=tb.float64))


# ***** interpolate / Upsample *****
INTERP = [
    ((2, 3, 5), dict(scale_factor=2)), ((2, 3, 5), dict(size=8)), ((2, 3, 7), dict(size=3)),
    ((2, 3, 5), dict(size=8, mode="nearest-exact")),
    ((2, 3, 5), dict(scale_factor=1.7, mode="linear")),
    ((2, 3, 5), dict(size=9, mode="linear", align_corners=True)),
    ((1, 2, 4, 5), dict(scale_factor=2, mode="bilinear")),
    ((1, 2, 4, 5), dict(scale_factor=(1.5, 0.6), mode="bilinear")),
    ((1, 2, 4, 5), dict(size=(7, 3), mode="bilinear", align_corners=True)),
    ((1, 2, 4, 5), dict(scale_factor=(2, 3))), ((1, 2, 4, 5), dict(size=(3, 7))),
    ((1, 2, 4, 5), dict(scale_factor=1.5, recompute_scale_factor=True, mode="bilinear")),
    ((1, 2, 6, 5), dict(size=(4, 3), mode="area")),
    ((1, 2, 4, 5), dict(scale_factor=2, mode="bicubic")),
    ((1, 2, 5, 6), dict(size=(3, 9), mode="bicubic")),
    ((1, 2, 4, 5), dict(size=(7, 3), mode="bicubic", align_corners=True)),
    ((1, 2, 3, 4, 3), dict(scale_factor=2, mode="trilinear")),
    ((1, 2, 3, 4, 3), dict(size=(2, 5, 4))),
]


@pytest.mark.parametrize("shape,kw", INTERP, ids=[f"{len(s)}d-{kw}" for s, kw in INTERP])
def test_interpolate(shape, kw):
    x = rng.standard_normal(shape)
    gradcheck(lambda x: F.interpolate(x, **kw), [x],
              torch_fn=tfn(lambda TF: lambda x: TF.interpolate(x, **kw)))


def np_bilinear_align_false(x, oh, ow):
    """Bilinear resize written per output pixel (align_corners=False, scale = in / out)."""
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            sy, sx = max((i + 0.5) * h / oh - 0.5, 0), max((j + 0.5) * w / ow - 0.5, 0)
            y0, x0 = min(int(sy), h - 1), min(int(sx), w - 1)
            y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
            ly, lx = sy - y0, sx - x0
            out[:, :, i, j] = ((1 - ly) * ((1 - lx) * x[:, :, y0, x0] + lx * x[:, :, y0, x1])
                               + ly * ((1 - lx) * x[:, :, y1, x0] + lx * x[:, :, y1, x1]))
    return out


def test_interpolate_against_numpy():
    x = rng.standard_normal((2, 3, 4, 5))
    gradcheck(lambda x: F.interpolate(x, size=(7, 3), mode="bilinear"), [x],
              numpy_fn=lambda x: np_bilinear_align_false(x, 7, 3))
    gradcheck(lambda x: nn.Upsample(scale_factor=2)(x), [x],
              numpy_fn=lambda x: x.repeat(2, axis=2).repeat(2, axis=3))
    gradcheck(lambda x: F.interpolate(x, size=(8, 15)), [x],
              numpy_fn=lambda x: x[:, :, np.arange(8) // 2][:, :, :, np.arange(15) // 3])


def test_upsampling_modules_and_errors():
    x = tb.randn(1, 1, 3, 3)
    y = nn.UpsamplingBilinear2d(scale_factor=2)(x)
    np.testing.assert_allclose(y._data[0, 0, 0, [0, -1]], x._data[0, 0, 0, [0, -1]], rtol=1e-6)
    assert nn.UpsamplingNearest2d(size=5)(x).shape == (1, 1, 5, 5)
    with pytest.raises(ValueError, match="exactly one"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(ValueError, match="needs a 4-D"):
        F.interpolate(tb.randn(1, 1, 3), scale_factor=2, mode="bilinear")
    with pytest.raises(NotImplementedError, match="lanczos"):
        F.interpolate(x, scale_factor=2, mode="lanczos")
    with pytest.raises(NotImplementedError, match="antialias"):
        F.interpolate(x, scale_factor=2, mode="bilinear", antialias=True)


# ***** pixel shuffle *****
def test_pixel_shuffle_round_trip_and_numpy():
    x = rng.standard_normal((2, 8, 3, 4))

    def ref(x):
        n, c, h, w = x.shape
        return x.reshape(n, c // 4, 2, 2, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, c // 4, h * 2, w * 2)
    gradcheck(lambda x: nn.PixelShuffle(2)(x), [x], numpy_fn=ref,
              torch_fn=tfn(lambda TF: lambda x: TF.pixel_shuffle(x, 2)))
    y = rng.standard_normal((3, 2, 6, 9))
    gradcheck(lambda y: nn.PixelUnshuffle(3)(y), [y],
              torch_fn=tfn(lambda TF: lambda y: TF.pixel_unshuffle(y, 3)))
    t = tb.tensor(x)
    np.testing.assert_array_equal(F.pixel_unshuffle(F.pixel_shuffle(t, 2), 2)._data, x)
    assert F.pixel_shuffle(tb.randn(4, 9, 2, 2), 3).shape == (4, 1, 6, 6)   # unbatched (C, H, W)
    with pytest.raises(RuntimeError, match="divisible"):
        F.pixel_shuffle(tb.randn(1, 6, 2, 2), 2)


# ***** max pooling's tiled backward (windows that tile the input) *****
@pytest.mark.parametrize("k", [2, 3, (2, 3)])
def test_max_pool_tiled_backward_first_max_wins(k):
    kh, kw = (k, k) if isinstance(k, int) else k
    x = np.maximum(rng.standard_normal((2, 3, 2 * kh * 2, 3 * kw)), 0)   # ReLU: many tied zeros
    x[0, 0, :kh, :kw] = 1.0                                           # a window of equal maxima
    g = rng.standard_normal((2, 3, 4, 3))

    def ref(x):
        out = np.zeros_like(x)
        for idx in np.ndindex(2, 3, 4, 3):
            n, c, i, j = idx
            win = x[n, c, i * kh:(i + 1) * kh, j * kw:(j + 1) * kw]
            a, b = divmod(int(np.argmax(win)), kw)              # argmax: the first maximum
            out[n, c, i * kh + a, j * kw + b] = g[idx]
        return out
    t = tb.tensor(x, requires_grad=True)
    F.max_pool2d(t, (kh, kw)).backward(tb.tensor(g))
    np.testing.assert_array_equal(t.grad._data, ref(x))
    if torch is not None:
        T = torch.tensor(x, requires_grad=True)
        TF.max_pool2d(T, (kh, kw)).backward(torch.tensor(g))
        np.testing.assert_array_equal(t.grad._data, T.grad.numpy())


# ***** end to end: a small DCGAN generator and a conv net train like torch's *****
def _gan(lib, nz=6, ngf=4):
    nn_ = lib.nn
    return nn_.Sequential(
        nn_.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn_.BatchNorm2d(ngf * 4), nn_.ReLU(True),
        nn_.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn_.BatchNorm2d(ngf * 2), nn_.ReLU(True),
        nn_.ConvTranspose2d(ngf * 2, 3, 4, 2, 1, bias=False), nn_.Upsample(scale_factor=2),
        nn_.Conv2d(3, 3, 3, padding=1, padding_mode="reflect"), nn_.Tanh())


def test_small_generator_trains_like_torch():
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    try:
        t_model = _gan(torch)
    finally:
        torch.set_default_dtype(torch.float32)
    model = _gan(tb).to(tb.float64)
    with torch.no_grad():
        for (name, p), (tname, tp) in zip(model.named_parameters(), t_model.named_parameters(),
                                          strict=True):
            assert name == tname and tuple(p.shape) == tuple(tp.shape)
            tp.copy_(torch.from_numpy(np.array(p._data)))
    opt = tb.optim.Adam(model.parameters(), lr=2e-3, betas=(0.5, 0.999))
    t_opt = torch.optim.Adam(t_model.parameters(), lr=2e-3, betas=(0.5, 0.999))
    z = rng.standard_normal((4, 6, 1, 1))
    target = rng.uniform(-1, 1, (4, 3, 32, 32))
    losses, t_losses = [], []
    for _ in range(4):
        opt.zero_grad()
        loss = F.mse_loss(model(tb.tensor(z)), tb.tensor(target))
        loss.backward()
        opt.step()
        losses.append(loss.item())
        t_opt.zero_grad()
        t_loss = TF.mse_loss(t_model(torch.tensor(z)), torch.tensor(target))
        t_loss.backward()
        t_opt.step()
        t_losses.append(t_loss.item())
    np.testing.assert_allclose(losses, t_losses, rtol=1e-9)
    assert losses[-1] < losses[0]
