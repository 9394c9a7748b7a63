"""Writing torch's checkpoint format (``tb.save(obj, f, format="torch")``); reading, the dtype
and storage tables: :mod:`tensorbrain._torch_format`.

This module writes the same zip layout torch writes (``data.pkl`` at pickle protocol
2, ``data/<n>`` storages 64-byte aligned, ``byteorder``, ``version``) for plain data: dicts
(``OrderedDict`` too), lists, tuples, numbers, strings, None, Tensors and Parameters, NumPy
arrays (as tensors). The pickle is emitted opcode by opcode (:class:`_Writer`): torch's names
(``torch._utils._rebuild_tensor_v2``) cannot be pickled by reference without importing torch.
``torch.load(f, weights_only=True)`` reads it.
"""
from __future__ import annotations

import collections
import io
import math
import pickle
import struct
import zipfile

import numpy as np

from . import _xp
from ._torch_format import _ALIGN, _DTYPES, _STORAGE_OF
from .tensor import Tensor


def save(obj, f) -> None:
    """Write ``obj`` as torch's zip checkpoint (what ``torch.save`` writes) to a path (atomically)
    or a seekable binary file.

    Args:
        obj: plain data: dicts, lists, tuples, numbers, strings, None, Tensors, Parameters and
            NumPy arrays (written as tensors).
        f: a path or a seekable binary file (``io.BytesIO``).

    Raises:
        TypeError: ``obj`` holds something else (named with its path in ``obj``).
    """
    writer = _Writer()
    pickled = writer.dump(obj)
    if hasattr(f, "write"):
        _write_zip(f, pickled, writer.storages)
        return
    from . import _atomic

    def fill(tmp):
        with open(tmp, "wb") as fh:
            _write_zip(fh, pickled, writer.storages)
    _atomic.write(f, fill)


