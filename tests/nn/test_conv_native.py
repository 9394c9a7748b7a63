"""im2col2d / col2im2d's C++ kernels (csrc/kernels/im2col.cpp) against their NumPy twins
(tensorbrain/_ops/conv_columns.py), and the 2-D convolutions that run on them against the NumPy
paths. (Both paths are checked against NumPy references and torch in test_conv.py.)"""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import _native
from tensorbrain._ops import conv_columns, convnd

pytestmark = pytest.mark.skipif(not _native.is_available(), reason="tensorbrain._C not built")
F = tb.nn.functional
rng = np.random.default_rng(0)

# (kh, kw, sh, sw, ph, pw, dh, dw) over a 7x6 image; padding wider than the kernel reach too
GEOMETRIES = [(3, 3, 1, 1, 1, 1, 1, 1), (3, 2, 2, 1, 0, 1, 1, 1), (4, 4, 2, 2, 1, 1, 1, 1),
              (2, 3, 1, 2, 2, 0, 2, 1), (1, 1, 2, 2, 0, 0, 1, 1), (7, 7, 2, 2, 3, 3, 1, 1),
              (3, 3, 3, 1, 4, 2, 1, 2),
              # "same" convolutions (unit strides, output as wide as the input: one copy per
              # kernel position and image), a kernel taller than the image, a dilated one
              (5, 5, 1, 1, 2, 2, 1, 1), (9, 3, 1, 1, 4, 1, 1, 1), (3, 3, 1, 1, 2, 2, 2, 2), (1, 1, 1, 1, 0, 0, 1, 1)]


