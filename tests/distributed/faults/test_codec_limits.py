"""Finding 10: the object-collective codec refuses what the rest of the stack refuses.

Crafted payloads: an int of 4000 digits (int() of a long digit string is quadratic; Python's own
cap is 4300) and float128/complex256 arrays (no collective moves them). Both are refused on
decode with a ValueError, and encode refuses to produce them; random mutations of a valid
payload decode or raise ValueError, nothing else.
"""
import numpy as np
import pytest

from tensorbrain.distributed import _codec


def _varint(n):
    out = bytearray()
    _codec._varint(n, out)
    return bytes(out)


def test_long_int_payload_is_refused():
    blob = b"i" + _varint(4000) + b"7" * 4000
    with pytest.raises(ValueError, match="digits"):
        _codec.decode(blob)
    with pytest.raises(ValueError, match="digits"):
        _codec.encode(10 ** 4000)
    big = 10 ** 1000 - 1  # 1000 digits: within the limit
    assert _codec.decode(_codec.encode(-big)) == -big


@pytest.mark.parametrize("dt", ["<f16", "<c32", "<M8[s]"])
def test_unsupported_dtype_payload_is_refused(dt):
    blob = b"a" + _varint(len(dt)) + dt.encode() + _varint(1) + _varint(1)
    blob += _varint(np.dtype(dt).itemsize) + b"\0" * np.dtype(dt).itemsize
    with pytest.raises(ValueError):
        _codec.decode(blob)


def test_encode_refuses_float128():
    if np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("longdouble is float64 on this platform")
    with pytest.raises(TypeError):
        _codec.encode(np.zeros(2, np.longdouble))


def test_mutated_payloads_decode_or_raise_value_error(soak):
    good = _codec.encode({"a": [1, 2.5, "x", b"y", (None, True)], "w": np.arange(5, dtype=np.int32),
                          "big": 10 ** 50, "c": 1 + 2j})
    rng = np.random.default_rng(1)
    for i in range(2000 * soak):
        b = bytearray(good)
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(len(b)))] = int(rng.integers(256))
        if rng.random() < 0.2:
            b = b[:int(rng.integers(len(b)))]
        try:
            _codec.decode(bytes(b))
        except ValueError:
            pass
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"mutation {i}: {type(exc).__name__}: {exc}")
