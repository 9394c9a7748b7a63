"""The worker wire format: JSON structure + raw arrays over a pipe, round trips and refusals."""
import collections
import os
import threading

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.utils.data import _wire

Pair = collections.namedtuple("Pair", "a b")


def roundtrip(obj):
    r, w = os.pipe()
    structure, arrays = _wire.encode(obj)
    # write from a thread: a frame larger than the pipe buffer needs a concurrent reader
    t = threading.Thread(target=_wire.write_frame, args=(w, {"s": structure}, arrays))
    t.start()
    meta, got = _wire.read_frame(r)
    t.join()
    os.close(r)
    os.close(w)
    return _wire.decode(meta["s"], got)


def test_round_trip_of_every_supported_type():
    obj = {"t": tb.arange(6).reshape(2, 3), "f16": np.ones(3, np.float16), "s": "x", "i": 3,
           "f": float("nan"), "none": None, "b": b"\x00\xff", "bool": True,
           "np": np.float32(2.5), "nested": [(1, 2), Pair(tb.zeros(1), [0.5])],
           "empty": np.zeros((0, 4)), "scalar": np.array(7), 5: "int key"}
    out = roundtrip(obj)
    assert isinstance(out["t"], tb.Tensor) and out["t"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert out["f16"].dtype == np.float16 and out["s"] == "x" and out["i"] == 3
    assert np.isnan(out["f"]) and out["none"] is None and out["b"] == b"\x00\xff"
    assert out["np"] == np.float32(2.5) and out["np"].dtype == np.float32
    assert out["nested"][0] == (1, 2) and isinstance(out["nested"][1], Pair)
    assert out["empty"].shape == (0, 4) and out["scalar"].shape == () and out["scalar"] == 7
    assert out[5] == "int key"


def test_large_arrays_arrive_intact():
    big = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)  # 2 MiB
    np.testing.assert_array_equal(roundtrip({"x": big})["x"], big)


def test_unsendable_objects_are_refused_with_a_hint():
    with pytest.raises(TypeError, match="never pickles"):
        _wire.encode({"x": {1, 2}})
    with pytest.raises(TypeError, match="dtype object"):
        _wire.encode(np.array([object()]))


def test_corrupt_or_closed_streams_raise():
    r, w = os.pipe()
    os.write(w, (1 << 40).to_bytes(8, "little"))
    with pytest.raises(_wire.WireError, match="corrupt"):
        _wire.read_frame(r)
    os.close(w)
    with pytest.raises(EOFError):
        _wire.read_frame(r)
    os.close(r)