def _int(n: int) -> bytes:
    if 0 <= n < 256:
        return pickle.BININT1 + bytes([n])
    if 0 <= n < 65536:
        return pickle.BININT2 + struct.pack("<H", n)
    if -(2 ** 31) <= n < 2 ** 31:
        return pickle.BININT + struct.pack("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return pickle.LONG1 + bytes([len(raw)]) + raw


class _Writer:
    """torch's ``data.pkl`` for plain data, emitted opcode by opcode at protocol 2 (as torch)."""

    def __init__(self):
        self.out = io.BytesIO()
        self.storages: list[np.ndarray] = []
        self.keys: dict[int, int] = {}  # id(tensor) -> its storage key: a tensor saved twice is one

    def dump(self, obj) -> bytes:
        self.out.write(pickle.PROTO + b"\x02")
        self.put(obj, "")
        self.out.write(pickle.STOP)
        return self.out.getvalue()

    def glob(self, module: str, name: str) -> None:
        self.out.write(pickle.GLOBAL + f"{module}\n{name}\n".encode())

    def call(self, module: str, name: str, *args) -> None:
        """``module.name(*args)``: GLOBAL, the argument tuple, REDUCE."""
        self.glob(module, name)
        self.out.write(pickle.MARK)
        for a in args:
            a() if callable(a) else self.put(a, "")
        self.out.write(pickle.TUPLE + pickle.REDUCE)

    def put(self, obj, path: str) -> None:
        w = self.out.write
        if obj is None or obj is True or obj is False:
            w(pickle.NONE if obj is None else pickle.NEWTRUE if obj else pickle.NEWFALSE)
        elif isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
            w(_int(int(obj)))
        elif isinstance(obj, (float, np.floating)):
            w(pickle.BINFLOAT + struct.pack(">d", float(obj)))
        elif isinstance(obj, str):
            raw = obj.encode("utf-8", "surrogatepass")
            w(pickle.BINUNICODE + struct.pack("<I", len(raw)) + raw)
        elif isinstance(obj, (Tensor, np.ndarray)) or _xp.is_cupy_array(obj):
            self.tensor(obj)
        elif isinstance(obj, dict):
            if isinstance(obj, collections.OrderedDict):  # a state dict stays an OrderedDict
                self.call("collections", "OrderedDict")
            else:
                w(pickle.EMPTY_DICT)
            if obj:
                w(pickle.MARK)
                for k, v in obj.items():
                    if isinstance(k, bool) or not isinstance(k, (str, int)):
                        raise TypeError(f"tb.save(format='torch'): dict keys must be str or int, "
                                        f"got {type(k).__name__} at {path or '<root>'!r}")
                    self.put(k, path)
                    self.put(v, f"{path}.{k}" if path else str(k))
                w(pickle.SETITEMS)
        elif isinstance(obj, (list, tuple)):
            w(pickle.MARK if isinstance(obj, tuple) else pickle.EMPTY_LIST + pickle.MARK)
            for i, v in enumerate(obj):
                self.put(v, f"{path}.{i}" if path else str(i))
            w(pickle.TUPLE if isinstance(obj, tuple) else pickle.APPENDS)
        else:
            raise TypeError(f"tb.save(format='torch') cannot store a {type(obj).__name__} (at "
                            f"{path or '<root>'!r}): a torch-readable checkpoint holds tensors, "
                            f"NumPy arrays, numbers, strings, None and dicts/lists/tuples of them")

    def tensor(self, t) -> None:
        arr = _xp.to_numpy(t._data if isinstance(t, Tensor) else t)
        name = next((k for k, v in _DTYPES.items() if v == arr.dtype), None)
        if name is None:
            raise TypeError(f"tb.save(format='torch'): torch has no dtype for {arr.dtype}")
        key = self.keys.get(id(t))
        if key is None:
            key = self.keys[id(t)] = len(self.storages)
            self.storages.append(np.ascontiguousarray(arr).reshape(-1))
        location = str(t.device) if isinstance(t, Tensor) else "cpu"
        if location == "cuda":
            location = "cuda:0"
        typed = name in _STORAGE_OF
        shape = tuple(arr.shape)
        strides = tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))
        grad = bool(getattr(t, "requires_grad", False))
        param = type(t).__name__ == "Parameter"

        def storage():
            w = self.out.write
            w(pickle.MARK)
            self.put("storage", "")
            self.glob("torch", _STORAGE_OF[name]) if typed else \
                self.glob("torch.storage", "UntypedStorage")
            self.put(str(key), "")
            self.put(location, "")
            self.put(arr.size if typed else arr.nbytes, "")
            w(pickle.TUPLE + pickle.BINPERSID)

        def hooks():
            self.call("collections", "OrderedDict")

        def rebuilt():
            extra = [lambda: self.glob("torch", name)] if not typed else []
            self.call("torch._utils", "_rebuild_tensor_v2" if typed else "_rebuild_tensor_v3",
                      storage, 0, shape, strides, grad and not param, hooks, *extra)
        if param:
            self.call("torch._utils", "_rebuild_parameter", rebuilt, grad, hooks)
        else:
            rebuilt()


def _write_zip(fh, pickled: bytes, storages: list[np.ndarray], archive: str = "archive") -> None:
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
        _add(zf, f"{archive}/data.pkl", pickled)
        _add(zf, f"{archive}/.format_version", b"1")
        _add(zf, f"{archive}/.storage_alignment", str(_ALIGN).encode())
        _add(zf, f"{archive}/byteorder", b"little")
        for i, arr in enumerate(storages):
            _add(zf, f"{archive}/data/{i}", arr.view(np.uint8).data)
        _add(zf, f"{archive}/version", b"3\n")


def _add(zf: zipfile.ZipFile, name: str, data) -> None:
    """One stored (uncompressed) record whose data starts on a 64-byte boundary, as torch's
    writer aligns them (padding in an extra field with torch's id 'FB')."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.file_size = len(data) if isinstance(data, bytes) else data.nbytes
    zip64 = info.file_size * 1.05 > zipfile.ZIP64_LIMIT  # zipfile's own rule, 20 more bytes
    header = 30 + len(name.encode()) + 4 + (20 if zip64 else 0)
    pad = -(zf.start_dir + header) % _ALIGN
    info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    with zf.open(info, "w", force_zip64=zip64) as dst:
        dst.write(data)
