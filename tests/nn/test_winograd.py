"""Winograd F(2x2, 3x3) convolutions (tensorbrain/_ops/winograd.py): the native tile transforms
(csrc/kernels/winograd.cpp) against their NumPy twins, each transform against its adjoint, and
the convolution on this path against the loop reference, finite differences and torch."""
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.nn.functional as F
from tensorbrain import _native
from tensorbrain._ops import winograd as W
from tensorbrain.testing import gradcheck

from .test_conv import np_conv, tfn

rng = np.random.default_rng(5)
native = pytest.mark.skipif(not _native.is_available() or not hasattr(_native.module(), "winograd_input"),
                            reason="tensorbrain._C with the Winograd transforms is not built")

# (N, C, H, W, padding before (top, left), output (HO, WO)): odd and even outputs (a last tile
# half outside), no padding, padding 2, one side only
GEOMS = [(2, 3, 5, 6, (1, 1), (5, 6)), (1, 2, 4, 4, (0, 0), (2, 2)), (3, 2, 7, 5, (2, 0), (9, 3)),
         (2, 4, 3, 3, (1, 2), (3, 4))]


def _transform_args(geom):
    n, c, h, w, (pt, pl), (ho, wo) = geom
    return n, c, h, w, pt, pl, ho, wo, W.half(ho), W.half(wo)


@native
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("geom", GEOMS)
def test_native_transforms_match_the_numpy_twins(geom, dtype):
    C = _native.module()
    n, c, h, w, pt, pl, ho, wo, th, tw = _transform_args(geom)
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-13)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    np.testing.assert_allclose(C.winograd_input(x, pt, pl, th, tw), W.winograd_input(x, pt, pl, th, tw), **tol)
    gV = rng.standard_normal((16, c, n * th * tw)).astype(dtype)
    np.testing.assert_allclose(C.winograd_input_grad(gV, n, h, w, pt, pl, th, tw),
                               W.winograd_input_grad(gV, n, h, w, pt, pl, th, tw), **tol)
    M = rng.standard_normal((16, 5, n * th * tw)).astype(dtype)
    bias = rng.standard_normal(5).astype(dtype)
    for b in (None, bias):
        np.testing.assert_allclose(C.winograd_output(M, n, ho, wo, b), W.winograd_output(M, n, ho, wo, b), **tol)
    g = rng.standard_normal((n, 5, ho, wo)).astype(dtype)
    np.testing.assert_allclose(C.winograd_output_grad(g), W.winograd_output_grad(g), **tol)


@pytest.mark.parametrize("geom", GEOMS)
def test_each_backward_transform_is_the_adjoint_of_its_forward(geom):
    """<T x, y> == <x, T* y> for the input and output transforms, natively and in NumPy: the
    backward of the convolution is only right if these are exact adjoints."""
    n, c, h, w, pt, pl, ho, wo, th, tw = _transform_args(geom)
    mods = [W._NumpyTransforms] + ([_native.module()] if hasattr(_native.module() or object(), "winograd_input") else [])
    x = rng.standard_normal((n, c, h, w))
    y = rng.standard_normal((16, c, n * th * tw))
    M = rng.standard_normal((16, 3, n * th * tw))
    g = rng.standard_normal((n, 3, ho, wo))
    for C in mods:
        lhs, rhs = (C.winograd_input(x, pt, pl, th, tw) * y).sum(), (x * C.winograd_input_grad(y, n, h, w, pt, pl, th, tw)).sum()
        assert abs(lhs - rhs) < 1e-9 * max(1.0, abs(lhs)), C
        lhs, rhs = (C.winograd_output(M, n, ho, wo) * g).sum(), (M * C.winograd_output_grad(g)).sum()
        assert abs(lhs - rhs) < 1e-9 * max(1.0, abs(lhs)), C


def test_the_transforms_compute_a_convolution():
    """Summed over channels, A^T [(G w G^T) * (B^T d B)] A is the 3x3 cross-correlation (the
    NumPy twins and filter transform alone, against the loop reference)."""
    x, w = rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((4, 3, 3, 3))
    th, tw = W.half(6), W.half(5)
    V = W.winograd_input(x, 1, 1, th, tw)
    out = W.winograd_output(W._filter(w) @ V, 2, 6, 5)
    np.testing.assert_allclose(out, np_conv(x, w, None, padding=1), rtol=1e-12, atol=1e-12)


def _on_winograd_path(monkeypatch, numpy_transforms):
    """Lower the thresholds so small tests take the path (with the NumPy transforms when asked);
    returns the list each call through winograd.conv2d appends to."""
    monkeypatch.setattr(W, "_MIN_CHANNELS", 1)
    monkeypatch.setattr(W, "_MIN_TILES", 1)
    if numpy_transforms:
        monkeypatch.setattr(W, "transforms_for", lambda x, oc, tiles: W._NumpyTransforms)
    elif not hasattr(_native.module() or object(), "winograd_input"):
        pytest.skip("tensorbrain._C with the Winograd transforms is not built")
    taken, conv2d = [], W.conv2d
    monkeypatch.setattr(W, "conv2d", lambda *a: taken.append(1) or conv2d(*a))
    return taken


@pytest.mark.parametrize("transforms", ["native", "numpy"])
@pytest.mark.parametrize("size,kw", [((6, 7), dict(padding=1)), ((5, 5), dict(padding=0)),
                                     ((4, 6), dict(padding=2)), ((7, 4), dict(padding="same")),
                                     ((3, 3), dict(padding=(0, 1)))])
