"""The shm transport's n-ary reduction kernel: C++ (tensorbrain._C.shm_reduce_ranks) and its
NumPy twin (_shm._reduce.reduce_ranks) against a plain NumPy reference, bit for bit."""
import functools

import numpy as np
import pytest

from tensorbrain.distributed import _shm
from tensorbrain.distributed._shm import _reduce

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]
OPS = ["sum", "prod", "min", "max", "band", "bor", "bxor"]
UFUNC = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
         "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}

needs_native = pytest.mark.skipif(not _shm.native_available(),
                                  reason="tensorbrain._C with the shm transport is not built")
IMPLS = ["twin", pytest.param("native", marks=needs_native)]


def reduce_impl(impl):
    if impl == "twin":
        return _reduce.reduce_ranks
    from tensorbrain import _native
    return _native.module().shm_reduce_ranks


def reference(srcs, op):
    """The definition: rank order, NumPy ufuncs; float16 accumulated in float32, rounded once."""
    if srcs[0].dtype == np.float16:
        acc = functools.reduce(UFUNC[op], [s.astype(np.float32) for s in srcs])
        return np.asarray(acc).astype(np.float16)
    return functools.reduce(UFUNC[op], srcs) if len(srcs) > 1 else srcs[0].copy()


def inputs(dtype, n, size=5000, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    out = []
    for _ in range(n):
        if dt.kind == "f":
            x = (rng.standard_normal(size) * 300).astype(dt)
            x[:8] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 65504, 1e-7, -2.5]).astype(dt)
        elif dt.kind == "b":
            x = rng.integers(0, 2, size).astype(bool)
        else:
            info = np.iinfo(dt)
            x = rng.integers(info.min, info.max, size, dtype=dt, endpoint=True)
        out.append(x)
    return out


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_reduce_ranks_matches_numpy(impl, dtype, op):
    fn = reduce_impl(impl)
    for n in (1, 2, 3, 4):
        srcs = inputs(dtype, n, seed=n)
        dst = np.empty_like(srcs[0])
        if op in ("band", "bor", "bxor") and np.dtype(dtype).kind == "f":
            with pytest.raises(ValueError, match="bitwise"):
                fn(dst, srcs, op)
            return
        with np.errstate(all="ignore"):
            want = reference(srcs, op)
            fn(dst, srcs, op)
        np.testing.assert_array_equal(dst, want, err_msg=f"{impl} {dtype} {op} n={n}")


@pytest.mark.parametrize("impl", IMPLS)
def test_float16_accumulates_in_float32_once(impl):
    # 2048 + 1 + 1: float16 steps are 2 at 2048, so a chain of float16 adds stays at 2048
    a, b = np.full(3, 2048, np.float16), np.ones(3, np.float16)
    dst = np.empty(3, np.float16)
    reduce_impl(impl)(dst, [a, b, b], "sum")
    assert dst.tolist() == [2050.0] * 3
    assert (a + b + b).tolist() == [2048.0] * 3


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_in_place_destination_is_any_source(impl, k):
    srcs = inputs("float32", 4, size=9000, seed=7)
    want = reference(srcs, "sum")
    srcs = [s.copy() for s in srcs]
    reduce_impl(impl)(srcs[k], srcs, "sum")
    np.testing.assert_array_equal(srcs[k], want)


@needs_native
def test_native_and_twin_agree_on_random_shapes():
    rng = np.random.default_rng(3)
    for size in (0, 1, 7, 2047, 2048, 2049, 100_003):
        srcs = [rng.standard_normal(size).astype(np.float16) for _ in range(3)]
        a, b = np.empty(size, np.float16), np.empty(size, np.float16)
        reduce_impl("native")(a, srcs, "sum")
        reduce_impl("twin")(b, srcs, "sum")
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("impl", IMPLS)
def test_bad_op_is_a_clear_error(impl):
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="unknown reduce op 'mean'"):
        reduce_impl(impl)(x, [x, x], "mean")
