"""The safe object codec of the object collectives (``broadcast_object_list`` and friends).

PyTorch pickles these objects, so a peer (or anyone who can reach the port) can run code in every
rank. This codec carries data only: ``None``, bools, ints (any size), floats, complex, str,
bytes/bytearray, lists, tuples, dicts (keys of any of these types), NumPy arrays and scalars of
numeric/bool dtype, and TensorBrain Tensors (as their host data, dtype, device and
``requires_grad``). Anything else is a TypeError naming the type and where it sits in the object.

Format: one tag byte per value, lengths as unsigned LEB128 varints, arrays as dtype string,
shape and raw C-order little-endian bytes. Decoding checks every length against the bytes left
and nests at most ``MAX_DEPTH`` deep, so a hostile payload can neither allocate without bound nor
recurse the interpreter to death.

>>> import numpy as np
>>> blob = encode({"step": 3, "loss": 0.25, "ids": (1, 2), "w": np.arange(3, dtype=np.int16)})
>>> out = decode(blob)
>>> out["step"], out["ids"], out["w"].dtype, out["w"].tolist()
(3, (1, 2), dtype('int16'), [0, 1, 2])
>>> encode(object())
Traceback (most recent call last):
  ...
TypeError: object collectives carry data only (None, bool, int, float, complex, str, bytes, list, tuple, dict, NumPy arrays, Tensors); got object at <root>
"""
from __future__ import annotations

import struct

import numpy as np

MAX_DEPTH = 200
# The same limits as the rest of the stack: ints of at most MAX_INT_DIGITS decimal digits
# (int() of a long digit string costs quadratic time; Python's own cap is 4300), and only the
# dtypes the collectives move (backends/tcp/wire.py _DTYPES): no float128/complex256, no datetimes.
MAX_INT_DIGITS = 1024
_DTYPE_NAMES = frozenset({"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                          "uint64", "float16", "float32", "float64", "complex64", "complex128"})
_ALLOWED = "None, bool, int, float, complex, str, bytes, list, tuple, dict, NumPy arrays, Tensors"
_ARRAY_KINDS = "biufc"


def _varint(n: int, out: bytearray) -> None:
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def encode(obj) -> bytes:
    """Serialise ``obj`` (data only; see the module docstring) to bytes."""
    out = bytearray()
    _enc(obj, out, "<root>", 0)
    return bytes(out)


def _enc(obj, out: bytearray, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"object nests deeper than {MAX_DEPTH} levels at {path}")
    if obj is None:
        out += b"N"
    elif obj is True or obj is False:
        out += b"T" if obj else b"F"
    elif isinstance(obj, np.generic) and obj.dtype.kind in _ARRAY_KINDS:
        out += b"g"  # NumPy scalars keep their type (np.float64 is also a float)
        _enc_array(np.asarray(obj), out, path)
    elif type(obj) is int or (isinstance(obj, int) and not isinstance(obj, bool)):
        if obj.bit_length() > MAX_INT_DIGITS * 3.33:  # before str(): no quadratic conversion
            raise ValueError(f"object collectives carry ints of at most {MAX_INT_DIGITS} digits; "
                             f"got one of {obj.bit_length()} bits at {path}")
        text = str(int(obj)).encode()
        if len(text.lstrip(b"-")) > MAX_INT_DIGITS:
            raise ValueError(f"object collectives carry ints of at most {MAX_INT_DIGITS} digits; "
                             f"got {len(text)} at {path}")
        out += b"i"
        _varint(len(text), out)
        out += text
    elif type(obj) is float or isinstance(obj, float):
        out += b"f" + struct.pack("<d", obj)
    elif isinstance(obj, complex):
        out += b"c" + struct.pack("<dd", obj.real, obj.imag)
    elif isinstance(obj, str):
        data = obj.encode("utf-8", "surrogatepass")
        out += b"s"
        _varint(len(data), out)
        out += data
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)
        out += b"b"
        _varint(len(data), out)
        out += data
    elif isinstance(obj, (list, tuple)):
        out += b"l" if isinstance(obj, list) else b"t"
        _varint(len(obj), out)
        for i, item in enumerate(obj):
            _enc(item, out, f"{path}[{i}]", depth + 1)
    elif isinstance(obj, dict):
        out += b"d"
        _varint(len(obj), out)
        for k, v in obj.items():
            _enc(k, out, f"{path} key {k!r}", depth + 1)
            _enc(v, out, f"{path}[{k!r}]", depth + 1)
    elif isinstance(obj, np.ndarray):
        out += b"a"
        _enc_array(obj, out, path)
    elif _is_tensor(obj):
        from tensorbrain import _xp
        out += b"x"
        out += b"T" if obj.requires_grad else b"F"
        dev = str(obj.device).encode()
        _varint(len(dev), out)
        out += dev
        _enc_array(_xp.to_numpy(obj._data), out, path)
    else:
        from tensorbrain._real_torch import is_pytorch_object, pytorch_object_message
        if is_pytorch_object(obj):
            raise TypeError(pytorch_object_message(obj, f"object collective (at {path})"))
        raise TypeError(f"object collectives carry data only ({_ALLOWED}); got "
                        f"{type(obj).__name__} at {path}")


def _enc_array(arr: np.ndarray, out: bytearray, path: str) -> None:
    if arr.dtype.kind not in _ARRAY_KINDS or arr.dtype.name not in _DTYPE_NAMES:
        raise TypeError(f"object collectives carry arrays of {', '.join(sorted(_DTYPE_NAMES))} "
                        f"only; got dtype {arr.dtype} at {path}")
    arr = np.asarray(arr, dtype=arr.dtype.newbyteorder("<"), order="C")
    dt = arr.dtype.str.encode()
    _varint(len(dt), out)
    out += dt
    _varint(arr.ndim, out)
    for d in arr.shape:
        _varint(d, out)
    data = arr.tobytes()
    _varint(len(data), out)
    out += data


def _is_tensor(obj) -> bool:
    from tensorbrain.tensor import Tensor
    return isinstance(obj, Tensor)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes):
        self.buf, self.pos = memoryview(buf), 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError(f"corrupt object payload: needs {n} bytes at offset {self.pos}, "
                             f"{len(self.buf) - self.pos} left")
        view = self.buf[self.pos:self.pos + n]
        self.pos += n
        return view

    def varint(self) -> int:
        n = shift = 0
        while True:
            byte = self.take(1)[0]
            n |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return n
            shift += 7
            if shift > 70:
                raise ValueError("corrupt object payload: varint too long")


