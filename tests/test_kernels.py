"""tensorbrain._kernels: the C++ kernels and their NumPy twins agree bit for bit.

Every dtype x op runs on random data that covers the whole value range (float16 over all bit
patterns: NaN, inf, subnormals, rounding ties), the C++ result is compared with the NumPy twin
bit for bit, and the twin with an independent reference (exact float64 math rounded once).
"""
import doctest
import zlib

import numpy as np
import pytest

from tensorbrain import _kernels, _native

needs_native = pytest.mark.skipif(not _native.is_available(), reason=f"no native module: {_native.why_unavailable()}")

OPS = sorted(_kernels.OPS)
DTYPES = list(_kernels.DTYPES)
N = 4099  # not a multiple of any vector width, so the scalar tails run too


def _random(dtype: str, n: int, rng) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    if dt == np.float16:  # every bit pattern is fair game: NaN payloads, inf, subnormals, -0
        return rng.integers(0, 1 << 16, n, dtype=np.uint16).view(np.float16)
    scale = 10.0 ** rng.integers(-40 if dt == np.float32 else -300, 39 if dt == np.float32 else 300, n)
    with np.errstate(all="ignore"):  # some draws overflow float32 to inf: wanted
        x = (rng.standard_normal(n) * scale).astype(dt)
    x[:8] = [np.nan, np.inf, -np.inf, -0.0, 0.0, np.finfo(dt).tiny / 4, np.finfo(dt).max, -np.finfo(dt).max]
    return x


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8)


def _valid(dtype, op):
    return not (dtype.startswith("float") and op in _kernels.BITWISE_OPS)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical, except that two NaNs count as equal (payload bits are not part of the API)."""
    if a.dtype.kind == "f":
        both_nan = np.isnan(a) & np.isnan(b)
        return bool(np.all((a.view(f"u{a.itemsize}") == b.view(f"u{b.itemsize}")) | both_nan))
    return np.array_equal(_bits(a), _bits(b))


def _cpu_paths():
    """The loop copies to test: baseline always, avx2+f16c where this CPU runs it."""
    if not _native.is_available():
        return ["baseline"]
    C = _native.module()
    try:
        C._force_cpu_path("avx2+f16c")
        return ["baseline", "avx2+f16c"]
    except ValueError:
        return ["baseline"]
    finally:
        C._force_cpu_path("auto")


@pytest.fixture(params=_cpu_paths())
def cpu_path(request):
    """Run the C++ kernels on one loop copy (reduce.cpp's baseline or reduce_avx2.cpp)."""
    if not _native.is_available():
        pytest.skip(f"no native module: {_native.why_unavailable()}")
    C = _native.module()
    C._force_cpu_path(request.param)
    yield request.param
    C._force_cpu_path("auto")


@pytest.fixture(params=["numpy"] + _cpu_paths())
def native(request):
    """Each body in turn: the NumPy twin (native=False), then each C++ loop copy (native=True)."""
    if request.param == "numpy":
        yield False
        return
    if not _native.is_available():
        pytest.skip(f"no native module: {_native.why_unavailable()}")
    C = _native.module()
    C._force_cpu_path(request.param)
    yield True
    C._force_cpu_path("auto")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_reduce_into_native_matches_numpy_twin(dtype, op, cpu_path):
    rng = np.random.default_rng(zlib.crc32(f"{dtype}-{op}".encode()))
    dst, src = _random(dtype, N, rng), _random(dtype, N, rng)
    # also the same values on both sides (ties for min/max, x+x, x*x) and a sliver of equal pairs
    src[:100] = dst[:100]
    if not _valid(dtype, op):
        for native in (True, False):
            with pytest.raises(TypeError, match=f"op '{op}' needs an integer or bool dtype, got {dtype}"):
                _kernels.reduce_into(dst.copy(), src, op, native=native)
        return
    c, p = dst.copy(), dst.copy()
    _kernels.reduce_into(c, src, op, native=True)
    _kernels.reduce_into(p, src, op, native=False)
    assert _same(c, p), f"{dtype} {op}: C++ and NumPy differ at {np.flatnonzero(~((c == p) | (np.isnan(c) & np.isnan(p)) if c.dtype.kind == 'f' else c != p))[:5]}"


@pytest.mark.parametrize("op", ["sum", "prod"])
def test_float16_rounds_like_exact_math_rounded_once(op, native):
    # Independent reference: the exact float64 result rounded once to half (NumPy's float64->
    # float16 cast is round-to-nearest-even). Sum/product of two halves is exact in float64.
    a = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    b = np.random.default_rng(0).permutation(a)
    with np.errstate(all="ignore"):  # inf - inf, 0 * inf: NaN is the expected result
        ref = getattr(np, {"sum": "add", "prod": "multiply"}[op])(a.astype(np.float64), b.astype(np.float64))
        ref = ref.astype(np.float16)
    got = a.copy()
    _kernels.reduce_into(got, b, op, native=native)
    assert _same(got, ref)


@needs_native
def test_float_to_half_rounding_matches_numpy_on_ties_and_random_bits():
    halves = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)
    ties = (halves[:-1] + (halves[1:] - halves[:-1]) / 2).astype(np.float32)  # exact midpoints
    rng = np.random.default_rng(1)
    random_bits = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([ties, -ties, np.nextafter(ties, np.float32(np.inf)), random_bits,
                        np.float32([65504, 65519.99, 65520, 2.0**-25, 2.0**-24, np.inf, -np.inf, np.nan])])
    with np.errstate(all="ignore"):
        ref = x.astype(np.float16)
    got = _native.module()._float_to_half_bits(x).view(np.float16)
    assert _same(got, ref)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("factor", [0.5, 1 / 3, 1 / 7, 1e-8, 12345.678])
