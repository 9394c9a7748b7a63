"""The packed GEMM (csrc/kernels/gemm.cpp, gemm_fma.cpp, gemm_avx512.cpp) against its NumPy twin
(tensorbrain/_ops/packed_gemm.py) and against a float64 product: every register-tile height
(1-6 rows and the splits of larger row counts), column blocks that end inside a 16-column panel,
transposed (strided) operands, accumulation, on the AVX-512, AVX2/FMA and scalar bodies."""
import numpy as np
import pytest

from tensorbrain import _native
from tensorbrain._ops import packed_gemm

pytestmark = pytest.mark.skipif(not _native.is_available(), reason="tensorbrain._C not built")
rng = np.random.default_rng(1)


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 6, 7, 13, 20])
@pytest.mark.parametrize("k,n,groups", [(1, 16, 1), (9, 5, 1), (37, 51, 3), (200, 800, 4), (64, 68, 4)])
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("layout", ["transposed", "contiguous"])
def test_native_matches_twin_and_float64(cpu_path, m, k, n, groups, accumulate, layout):
    C = cpu_path
    a = rng.standard_normal((m, k)).astype(np.float32)
    bt = rng.standard_normal((n, k)).astype(np.float32)
    b = bt.T                                          # (k, n), strided: packing reads any strides
    if layout == "contiguous":                        # rows of 16 in a row: the other packing loop
        b = np.ascontiguousarray(b)
    out0 = rng.standard_normal((groups, m, n // groups)).astype(np.float32)
    ref = (a.astype(np.float64) @ b.astype(np.float64)).reshape(m, groups, n // groups).transpose(1, 0, 2)
    if accumulate:
        ref = ref + out0
    outs = []
    for mod in (C, packed_gemm):
        w = mod.PackedMatrix(b, groups)
        assert (w.k, w.n, w.groups) == (k, n, groups)
        out = out0.copy()
        mod.gemm_packed(a, w, out, accumulate)
        outs.append(out)
    # float32 sums of k products in any order: within k ulps of sum |a| |b| of the exact value
    bound = 2 * k * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(b)).reshape(m, groups, -1).transpose(1, 0, 2) \
        + np.finfo(np.float32).eps * np.abs(ref)
    for out in outs:
        assert np.all(np.abs(out - ref) <= bound)


def test_group_order_and_scale_pack_what_a_permuted_scaled_copy_packs(cpu_path):
    """order/scale (an LSTM's gates in its kernels' order, the sigmoid gates halved) give the
    bits of packing the permuted, scaled copy, native and twin."""
    C = cpu_path
    a = rng.standard_normal((7, 30)).astype(np.float32)
    w = rng.standard_normal((4 * 24, 30)).astype(np.float32)          # (4H, K): torch's weight
    order, scale = (3, 0, 1, 2), (0.5, 0.5, 0.5, 1.0)
    copy = np.concatenate([w[g * 24:(g + 1) * 24] * s for g, s in zip(order, scale)])
    for mod in (C, packed_gemm):
        got, want = np.empty((4, 7, 24), np.float32), np.empty((4, 7, 24), np.float32)
        mod.gemm_packed(a, mod.PackedMatrix(w.T, 4, order, scale), got)
        mod.gemm_packed(a, mod.PackedMatrix(copy.T, 4), want)
        np.testing.assert_array_equal(got, want)
        with pytest.raises(ValueError, match="order must list each of the 4 groups once"):
            mod.PackedMatrix(w.T, 4, (0, 1, 1, 2))
        with pytest.raises(ValueError, match=r"one value per group \(4\), got 3"):
            mod.PackedMatrix(w.T, 4, None, (1.0, 1.0, 1.0))


def test_empty_sum_and_rows(cpu_path):
    C = cpu_path
    w = C.PackedMatrix(np.zeros((0, 8), np.float32), 2)
    out = np.full((2, 3, 4), 7.0, np.float32)
    C.gemm_packed(np.zeros((3, 0), np.float32), w, out)
    assert not out.any()
    C.gemm_packed(np.zeros((0, 0), np.float32), w, np.zeros(0, np.float32))


def test_bad_arguments_name_the_shapes():
    C = _native.module()
    b = np.ones((4, 6), np.float32)
    for mod in (C, packed_gemm):
        with pytest.raises(ValueError, match="positive divisor of N = 6, got 4"):
            mod.PackedMatrix(b, 4)
        with pytest.raises(ValueError, match=r"2-D"):
            mod.PackedMatrix(np.ones(6, np.float32))
        w = mod.PackedMatrix(b, 2)
        with pytest.raises(ValueError, match=r"\(M, 4\)"):
            mod.gemm_packed(np.ones((2, 5), np.float32), w, np.empty((2, 2, 3), np.float32))
        with pytest.raises(ValueError, match=r"M \* N = 12 values, laid out \(2, M, 3\)"):
            mod.gemm_packed(np.ones((2, 4), np.float32), w, np.empty((2, 2, 2), np.float32))
    with pytest.raises(TypeError):                      # float32 only, no silent cast
        C.PackedMatrix(np.ones((4, 6)), 2)
    with pytest.raises(ValueError, match="read-only"):
        out = np.empty((2, 2, 3), np.float32)
        out.flags.writeable = False
        C.gemm_packed(np.ones((2, 4), np.float32), C.PackedMatrix(b, 2), out)