def decode(data) -> object:
    """The object :func:`encode` wrote; ValueError on a corrupt or truncated payload."""
    r = _Reader(bytes(data))
    obj = _dec(r, 0)
    if r.pos != len(r.buf):
        raise ValueError(f"corrupt object payload: {len(r.buf) - r.pos} trailing bytes")
    return obj


def _dec(r: _Reader, depth: int):
    if depth > MAX_DEPTH:
        raise ValueError(f"corrupt object payload: nests deeper than {MAX_DEPTH}")
    tag = bytes(r.take(1))
    if tag == b"N":
        return None
    if tag == b"T":
        return True
    if tag == b"F":
        return False
    if tag == b"i":
        n = r.varint()
        if n > MAX_INT_DIGITS + 1:  # digits and a sign
            raise ValueError(f"corrupt object payload: integer of more than {MAX_INT_DIGITS} "
                             "digits")
        return int(bytes(r.take(n)))
    if tag == b"f":
        return struct.unpack("<d", r.take(8))[0]
    if tag == b"c":
        re_, im = struct.unpack("<dd", r.take(16))
        return complex(re_, im)
    if tag == b"s":
        return bytes(r.take(r.varint())).decode("utf-8", "surrogatepass")
    if tag == b"b":
        return bytes(r.take(r.varint()))
    if tag in (b"l", b"t"):
        n = r.varint()
        if n > len(r.buf) - r.pos:  # every item takes at least one byte
            raise ValueError("corrupt object payload: list longer than the payload")
        items = [_dec(r, depth + 1) for _ in range(n)]
        return items if tag == b"l" else tuple(items)
    if tag == b"d":
        n = r.varint()
        if 2 * n > len(r.buf) - r.pos:
            raise ValueError("corrupt object payload: dict longer than the payload")
        out = {}
        for _ in range(n):
            k = _dec(r, depth + 1)
            try:
                hash(k)
            except TypeError:
                raise ValueError("corrupt object payload: unhashable dict key") from None
            out[k] = _dec(r, depth + 1)
        return out
    if tag == b"a":
        return _dec_array(r)
    if tag == b"g":
        return _dec_array(r)[()]
    if tag == b"x":
        import tensorbrain as tb
        requires_grad = bytes(r.take(1)) == b"T"
        dev = bytes(r.take(r.varint())).decode()
        arr = _dec_array(r)
        t = tb.from_numpy(arr)
        if dev != "cpu":
            t = t.to(dev)
        t.requires_grad = requires_grad
        return t
    raise ValueError(f"corrupt object payload: unknown tag {tag!r} at offset {r.pos - 1}")


def _dec_array(r: _Reader) -> np.ndarray:
    dt_text = bytes(r.take(r.varint())).decode("ascii", "replace")
    try:
        dtype = np.dtype(dt_text)
    except TypeError:
        raise ValueError(f"corrupt object payload: bad dtype {dt_text!r}") from None
    if dtype.kind not in _ARRAY_KINDS or dtype.hasobject or dtype.name not in _DTYPE_NAMES:
        raise ValueError(f"corrupt object payload: dtype {dt_text!r} is not one the "
                         "collectives carry")
    ndim = r.varint()
    if ndim > 64:
        raise ValueError("corrupt object payload: more than 64 dimensions")
    shape = tuple(r.varint() for _ in range(ndim))
    nbytes = r.varint()
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize if shape else dtype.itemsize
    if nbytes != expected:
        raise ValueError(f"corrupt object payload: array of shape {shape} {dtype} needs "
                         f"{expected} bytes, header says {nbytes}")
    data = r.take(nbytes)
    return np.frombuffer(bytes(data), dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))