def test_scale_into_matches_reference(dtype, factor, native):
    # Reference: multiply in float32 (float64 for float64) and round once to the dtype.
    x = _random(dtype, N, np.random.default_rng(2))
    compute = np.float64 if dtype == "float64" else np.float32
    with np.errstate(all="ignore"):
        ref = (x.astype(compute) * compute(factor)).astype(dtype)
    got = x.copy()
    _kernels.scale_into(got, factor, native=native)
    assert _same(got, ref)


def test_ufunc_semantics_spot_checks():
    # The semantics the docs promise, on values a reader can check by hand.
    a = np.array([True, True, False, False]); b = np.array([True, False, True, False])
    for op, want in [("sum", a | b), ("prod", a & b), ("min", a & b), ("max", a | b), ("bxor", a ^ b)]:
        got = a.copy(); _kernels.reduce_into(got, b, op); assert got.tolist() == want.tolist(), op
    i = np.array([100, -128], dtype=np.int8)
    _kernels.reduce_into(i, np.array([100, -1], dtype=np.int8), "sum")
    assert i.tolist() == [-56, 127]  # wraps around like NumPy
    f = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    _kernels.reduce_into(f, np.array([np.nan, 2.0, 1.0], dtype=np.float32), "min")
    assert np.isnan(f[0]) and np.isnan(f[1]) and f[2] == 1.0


