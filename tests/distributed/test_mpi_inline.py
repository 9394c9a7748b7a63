"""The mpi backend's inline check message, reduced by the C function MPI calls
(``csrc/kernels/fingerprint.cpp`` through ``tensorbrain._C._fp_reduce``, no MPI needed): two
ranks' messages that agree give the reduced payload (against NumPy); any difference in the
fingerprint marks the result and leaves the payload alone. The MPI side runs in
tests/distributed/test_mpi.py (mpi_worker's check_inline_* checks).
"""
import numpy as np
import pytest

from tensorbrain import _native

pytestmark = pytest.mark.skipif(not _native.is_available(), reason="needs tensorbrain._C")


def C():
    return _native.module()


def message(words, control, payload=b""):
    m = np.zeros(C().FP_MESSAGE_BYTES // 8, np.int64)
    m[:4] = words
    m[4] = control
    raw = m.view(np.uint8)
    raw[40:40 + len(payload)] = np.frombuffer(payload, np.uint8)
    return m


def control(dtype, op):
    return (C().FP_DTYPES.index(np.dtype(dtype).name) + 1) << 8 | C().FP_OPS.index(op) << 16


UFUNCS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
          "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int16", "int32", "int64",
                                   "uint8"])
@pytest.mark.parametrize("op", list(UFUNCS))
def test_agreeing_messages_reduce_their_payload_like_numpy(dtype, op):
    if np.dtype(dtype).kind == "f" and op in ("band", "bor", "bxor"):
        pytest.skip("bitwise ops are refused for floats before a message is built")
    rng = np.random.default_rng(7)
    n = C().FP_PAYLOAD_BYTES // np.dtype(dtype).itemsize
    a = (rng.standard_normal(n) * 50).astype(dtype)
    b = (rng.standard_normal(n) * 50).astype(dtype)
    words = (12, 0x10201, n, 0)
    mine, theirs = message(words, control(dtype, op), b.tobytes()), \
        message(words, control(dtype, op), a.tobytes())
    C()._fp_reduce(theirs, mine)
    assert mine[4] & 1 == 0
    np.testing.assert_array_equal(mine[:4], words)
    got = mine.view(np.uint8)[40:40 + n * np.dtype(dtype).itemsize].view(dtype)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, UFUNCS[op](b, a))


def test_bool_payload_is_logical():
    a = np.array([0, 1, 1, 0, 1], bool)
    b = np.array([0, 0, 1, 1, 1], bool)
    for op, ref in (("sum", a | b), ("prod", a & b), ("bxor", a ^ b)):
        mine = message((1, 2, 5, 0), control(bool, op), b.tobytes())
        C()._fp_reduce(message((1, 2, 5, 0), control(bool, op), a.tobytes()), mine)
        np.testing.assert_array_equal(mine.view(np.uint8)[40:45].view(bool), ref)


@pytest.mark.parametrize("word", [0, 1, 2, 3, 4])
def test_any_difference_marks_the_result_and_leaves_the_payload(word):
    words = [5, 0x30201, 2, 0]
    ctl = control("float32", "sum")
    payload = np.array([1.5, 2.5], np.float32).tobytes()
    other = list(words) + [ctl]
    other[word] += 1 << 9  # another seq, kind/op/dtype, count, shapes hash or control word
    mine = message(words, ctl, payload)
    C()._fp_reduce(message(other[:4], other[4], payload), mine)
    assert mine[4] & 1
    np.testing.assert_array_equal(mine.view(np.uint8)[40:48].view(np.float32), [1.5, 2.5])
    # ... and a marked message marks every result it is reduced into
    third = message(words, ctl, payload)
    C()._fp_reduce(mine, third)
    assert third[4] & 1


def test_all_to_all_balances_are_summed_with_wraparound():
    summed = 2
    mine = message((3, 8, -1, 2**63 - 1), summed)
    C()._fp_reduce(message((3, 8, -1, 2), summed), mine)
    assert mine[4] & 1 == 0 and mine[3] == -(2**63) + 1  # wrapped, not saturated
    mine = message((3, 8, -1, 7), summed)
    C()._fp_reduce(message((3, 8, -1, -7), summed), mine)
    assert mine[3] == 0 and mine[4] & 1 == 0


def test_a_payload_that_does_not_fit_is_refused_not_read():
    n = C().FP_PAYLOAD_BYTES // 4 + 1
    mine = message((1, 2, n, 0), control("float32", "sum"))
    C()._fp_reduce(message((1, 2, n, 0), control("float32", "sum")), mine)
    assert mine[4] & 1
    mine = message((1, 2, 2, 0), control("float32", "band"))  # bitwise on floats
    C()._fp_reduce(message((1, 2, 2, 0), control("float32", "band")), mine)
    assert mine[4] & 1


def test_the_buffers_must_be_whole_messages():
    with pytest.raises(ValueError, match="FP_MESSAGE_BYTES"):
        C()._fp_reduce(np.zeros(4, np.int64), np.zeros(4, np.int64))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["min", "max"])
def test_the_float_min_max_mpi_functions_propagate_nan_like_numpy(dtype, op):
    # csrc/kernels/fingerprint.cpp's MPI_User_functions for float MIN/MAX, called as MPI calls
    # them (invec, inoutvec, len, datatype): MPICH's own MPI_MIN/MAX let a NaN vanish on some
    # ranks and not others
    import ctypes
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
                          ctypes.c_void_p)(C().minmax_addresses()[(dtype, op)])
    a = np.array([np.nan, 1.0, -np.inf, 3.0, np.nan, 0.0], dtype)
    b = np.array([2.0, np.nan, 5.0, -1.0, np.nan, -0.0], dtype)
    ref = (np.minimum if op == "min" else np.maximum)(b, a)
    inout = b.copy()
    fn(a.ctypes.data, inout.ctypes.data, ctypes.byref(ctypes.c_int(len(a))), None)
    np.testing.assert_array_equal(inout, ref)