def _out(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


@pytest.mark.parametrize("geom", GEOMETRIES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fold", [True, False])
def test_native_and_twin_agree(geom, dtype, fold):
    kh, kw, sh, sw, ph, pw, dh, dw = geom
    n, c, h, w = 3, 2, 7, 6
    oh, ow = _out(h, kh, sh, ph, dh), _out(w, kw, sw, pw, dw)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    args = (kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, fold)
    C = _native.module()
    cols = C.im2col2d(x, *args)
    twin = convnd.im2col2d(x, *args)
    assert cols.dtype == twin.dtype and cols.shape == twin.shape
    assert np.array_equal(cols, twin)                      # a copy: bit for bit
    g = rng.standard_normal(cols.shape).astype(dtype)
    a, b = C.col2im2d(g, n, c, h, w, *args), convnd.col2im2d(g, n, c, h, w, *args)
    assert a.dtype == b.dtype and a.shape == b.shape == x.shape
    # overlapping windows add into one pixel in another order: equal up to rounding
    eps = float(np.finfo(dtype).eps)
    np.testing.assert_allclose(a, b, rtol=16 * eps, atol=16 * eps)
    # and col2im is im2col's adjoint: <im2col(x), g> == <x, col2im(g)>
    assert float((cols * g).sum()) == pytest.approx(float((x * a).sum()), rel=1e3 * eps)


@pytest.mark.parametrize("w", [2, 3, 4, 5, 8, 9])
@pytest.mark.parametrize("fold", [True, False])
def test_columns_of_kernel_4_stride_2_rows(w, fold):
    """Kernel-4, stride-2, padding-1 rows (a DCGAN generator's transposed convolutions) go
    through one pass per row in both directions (csrc/kernels/im2col.cpp, add_row_k4s2 and
    row_columns_k4s2): the twins' results for image widths 2*ow and 2*ow + 1, ow from 1 to 4."""
    n, c, h = 2, 3, 6
    oh, ow = _out(h, 4, 2, 1, 1), _out(w, 4, 2, 1, 1)
    args = (4, 4, 2, 2, 1, 1, 1, 1, oh, ow, fold)
    x = rng.standard_normal((n, c, h, w))
    assert np.array_equal(_native.module().im2col2d(x, *args), convnd.im2col2d(x, *args))
    g = rng.standard_normal((4 * 4 * c, n * oh * ow) if fold else (n, 4 * 4 * c, oh * ow))
    np.testing.assert_allclose(_native.module().col2im2d(g, n, c, h, w, *args), convnd.col2im2d(g, n, c, h, w, *args),
                               rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_swap_leading_axes_is_numpys_transposing_copy(dtype):
    """The channel-major copies of the one-GEMM path (and back, with the bias) against NumPy's
    transpose; errors name the shapes."""
    C = _native.module()
    x = rng.standard_normal((5, 7, 11)).astype(dtype)
    bias = rng.standard_normal(5).astype(dtype)
    np.testing.assert_array_equal(C.swap_leading_axes(x), x.transpose(1, 0, 2))
    np.testing.assert_array_equal(C.swap_leading_axes(x, bias), x.transpose(1, 0, 2) + bias[None, :, None])
    with pytest.raises(ValueError, match=r"bias must be a C-contiguous \(5,\) array"):
        C.swap_leading_axes(x, bias[:4])
    with pytest.raises(ValueError, match=r"expected \(A, B, L\), got shape \(5, 77\)"):
        C.swap_leading_axes(x.reshape(5, 77))
    with pytest.raises(TypeError, match="float32 or float64 only"):
        C.swap_leading_axes(x.astype(np.int32))


def test_native_errors_name_the_problem():
    C = _native.module()
    with pytest.raises(TypeError, match="float32 or float64"):
        C.im2col2d(np.zeros((1, 1, 3, 3), np.int32), 1, 1, 1, 1, 0, 0, 1, 1, 3, 3, True)
    with pytest.raises(ValueError, match="C-contiguous"):
        C.im2col2d(np.zeros((1, 1, 3, 6))[..., ::2], 1, 1, 1, 1, 0, 0, 1, 1, 3, 3, True)
    with pytest.raises(ValueError, match="do not match"):
        C.col2im2d(np.zeros((5, 9)), 1, 1, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1, 3, 3, True)


def _grads(fn, x, w, b, native, monkeypatch):
    monkeypatch.setattr(conv_columns, "_NATIVE_2D", native)
    xt, wt, bt = (tb.tensor(a, requires_grad=True) for a in (x, w, b))
    out = fn(xt, wt, bt)
    out.backward(tb.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape).astype(x.dtype)))
    return [out.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()]


@pytest.mark.parametrize("fold_max", [0, 10 ** 9], ids=["per-image", "one-gemm"])
@pytest.mark.parametrize("kw", [dict(padding=1), dict(stride=2, padding=(3, 1), dilation=(1, 2)),
                                dict(padding="same")], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv2d_native_path_matches_numpy_path(kw, dtype, fold_max, monkeypatch):
    monkeypatch.setattr(conv_columns, "_FOLD_CONV_MAX", fold_max)
    x = rng.standard_normal((3, 4, 9, 8)).astype(dtype)
    w, b = rng.standard_normal((5, 4, 3, 3)).astype(dtype), rng.standard_normal(5).astype(dtype)
    fn = lambda x, w, b: F.conv2d(x, w, b, **kw)   # noqa: E731
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for a, b_ in zip(_grads(fn, x, w, b, True, monkeypatch), _grads(fn, x, w, b, False, monkeypatch)):
        np.testing.assert_allclose(a, b_, rtol=tol, atol=tol)


@pytest.mark.parametrize("kw", [dict(stride=2, padding=1), dict(stride=1),
                                dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2), dilation=(1, 2))],
                         ids=str)
@pytest.mark.parametrize("size", [(1, 1), (4, 5)])
def test_conv_transpose2d_native_path_matches_numpy_path(kw, size, monkeypatch):
    x = rng.standard_normal((2, 4) + size)
    w, b = rng.standard_normal((4, 3, 4, 3)), rng.standard_normal(3)
    fn = lambda x, w, b: F.conv_transpose2d(x, w, b, **kw)   # noqa: E731
    for a, b_ in zip(_grads(fn, x, w, b, True, monkeypatch), _grads(fn, x, w, b, False, monkeypatch)):
        np.testing.assert_allclose(a, b_, rtol=1e-10, atol=1e-10)
