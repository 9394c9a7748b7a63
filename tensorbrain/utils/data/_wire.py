"""The DataLoader's worker-to-main wire format: JSON structure + raw array bytes, never pickle.

A message is one frame::

    8 bytes   little-endian length of the JSON header
    header    {"s": <structure>, "a": [[dtype, shape], ...], ...}  (UTF-8 JSON)
    payload   the arrays' bytes, back to back, in header order

The structure is a tree of small dicts: ``{"T": i}`` a tensor (array ``i``), ``{"N": i}`` a
NumPy array, ``{"g": [dtype, value]}`` a NumPy scalar, ``{"v": x}`` a JSON value (int, float,
str, bool, None), ``{"b": i}`` bytes, ``{"l": [...]}`` / ``{"t": [...]}`` a list / tuple,
``{"d": [[key, node], ...]}`` a dict and ``{"nt": "module:Name", "t": [...]}`` a namedtuple
(rebuilt from the class, which the forked worker and the main process share). Anything else is
refused with a clear error in the worker, because it could only travel by pickle.

The receiver reads each array straight into a fresh NumPy buffer (``readinto``): one copy from
the pipe, none after.
"""
from __future__ import annotations

import importlib
import json
import os
import struct

import numpy as np

from ... import _xp
from ...tensor import Tensor

_LEN = struct.Struct("<Q")
MAX_HEADER = 64 << 20  # a header past this is corruption, not data


class WireError(RuntimeError):
    pass


def encode(obj):
    """``(structure, arrays)`` for ``obj``; raises TypeError for what cannot travel."""
    arrays = []

    def enc(x):
        if isinstance(x, Tensor):
            arrays.append(_c_order(_xp.to_numpy(x._data)))
            return {"T": len(arrays) - 1}
        if isinstance(x, np.ndarray):
            if x.dtype.kind in "OV":
                raise TypeError(f"a NumPy array of dtype {x.dtype} cannot leave a DataLoader "
                                f"worker without pickle; convert it in the dataset")
            arrays.append(_c_order(x))
            return {"N": len(arrays) - 1}
        if isinstance(x, np.generic):
            return {"g": [x.dtype.str, x.item()]}
        if x is None or isinstance(x, (bool, int, float, str)):
            return {"v": x}
        if isinstance(x, (bytes, bytearray)):
            arrays.append(np.frombuffer(bytes(x), dtype=np.uint8))
            return {"b": len(arrays) - 1}
        if isinstance(x, tuple) and hasattr(x, "_fields"):
            cls = type(x)
            return {"nt": f"{cls.__module__}:{cls.__qualname__}", "t": [enc(v) for v in x]}
        if isinstance(x, tuple):
            return {"t": [enc(v) for v in x]}
        if isinstance(x, list):
            return {"l": [enc(v) for v in x]}
        if isinstance(x, dict):
            return {"d": [[enc(k), enc(v)] for k, v in x.items()]}
        raise TypeError(f"a {type(x).__module__}.{type(x).__qualname__} cannot be sent from a "
                        f"DataLoader worker: batches travel as tensors, NumPy arrays, numbers, "
                        f"strings, bytes, None and lists/tuples/dicts of them (TensorBrain never "
                        f"pickles). Convert it in your dataset or collate_fn")

    return enc(obj), arrays


def _c_order(arr):
    # not np.ascontiguousarray: it turns 0-d arrays into 1-d ones
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def decode(structure, arrays):
    """The object ``encode`` described."""

    def dec(n):
        if "T" in n:
            return Tensor._wrap(arrays[n["T"]])
        if "N" in n:
            return arrays[n["N"]]
        if "v" in n:
            return n["v"]
        if "g" in n:
            return np.dtype(n["g"][0]).type(n["g"][1])
        if "b" in n:
            return arrays[n["b"]].tobytes()
        if "nt" in n:
            mod, _, qual = n["nt"].partition(":")
            values = [dec(v) for v in n["t"]]
            try:
                cls = importlib.import_module(mod)
                for part in qual.split("."):
                    cls = getattr(cls, part)
                return cls(*values)
            except Exception:
                return tuple(values)
        if "t" in n:
            return tuple(dec(v) for v in n["t"])
        if "l" in n:
            return [dec(v) for v in n["l"]]
        if "d" in n:
            return {_hashable(dec(k)): dec(v) for k, v in n["d"]}
        raise WireError(f"unknown node in a DataLoader message: {n!r}")

    return dec(structure)


def _hashable(k):
    return tuple(k) if isinstance(k, list) else k


# ***** framing over a file descriptor *****
def pack(meta: dict, arrays) -> list:
    """The frame for ``meta`` (a JSON-able dict) and ``arrays`` as a list of buffers."""
    meta = dict(meta)
    meta["a"] = [[a.dtype.str, list(a.shape)] for a in arrays]
    header = json.dumps(meta, separators=(",", ":"), allow_nan=True).encode()
    return [_LEN.pack(len(header)) + header] + [_bytes_view(a) for a in arrays if a.nbytes]


def _bytes_view(arr):
    """A flat byte view of a C-contiguous array (any dtype, any rank, 0-d included)."""
    return memoryview(arr.reshape(-1).view(np.uint8))


def write_frame(fd: int, meta: dict, arrays=()) -> None:
    """Write one whole frame to ``fd`` (blocking)."""
    for buf in pack(meta, arrays):
        view = memoryview(buf)
        while view.nbytes:
            n = os.write(fd, view)
            view = view[n:]


def _read_exact_into(fd, view):
    while view.nbytes:
        n = os.readv(fd, [view])
        if n == 0:
            raise EOFError("the other end closed the pipe")
        view = view[n:]


def read_frame(fd: int):
    """``(meta, arrays)`` of the next frame on ``fd``; EOFError when the writer is gone."""
    head = bytearray(_LEN.size)
    _read_exact_into(fd, memoryview(head))
    (length,) = _LEN.unpack(head)
    if length > MAX_HEADER:
        raise WireError(f"DataLoader message header of {length} bytes: the stream is corrupt")
    raw = bytearray(length)
    _read_exact_into(fd, memoryview(raw))
    meta = json.loads(raw)
    arrays = []
    for dtype, shape in meta.pop("a"):
        arr = np.empty(shape, dtype=np.dtype(dtype))
        if arr.nbytes:
            _read_exact_into(fd, _bytes_view(arr))
        arrays.append(arr)
    return meta, arrays