def test_conv_on_the_winograd_path(size, kw, transforms, monkeypatch):
    """Values and gradients of input, weight and bias against the loop reference, finite
    differences and torch; unbatched as the batch of one; the path ran."""
    taken = _on_winograd_path(monkeypatch, transforms == "numpy")
    x = rng.standard_normal((2, 4) + size)
    w, b = rng.standard_normal((5, 4, 3, 3)), rng.standard_normal(5)
    gradcheck(lambda x, w, b: F.conv2d(x, w, b, **kw), [x, w, b],
              numpy_fn=lambda x, w, b: np_conv(x, w, b, **kw),
              torch_fn=tfn(lambda TF: lambda x, w, b: TF.conv2d(x, w, b, **kw)))
    one = F.conv2d(tb.tensor(x[0]), tb.tensor(w), None, **kw)
    np.testing.assert_allclose(one.numpy(), np_conv(x[:1], w, None, **kw)[0], atol=1e-12)
    assert taken, "the Winograd path was not taken"



def test_permuted_input_and_a_bias_of_another_dtype(monkeypatch):
    """A non-contiguous input and a float64 bias on float32 data take the path and give what
    im2col + GEMM gives (the native transforms take contiguous planes and a bias of the data's
    dtype; the op adapts both)."""
    taken = _on_winograd_path(monkeypatch, False)
    x = tb.tensor(rng.standard_normal((2, 4, 6, 5)).astype(np.float32)).permute(0, 1, 3, 2)
    w = tb.tensor(rng.standard_normal((3, 4, 3, 3)).astype(np.float32))
    b = tb.tensor(rng.standard_normal(3))
    got = F.conv2d(x, w, b, padding=1).numpy()
    assert taken
    monkeypatch.setenv("TB_WINOGRAD", "0")
    want = F.conv2d(x, w, b, padding=1).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

def test_float32_error_at_a_conv_net_layer(monkeypatch):
    """float32 at the conv net's 32->64 layer (16x16, the sizes the path is for): output and
    gradients within float32 rounding of a float64 reference (im2col + GEMM in float64)."""
    taken = _on_winograd_path(monkeypatch, False)
    x64, w64 = rng.standard_normal((4, 32, 16, 16)), rng.standard_normal((64, 32, 3, 3)) * 0.1
    g64 = rng.standard_normal((4, 64, 16, 16))
    x, w = (tb.tensor(a.astype(np.float32), requires_grad=True) for a in (x64, w64))
    F.conv2d(x, w, None, padding=1).backward(tb.tensor(g64.astype(np.float32)))
    assert taken
    monkeypatch.setenv("TB_WINOGRAD", "0")
    xr, wr = (tb.tensor(a, requires_grad=True) for a in (x64, w64))
    ref = F.conv2d(xr, wr, None, padding=1)
    ref.backward(tb.tensor(g64))
    out = F.conv2d(tb.tensor(x64.astype(np.float32)), tb.tensor(w64.astype(np.float32)), None, padding=1)
    assert len(taken) == 1, "TB_WINOGRAD=0 still took the path"
    for got, want in ((out, ref), (x.grad, xr.grad), (w.grad, wr.grad)):
        got, want = got.detach().numpy(), want.detach().numpy()
        assert np.abs(got - want).max() <= 2e-5 * np.abs(want).max(), np.abs(got - want).max() / np.abs(want).max()


@native
def test_bad_geometry_names_the_shapes():
    C = _native.module()
    x = np.zeros((1, 2, 5, 5), np.float32)
    with pytest.raises(ValueError, match="bad tile geometry.*image 5x5"):
        C.winograd_input(x, 1, 1, 1, 1)                      # 2 tiles cannot cover a 5x5 image
    with pytest.raises(ValueError, match=r"does not match \(16, 2, 9\)"):
        C.winograd_input_grad(np.zeros((16, 2, 8), np.float32), 1, 5, 5, 1, 1, 3, 3)
    with pytest.raises(TypeError, match="float32 or float64 only"):
        C.winograd_output(np.zeros((16, 2, 9), np.int32), 1, 5, 5)


def test_other_convolutions_keep_their_path(monkeypatch):
    """Strided, dilated, grouped and 5x5 convolutions do not take the path even where the
    transforms would be offered (convnd's shape check), and give the reference's values."""
    taken = _on_winograd_path(monkeypatch, True)
    x = rng.standard_normal((2, 4, 8, 8))
    for kw, k in [(dict(stride=2, padding=1), 3), (dict(dilation=2, padding=2), 3), (dict(groups=2, padding=1), 3),
                  (dict(padding=2), 5)]:
        w = rng.standard_normal((4, 4 // kw.get("groups", 1), k, k))
        np.testing.assert_allclose(F.conv2d(tb.tensor(x), tb.tensor(w), None, **kw).numpy(),
                                   np_conv(x, w, None, **kw), atol=1e-12)
    assert not taken


def test_transforms_for_declines_what_does_not_pay():
    """Other dtypes, few channels, few tiles, TB_WINOGRAD=0: None (im2col + GEMM)."""
    x = np.zeros((8, 32, 16, 16), np.float32)
    assert W.transforms_for(x.astype(np.int64), 32, 512) is None
    assert W.transforms_for(x[:, :W._MIN_CHANNELS - 1], 32, 512) is None
    assert W.transforms_for(x, W._MIN_CHANNELS - 1, 512) is None
    assert W.transforms_for(x, 32, W._MIN_TILES - 1) is None
    import os
    old = os.environ.get("TB_WINOGRAD")
    os.environ["TB_WINOGRAD"] = "0"
    try:
        assert W.transforms_for(x, 32, 512) is None
    finally:
        if old is None:
            del os.environ["TB_WINOGRAD"]
        else:
            os.environ["TB_WINOGRAD"] = old
