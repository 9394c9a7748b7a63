"""max_pool2d's C++ kernel (csrc/kernels/pool.cpp) against its NumPy twin (tensorbrain/_ops/conv.py):
the same outputs, winners and gradients, bit for bit, over window geometries, dtypes, ties and
NaNs. (Both are checked against NumPy references and torch in test_functional.py/test_conv.py.)"""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import _native
from tensorbrain._ops import conv as conv_ops

pytestmark = pytest.mark.skipif(not _native.is_available(), reason="tensorbrain._C not built")
F = tb.nn.functional
rng = np.random.default_rng(0)

GEOMETRIES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
              dict(kernel_size=3, stride=1, padding=1), dict(kernel_size=(3, 2), stride=(1, 2)),
              dict(kernel_size=3, stride=2, ceil_mode=True),
              dict(kernel_size=(3, 2), stride=1, dilation=2, padding=1),
              dict(kernel_size=(2, 3), stride=(3, 1), padding=(1, 1), dilation=(1, 2))]


def _run(x, g, kw, native):
    """(output, indices, input gradient) through the native kernel or the twin."""
    saved = conv_ops._pool_native
    if not native:
        conv_ops._pool_native = lambda x: None
    try:
        t = tb.tensor(x, requires_grad=True)
        out, idx = F.max_pool2d(t, return_indices=True, **kw)
        out.backward(tb.tensor(g.reshape(out.shape).astype(x.dtype)))
        return out.detach().numpy(), idx.numpy(), t.grad.numpy()
    finally:
        conv_ops._pool_native = saved


def _inputs(shape, dtype, kind):
    x = rng.standard_normal(shape).astype(dtype)
    if kind == "ties":
        x = np.maximum(x, 0).round(0)          # ReLU output rounded: many equal maxima
    elif kind == "nan":
        x.flat[rng.choice(x.size, x.size // 7, replace=False)] = np.nan
        x.flat[rng.choice(x.size, x.size // 9, replace=False)] = np.inf
    return x


@pytest.mark.parametrize("kw", GEOMETRIES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["random", "ties", "nan"])
def test_native_and_twin_agree(kw, dtype, kind):
    x = _inputs((2, 3, 9, 8), dtype, kind)
    g = rng.standard_normal(F.max_pool2d(tb.tensor(x), **kw).numel())
    native, twin = _run(x, g, kw, True), _run(x, g, kw, False)
    for a, b, what in zip(native, twin, ("output", "indices", "gradient")):
        assert a.dtype == b.dtype and a.shape == b.shape, what
        if what == "gradient":
            # overlapping windows add into one pixel in a different order (the kernel per
            # output, as torch; the twin per window position): equal up to rounding
            eps = np.finfo(dtype).eps
            np.testing.assert_allclose(a, b, rtol=4 * eps, atol=4 * eps, err_msg=what)
            assert np.array_equal(a != 0, b != 0), "the gradient lands on other pixels"
        else:
            np.testing.assert_array_equal(a, b, err_msg=what)


@pytest.mark.parametrize("kind", ["random", "ties", "nan"])
def test_2x2_windows_at_every_row_width(kind):
    """nn.MaxPool2d(2) on float32 (pool.cpp's one-pass path where the CPU has AVX-512: 16
    outputs a vector): rows of 1 to 21 outputs (every tail length, one and two vectors), odd
    heights and widths, bit for bit against the twin."""
    for w in range(2, 44):
        x = _inputs((2, 3, 5, w), np.float32, kind)
        g = rng.standard_normal(2 * 3 * 2 * (w // 2))
        native, twin = _run(x, g, dict(kernel_size=2), True), _run(x, g, dict(kernel_size=2), False)
        for a, b, what in zip(native, twin, ("output", "indices", "gradient")):
            np.testing.assert_array_equal(a, b, err_msg=f"{what}, width {w}")


def test_native_path_is_taken_and_unbatched_input_works():
    x = rng.standard_normal((3, 6, 6)).astype(np.float32)
    assert conv_ops._pool_native(x[None]) is not None
    assert conv_ops._pool_native(x[None, :, ::2]) is None            # strided: the twin
    assert conv_ops._pool_native(x[None].astype(np.float16)) is None
    g = rng.standard_normal(27)
    native, twin = _run(x, g, dict(kernel_size=2), True), _run(x, g, dict(kernel_size=2), False)
    for a, b in zip(native, twin):
        np.testing.assert_array_equal(a, b)
    assert native[0].shape == (3, 3, 3)


def test_kernel_errors_name_the_problem():
    C = _native.module()
    with pytest.raises(ValueError, match="4-D"):
        C.max_pool2d_forward(np.zeros((2, 2), np.float32), 2, 2, 2, 2, 0, 0, 1, 1, 1, 1)
    with pytest.raises(TypeError, match="float32 or float64"):
        C.max_pool2d_forward(np.zeros((1, 1, 2, 2), np.int32), 2, 2, 2, 2, 0, 0, 1, 1, 1, 1)
    out, arg = C.max_pool2d_forward(np.zeros((1, 1, 2, 2), np.float32), 2, 2, 2, 2, 0, 0, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="outside the 1x1 image"):
        C.max_pool2d_backward(out, arg + 3, 1, 1)