@pytest.mark.parametrize("native", [False, pytest.param(True, marks=needs_native)])
def test_bad_input_names_shapes_dtypes_and_ops(native):
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"shape mismatch: dst \(2, 3\) vs src \(3, 2\)"):
        _kernels.reduce_into(a, np.zeros((3, 2), np.float32), "sum", native=native)
    with pytest.raises(TypeError, match="dtype mismatch: dst is float32, src is float64"):
        _kernels.reduce_into(a, np.zeros((2, 3), np.float64), "sum", native=native)
    with pytest.raises(ValueError, match="unknown op 'avg'.*sum, prod, min, max, band, bor, bxor"):
        _kernels.reduce_into(a, a.copy(), "avg", native=native)
    with pytest.raises(TypeError, match="unsupported dtype complex64"):
        _kernels.reduce_into(np.zeros(2, np.complex64), np.zeros(2, np.complex64), "sum", native=native)
    with pytest.raises(TypeError, match="src must be a NumPy or CuPy array, got list"):
        _kernels.reduce_into(np.zeros(2), [1.0, 2.0], "sum", native=None if native else False)
    swapped = np.zeros(2, np.dtype(np.float32).newbyteorder())
    with pytest.raises(TypeError, match="unsupported dtype >f4"):
        _kernels.reduce_into(swapped, swapped.copy(), "sum", native=native)
    with pytest.raises(TypeError, match="scale_into: needs a floating dtype.*got int32"):
        _kernels.scale_into(np.zeros(2, np.int32), 0.5, native=native)
    ro = np.zeros(3, np.float32); ro.flags.writeable = False
    with pytest.raises(ValueError, match="dst is read-only"):
        _kernels.reduce_into(ro, np.zeros(3, np.float32), "sum", native=native)


def test_non_contiguous_arrays_take_the_numpy_path():
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    src = np.ones((3, 2))
    view = base[:, ::2]  # strided view: reduced in place through the twin, base sees it
    _kernels.reduce_into(view, src, "sum")
    assert base[:, ::2].tolist() == (np.arange(12.0).reshape(3, 4)[:, ::2] + 1).tolist()
    if _native.is_available():
        with pytest.raises(ValueError, match="needs C-contiguous NumPy arrays"):
            _kernels.reduce_into(view, src, "sum", native=True)


def test_native_false_without_module_is_fine_and_true_says_why(monkeypatch):
    monkeypatch.setenv("TB_NATIVE", "0")
    _native._reset()
    try:
        assert not _native.is_available()
        with pytest.raises(RuntimeError, match="TB_NATIVE=0"):
            _kernels.reduce_into(np.zeros(2), np.zeros(2), "sum", native=True)
        a = np.ones(2); _kernels.reduce_into(a, np.ones(2), "sum"); assert a.tolist() == [2.0, 2.0]
    finally:
        monkeypatch.delenv("TB_NATIVE")
        _native._reset()


def test_docstring_examples():
    assert doctest.testmod(_kernels).failed == 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_cupy_arrays_take_the_xp_path_and_match_numpy(dtype, op):
    from tensorbrain import _xp
    cp = _xp.cupy()
    rng = np.random.default_rng(zlib.crc32(f"gpu-{dtype}-{op}".encode()))
    dst, src = _random(dtype, N, rng), _random(dtype, N, rng)
    d = cp.asarray(dst)
    if not _valid(dtype, op):
        with pytest.raises(TypeError, match="needs an integer or bool dtype"):
            _kernels.reduce_into(d, cp.asarray(src), op)
        return
    _kernels.reduce_into(d, cp.asarray(src), op)  # default dispatch must not send CuPy to C++
    # CuPy's kernels flush float32 subnormals to zero, inputs and results (seen on an H200,
    # 2026-11-29: tiny/4 + 0 gave 0); NumPy keeps them. The reference does the same flushing.
    flush = _flush_subnormals if dtype == "float32" else (lambda a: a)
    ref = flush(dst.copy())
    _kernels.reduce_into(ref, flush(src.copy()), op, native=False)
    ref = flush(ref)
    assert _same(cp.asnumpy(d), ref)
    if dtype.startswith("float"):
        _kernels.scale_into(d, 1 / 3)
        _kernels.scale_into(ref, 1 / 3, native=False)
        assert _same(cp.asnumpy(d), flush(ref))


def _flush_subnormals(a: np.ndarray) -> np.ndarray:
    """``a`` with its subnormals replaced by zeros of their sign, in place."""
    tiny = np.abs(a) < np.finfo(a.dtype).tiny
    a[tiny] = np.copysign(0, a[tiny])
    return a
