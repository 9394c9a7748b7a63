"""The object codec carries data only, round-trips exactly, and rejects hostile payloads."""
import pathlib

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.distributed import _codec


@pytest.mark.parametrize("obj", [
    None, True, False, 0, -1, 2 ** 200, -(2 ** 70), 1.5, float("inf"), 1 + 2j, "", "héllo ✓",
    b"", b"\x00\xff", [], (), {}, [1, [2, (3, None)]], {"a": 1, 2: "b", (1, 2): [3.0]},
    {"nested": {"deep": [{"x": (1,)}]}},
])
def test_roundtrip_plain(obj):
    assert _codec.decode(_codec.encode(obj)) == obj
    assert type(_codec.decode(_codec.encode(obj))) is type(obj)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "int32", "int64", "float16",
                                   "float32", "float64", "complex64"])
def test_roundtrip_arrays(dtype):
    a = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
    b = _codec.decode(_codec.encode(a))
    assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b)
    nc = a.T  # non-contiguous
    assert np.array_equal(_codec.decode(_codec.encode(nc)), nc)
    s = _codec.decode(_codec.encode(a.reshape(-1)[1]))  # NumPy scalar
    assert s == a.reshape(-1)[1] and type(s) is type(a.reshape(-1)[1])


def test_roundtrip_tensor():
    t = tb.tensor([[1.0, 2.0]], requires_grad=True)
    u = _codec.decode(_codec.encode({"w": t}))["w"]
    assert u.tolist() == [[1.0, 2.0]] and u.requires_grad and u.dtype == t.dtype


@pytest.mark.parametrize("obj,name", [(object(), "object"), ({1, 2}, "set"),
                                      (np.array(["a"], dtype=object), "dtype object"),
                                      ([1, lambda: 0], "function"), (np.array(["ab"]), "<U2")])
def test_other_objects_are_type_errors(obj, name):
    with pytest.raises(TypeError, match=name):
        _codec.encode(obj)


@pytest.mark.parametrize("blob", [
    b"", b"Z", b"s\x05ab", b"l\xff\xff\xff\xff\x0f", b"d\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",
    b"a\x03<f4\x01\x04\x10" + b"\x00" * 8,          # array claims 16 bytes, has 8
    b"a\x03|O8\x01\x01\x08" + b"\x00" * 8,          # object dtype smuggled in
    b"N" + b"N",                                     # trailing bytes
    b"l\x01" * 300 + b"N",                           # nests too deep
    b"i\xff\xff\x03" + b"9" * 10,                    # absurd integer length
])
def test_hostile_payloads_are_value_errors(blob):
    with pytest.raises(ValueError, match="corrupt"):
        _codec.decode(blob)


def test_no_pickle_in_distributed_code():
    root = pathlib.Path(__file__).resolve().parents[2] / "tensorbrain"
    banned = ["import pickle", "pickle.load", "allow_pickle=True", "cloudpickle"]
    for path in (root / "distributed").rglob("*.py"):
        text = path.read_text()
        for word in banned:
            assert word not in text, f"{word!r} in {path}"
    text = (root / "testing" / "distributed.py").read_text()
    assert not any(word in text for word in banned)
