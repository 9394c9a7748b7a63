"""The index arithmetic of the GPU's im2col/col2im kernels (tensorbrain/_ops/cuda_fused.py), run
on the CPU: each kernel body is compiled with the C++ compiler inside a loop over the output
elements (what CuPy's ElementwiseKernel does with one thread per element) and compared with the
NumPy twins ``conv_columns.im2col2d``/``col2im2d``. The GPU runs the same bodies in
tests/test_cuda_fused.py; this test is what a machine without one can check of them."""
import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from tensorbrain._ops import conv_columns, cuda_fused

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

_GEOM = ", ".join("long long " + name for name in
                  ("nb", "nc", "ih", "iw", "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw", "oh", "ow"))


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    src = f"""
extern "C" void im2col(const float* x, float* out, long long total, {_GEOM}, int fold) {{
    for (long long i = 0; i < total; ++i) {{ float& col = out[i]; {cuda_fused._IM2COL} }}
}}
extern "C" void col2im(const float* cols, float* out, long long total, {_GEOM}, int fold) {{
    for (long long i = 0; i < total; ++i) {{ float& img = out[i]; {cuda_fused._COL2IM} }}
}}
"""
    d = tmp_path_factory.mktemp("cudabodies")
    (d / "k.cpp").write_text(src)
    subprocess.run(["g++", "-O1", "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(d / "k.so"),
                    str(d / "k.cpp")], check=True)
    return ctypes.CDLL(str(d / "k.so"))


def _call(fn, src, out, geom, fold):
    args = [ctypes.c_longlong(v) for v in geom]
    fn(src.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p),
       ctypes.c_longlong(out.size), *args, ctypes.c_int(int(fold)))
    return out


@pytest.mark.parametrize("fold", [True, False])
@pytest.mark.parametrize("k,s,p,d,size", [(3, 1, 1, 1, (7, 6)), (3, 2, 1, 1, (9, 8)), (1, 1, 0, 1, (4, 5)),
                                          (5, 2, 2, 1, (11, 7)), (3, 1, 2, 2, (8, 9)), (2, 3, 0, 1, (8, 10)),
                                          (7, 2, 3, 1, (16, 16))])
def test_kernel_bodies_match_the_numpy_twins(lib, fold, k, s, p, d, size):
    rng = np.random.default_rng(k * 100 + s * 10 + p)
    n, c = 3, 2
    h, w = size
    oh, ow = ((h + 2 * p - d * (k - 1) - 1) // s + 1, (w + 2 * p - d * (k - 1) - 1) // s + 1)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    geom = (k, k, s, s, p, p, d, d, oh, ow)
    want = conv_columns.im2col2d(x, *geom, fold)
    got = _call(lib.im2col, x, np.empty(want.shape, np.float32), (n, c, h, w) + geom, fold)
    assert np.array_equal(got, want)
    cols = rng.standard_normal(want.shape).astype(np.float32)
    want = conv_columns.col2im2d(cols, n, c, h, w, *geom, fold)
    got = _call(lib.col2im, cols, np.empty((n, c, h, w), np.float32), (n, c, h, w) + geom, fold)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)   # the same adds, the same order
