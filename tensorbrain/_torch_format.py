"""torch's checkpoint format (``torch.save``'s zip file, ``.pt``/``.pth``/``.bin``) without torch.

Reading: :func:`load` opens the zip, reads each storage (``archive/data/<key>``) straight into a
NumPy array and unpickles ``archive/data.pkl`` with :class:`_Unpickler`, a restricted unpickler
that **never runs code from the file**: every global the pickle names goes through
``find_class``, which hands out only TensorBrain's own reconstructors for torch's allow-listed
names (the ones ``torch.load(weights_only=True)`` accepts by default: ``_rebuild_tensor_v2``/
``v3``, ``_rebuild_parameter``, the ``*Storage`` classes, dtypes, ``torch.device``,
``torch.Size``, ``OrderedDict``, ``set``, ``_codecs.encode`` for bytes, ...) plus the classes a
user allowed with :func:`tensorbrain.serialization.add_safe_globals` (as torch). Anything else
(``os.system``, ``builtins.eval``, a model class) is refused with an ``UnpicklingError`` naming the
global, before it is called. torch's own rules are in ``torch/_weights_only_unpickler.py``
(https://github.com/pytorch/pytorch/blob/main/torch/_weights_only_unpickler.py).

Writing: :mod:`tensorbrain._torch_save` (``tb.save(..., format="torch")``), with the tables here.

Every dtype crosses: bfloat16 and float8 as ml_dtypes' NumPy dtypes, unsigned integers,
complex. A bfloat16 tensor stays bfloat16.

>>> import io, tensorbrain as tb
>>> buf = io.BytesIO()
>>> tb.save({"w": tb.ones(2, dtype=tb.bfloat16), "step": 3}, buf, format="torch")
>>> _ = buf.seek(0); out = tb.load(buf)
>>> out["w"].dtype, out["step"]
(dtype(bfloat16), 3)
"""
from __future__ import annotations

import _compat_pickle
import collections
import io
import math
import os
import pickle
import struct
import zipfile

import ml_dtypes
import numpy as np

from .tensor import Tensor

# torch dtype name -> NumPy dtype (torch/_utils.py, torch/storage.py)
_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype("float32"), "float64": np.dtype("float64"),
    "float16": np.dtype("float16"), "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "int8": np.dtype("int8"), "int16": np.dtype("int16"), "int32": np.dtype("int32"),
    "int64": np.dtype("int64"), "uint8": np.dtype("uint8"), "uint16": np.dtype("uint16"),
    "uint32": np.dtype("uint32"), "uint64": np.dtype("uint64"), "bool": np.dtype("bool"),
    "complex64": np.dtype("complex64"), "complex128": np.dtype("complex128"),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "float8_e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "float8_e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz),
}
# torch's aliases for the same dtypes (torch.float is torch.float32, ...)
_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "short": "int16",
            "int": "int32", "long": "int64", "cfloat": "complex64", "cdouble": "complex128"}
# the legacy typed storages torch still names in data.pkl: FloatStorage -> float32, ...
_STORAGES: dict[str, str] = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "CharStorage": "int8", "ShortStorage": "int16",
    "IntStorage": "int32", "LongStorage": "int64", "ByteStorage": "uint8",
    "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128"}
_STORAGE_OF = {v: k for k, v in _STORAGES.items()}
_ZIP_MAGIC = b"PK\x03\x04"
_LEGACY_MAGIC = b"\x80\x02\x8a\x0a"  # protocol 2, then torch's magic number as a LONG1
_ALIGN = 64  # torch aligns every storage record to 64 bytes (.storage_alignment)


class _StorageType:
    """What ``find_class('torch', 'FloatStorage')`` returns: a marker carrying the dtype."""

    def __init__(self, dtype: np.dtype | None):
        self.dtype = dtype  # None: torch.storage.UntypedStorage (bytes; the tensor says its dtype)


class _Storage:
    """One storage of the file: its elements as a flat array, where torch had it, and the
    unpickler that read it (the rebuilders, plain functions as torch's, find this load's byte
    order and ``map_location`` through it, not through a global)."""

    def __init__(self, array: np.ndarray, location: str, owner: _Unpickler):
        self.array, self.location, self.owner = array, location, owner


# ***** reading *****
def is_torch_file(f) -> bool:
    """True when ``f`` (a path or a binary file) starts like a torch checkpoint: a zip, or
    torch's legacy pickle format (which :func:`load` then names). The file position is kept."""
    if hasattr(f, "read"):
        if not (hasattr(f, "seek") and hasattr(f, "tell")):
            return False
        pos = f.tell()
        head = f.read(4)
        f.seek(pos)
    else:
        try:
            with open(os.fspath(f), "rb") as fh:
                head = fh.read(4)
        except OSError:
            return False
    return head in (_ZIP_MAGIC, _LEGACY_MAGIC)


def load(f, map_location=None):
    """Read a ``torch.save`` file (zip format) into Tensors, never running code from it.

    Args:
        f: a path or a seekable binary file.
        map_location: as :func:`tensorbrain.load`.

    Returns:
        the saved object, with torch tensors as :class:`~tensorbrain.Tensor` s (Parameters as
        :class:`~tensorbrain.nn.Parameter`) and torch dtypes/devices as TensorBrain's.

    Raises:
        pickle.UnpicklingError: the pickle names a global that is not allowed (named in the
            message); nothing it names has been called.
        ValueError: not a torch zip checkpoint (legacy format, TorchScript archive, damaged).
    """
    where = os.fspath(f) if not hasattr(f, "read") else getattr(f, "name", type(f).__name__)
    if is_torch_file(f) and _head(f) == _LEGACY_MAGIC:
        raise ValueError(f"{where!r} is in torch's legacy (pre-1.6, non-zip) format, which "
                         "tb.load does not read; re-save it with torch.save(obj, path) (the zip "
                         "format, torch's default since 1.6)")
    zf, pkl = _open_zip(f, where)
    with zf:
        prefix = pkl[: -len("data.pkl")]
        order = _read_text(zf, prefix + "byteorder") or "little"
        if order not in ("little", "big"):
            raise ValueError(f"{where!r}: unknown byteorder {order!r}")
        unpickler = _Unpickler(io.BytesIO(zf.read(pkl)), zf, prefix, order, map_location)
        try:
            return unpickler.load()
        except (pickle.UnpicklingError, ValueError):
            raise
        except (EOFError, KeyError, IndexError, TypeError, AttributeError, struct.error) as exc:
            raise ValueError(f"{where!r} has a damaged torch pickle ({type(exc).__name__}: "
                             f"{exc})"[:2000]) from None


def _open_zip(f, where: str) -> tuple[zipfile.ZipFile, str]:
    """The checkpoint's zip and the name of its single ``<archive>/data.pkl``."""
    try:
        zf = zipfile.ZipFile(f if hasattr(f, "read") else os.fspath(f))
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{where!r} is not a readable torch checkpoint: {exc}") from None
    pickles = [n for n in zf.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        kind = ("a TorchScript archive (torch.jit.save): load it with torch.jit.load"
                if any(n.endswith("/constants.pkl") for n in zf.namelist())
                else "a zip file without a single <archive>/data.pkl")
        zf.close()
        raise ValueError(f"{where!r} is not a torch.save checkpoint: it is {kind}")
    return zf, pickles[0]


class PyTorchFileReader:
    """The records of a torch zip archive (``torch.save``'s format), as ``torch.PyTorchFileReader``
    (``torch._C``'s): names relative to the archive folder (``"data.pkl"``, ``"data/0"``,
    ``"byteorder"``...), their bytes, sizes and offsets. It reads; it unpickles nothing.

    Args:
        file_name: a path or a binary file opened for reading.

    Raises:
        ValueError: not a torch.save archive.

    Example:
        >>> import io, tensorbrain as tb
        >>> buf = io.BytesIO()
        >>> tb.save({"w": tb.ones(2)}, buf, format="torch")
        >>> _ = buf.seek(0)
        >>> tb.PyTorchFileReader(buf).get_record("byteorder")
        b'little'
    """

    def __init__(self, file_name):
        self._zf, pkl = _open_zip(file_name, str(getattr(file_name, "name", file_name)))
        self._prefix = pkl[:-len("data.pkl")]

    def _info(self, name: str) -> zipfile.ZipInfo:
        try:
            return self._zf.getinfo(self._prefix + name)
        except KeyError:
            raise RuntimeError(f"PytorchStreamReader failed locating file {name}: file not "
                               f"found") from None

    def get_all_records(self) -> list[str]:
        """Every record's name, in the archive's order."""
        n = len(self._prefix)
        return [i.filename[n:] for i in self._zf.infolist() if i.filename.startswith(self._prefix)]

    def has_record(self, name: str) -> bool:
        """Whether the record ``name`` exists.

        Args:
            name: the record's name.
        """
        return (self._prefix + name) in self._zf.NameToInfo

    def get_record(self, name: str) -> bytes:
        """The record's bytes.

        Args:
            name: the record's name.

        Raises:
            RuntimeError: no such record (torch's message).
        """
        info = self._info(name)
        raw = np.empty(info.file_size, np.uint8)
        _Unpickler._read_record(self._zf, info, raw)
        return raw.tobytes()

    def get_record_size(self, name: str) -> int:
        """The record's size in bytes.

        Args:
            name: the record's name.
        """
        return self._info(name).file_size

    def get_record_header_offset(self, name: str) -> int:
        """Where the record's local zip header starts in the file.

        Args:
            name: the record's name.
        """
        return self._info(name).header_offset

    def get_record_offset(self, name: str) -> int:
        """Where the record's bytes start in the file (past its local header).

        Args:
            name: the record's name.
        """
        info = self._info(name)
        fp = self._zf.fp
        assert fp is not None
        fp.seek(info.header_offset)
        name_len, extra_len = struct.unpack("<HH", fp.read(30)[26:30])
        return info.header_offset + 30 + name_len + extra_len

    get_record_offset_no_read = get_record_offset

    def get_storage_from_record(self, name: str, numel: int, dtype):
        """The record as a storage: a 0-element tensor of ``dtype`` whose
        ``untyped_storage()`` holds ``numel`` elements' bytes, as torch's.

        Args:
            name: the record's name (``"data/0"``).
            numel: the number of elements.
            dtype: their dtype (a storage class reads bytes).
        """
        from .tensor import Tensor
        try:
            dt = np.dtype(dtype)
        except TypeError:
            dt = np.dtype(np.uint8)
        data = np.frombuffer(bytearray(self.get_record(name)), np.uint8)
        arr = data[:int(numel) * dt.itemsize].view(dt)
        return Tensor._wrap(arr)[:0]

    def serialization_id(self) -> str:
        """The archive's ``.data/serialization_id`` record (empty when it has none)."""
        if not self.has_record(".data/serialization_id"):
            return ""
        return self.get_record(".data/serialization_id").decode()


def unsafe_globals(f) -> list[str]:
    """The globals ``f``'s pickle names that :func:`load` would refuse, found by reading the
    pickle's opcodes (nothing is run): torch's ``get_unsafe_globals_in_checkpoint``.

    Args:
        f: a path or a seekable binary file of torch's zip format.

    Returns:
        ``["module.Name", ...]``, sorted.
    """
    import pickletools
    where = os.fspath(f) if not hasattr(f, "read") else getattr(f, "name", type(f).__name__)
    zf, pkl = _open_zip(f, where)
    with zf:
        data = zf.read(pkl)
    from ._checkpoint_io import _allowed as user_allowed
    strings: list = []
    memo: dict = {}
    found: set[str] = set()
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"):
            strings.append(arg)
        elif op.name == "MEMOIZE":
            memo[len(memo)] = strings[-1] if strings else None
        elif op.name in ("BINGET", "LONG_BINGET", "GET"):
            strings.append(memo.get(arg))
        names: tuple = ()
        if op.name == "GLOBAL" and isinstance(arg, str):
            names = tuple(arg.split(" ", 1))
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            names = (strings[-2], strings[-1])
        if len(names) == 2 and all(isinstance(n, str) for n in names):
            module, name = _compat_pickle.NAME_MAPPING.get(names, names)
            module = str(_compat_pickle.IMPORT_MAPPING.get(module, module))
            if _allowed(module, name) is None and not user_allowed(module, name):
                found.add(f"{module}.{name}")
    return sorted(found)


def _head(f) -> bytes:
    if hasattr(f, "read"):
        pos = f.tell()
        head = f.read(4)
        f.seek(pos)
        return head
    with open(os.fspath(f), "rb") as fh:
        return fh.read(4)


def _read_text(zf: zipfile.ZipFile, name: str) -> str | None:
    try:
        return zf.read(name).decode().strip()
    except KeyError:
        return None


class _Unpickler(pickle._Unpickler):  # type: ignore[name-defined]
    """torch's ``data.pkl`` with only allow-listed globals; storages come from the zip.

    Python's own (pure-Python) unpickler, so that ``BUILD`` can be restricted too: it would call
    ``__setstate__`` on, or fill the ``__dict__`` of, whatever object is on the stack (a dtype
    that NumPy shares with the whole process, for one). Only an ``OrderedDict``'s attributes
    (torch's state-dict ``_metadata``) and the objects of classes the user allowed are built;
    anything else is refused, as torch's weights-only unpickler does. ``data.pkl`` is small (the
    tensors' bytes are separate records), so the pure-Python speed does not matter."""

    def __init__(self, file, zf, prefix, byteorder, map_location):
        super().__init__(file)
        self.zf, self.prefix, self.byteorder = zf, prefix, byteorder
        self.map_location = map_location
        self.storages: dict[str, _Storage] = {}
        self.dispatch = {**self.dispatch, pickle.BUILD[0]: _Unpickler.load_build_restricted}

    def load_build_restricted(self):
        state, inst = self.stack[-1], self.stack[-2]
        allowed_dict = type(inst) is collections.OrderedDict and isinstance(state, dict) and \
            all(isinstance(k, str) and not k.startswith("__") for k in state)
        from ._checkpoint_io import _allowed as user_allowed
        cls = type(inst)
        if not (allowed_dict or user_allowed(cls.__module__, cls.__qualname__)):
            raise pickle.UnpicklingError(
                f"tb.load refused to read this torch checkpoint: its pickle sets the state of a "
                f"{cls.__module__}.{cls.__qualname__} (BUILD), which is not allowed. Nothing from "
                f"the file was run")
        pickle._Unpickler.load_build(self)  # type: ignore[attr-defined]

    def find_class(self, module, name):
        # protocol 2 pickles name Python 2 modules (__builtin__.set); map them as pickle does
        module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        found = _allowed(module, name)
        if found is not None:
            return found
        from ._checkpoint_io import _allowed as user_allowed
        if user_allowed(module, name):  # the user opted in (add_safe_globals), as in torch
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"tb.load refused to read this torch checkpoint: its pickle names the global "
            f"{module}.{name}, which is not one of torch's weights-only allowed globals (tensors, "
            f"storages, dtypes, devices, containers). Nothing from the file was run. A state "
            f"dict (torch.save(model.state_dict(), f)) loads; if you trust the file and the name "
            f"is a plain class, allow it with tb.serialization.add_safe_globals([...])")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType)):
            raise pickle.UnpicklingError(f"unsupported persistent id in a torch checkpoint: "
                                         f"{pid!r}"[:300])
        _, kind, key, location, numel = pid
        key = str(key)
        if key not in self.storages:
            self.storages[key] = self._read_storage(key, kind.dtype, str(location), int(numel))
        return self.storages[key]

    def _read_storage(self, key, dtype, location, numel) -> _Storage:
        name = f"{self.prefix}data/{key}"
        try:
            info = self.zf.getinfo(name)
        except KeyError:
            raise ValueError(f"storage {name!r} is missing from the checkpoint") from None
        itemsize = 1 if dtype is None else dtype.itemsize
        if dtype is not None and info.file_size != numel * itemsize:
            raise ValueError(f"storage {name!r} holds {info.file_size} bytes, not {numel} x "
                             f"{dtype} ({numel * itemsize} bytes)")
        raw = np.empty(info.file_size, np.uint8)
        self._read_record(self.zf, info, raw)
        return _Storage(raw if dtype is None else self._typed(raw, dtype), location, self)

    @staticmethod
    def _read_record(zf: zipfile.ZipFile, info: zipfile.ZipInfo, raw: np.ndarray) -> None:
        """A record's bytes into ``raw``. torch's reader checks no CRCs, and
        torch.serialization.skip_data writes records whose CRC does not match their (skipped)
        bytes: a stored record failing its CRC is read directly."""
        try:
            with zf.open(info) as src:
                if src.readinto(raw.data) != info.file_size:  # type: ignore[attr-defined]
                    raise ValueError(f"record {info.filename!r} is truncated")
        except zipfile.BadZipFile as exc:
            if "CRC" not in str(exc) or info.compress_type != zipfile.ZIP_STORED:
                raise
            _Unpickler._read_stored(zf, info, raw)

    @staticmethod
    def _read_stored(zf: zipfile.ZipFile, info: zipfile.ZipInfo, raw: np.ndarray) -> None:
        """The bytes of an uncompressed record, read past its local header, without a CRC."""
        fp = zf.fp
        assert fp is not None
        fp.seek(info.header_offset)
        header = fp.read(30)
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        fp.seek(info.header_offset + 30 + name_len + extra_len)
        if fp.readinto(raw.data) != info.file_size:  # type: ignore[attr-defined]
            raise ValueError(f"storage {info.filename!r} is truncated")

    def _typed(self, raw: np.ndarray, dtype: np.dtype) -> np.ndarray:
        if self.byteorder == "big" and dtype.itemsize > 1:
            return raw.view(dtype.newbyteorder(">")).astype(dtype)
        return raw.view(dtype)

    # torch._utils._rebuild_tensor_v2 / _v3 (v3: an untyped storage and the dtype beside it)
    def rebuild(self, storage, offset, size, stride, requires_grad=False, hooks=None,
                dtype=None):
        flat = storage.array if dtype is None else self._typed(storage.array, dtype)
        size, stride, offset = tuple(int(s) for s in size), tuple(int(s) for s in stride), \
            int(offset)
        if len(size) != len(stride) or min(size + stride + (offset,), default=0) < 0:
            raise ValueError(f"bad tensor geometry: size {size}, stride {stride}, offset {offset}")
        if math.prod(size) and offset + sum((n - 1) * s for n, s in zip(size, stride)) >= flat.size:
            raise ValueError(f"a tensor of size {size}, stride {stride}, offset {offset} reaches "
                             f"past its storage of {flat.size} elements")
        arr = np.lib.stride_tricks.as_strided(flat[offset:] if flat.size else flat, size,
                                              [s * flat.itemsize for s in stride])
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr) if arr.ndim else arr.copy()
        from ._checkpoint_codec import _place
        t = _place(Tensor._wrap(arr), storage.location, self.map_location)
        if requires_grad:
            t.requires_grad_(True)
        return t


def _allowed(module: str, name: str):
    """The reconstructor for an allow-listed global, or None (the name is refused)."""
    if module == "torch._utils":
        return _REBUILDERS.get(name)
    if module == "torch":
        if name in _STORAGES:
            return _StorageType(_DTYPES[_STORAGES[name]])
        dt = _DTYPES.get(_ALIASES.get(name, name))
        if dt is not None:
            return dt
        if name == "device":
            return _device
        if name == "Size":
            return _size
        if name == "Tensor":
            return Tensor
        return None
    if (module, name) == ("torch.storage", "UntypedStorage"):
        return _StorageType(None)
    if (module, name) == ("torch._tensor", "_rebuild_from_type_v2"):
        return _rebuild_from_type_v2
    if (module, name) in (("torch.nn.parameter", "Parameter"), ("torch._tensor", "Tensor")):
        return _parameter_class() if name == "Parameter" else Tensor
    if (module, name) == ("_codecs", "encode"):
        return _encode
    if module == "collections" and name in ("OrderedDict", "Counter"):   # torch's allow-list
        return getattr(collections, name)
    if module == "builtins" and name in _BUILTINS:
        return _BUILTINS[name]
    return None


# torch's weights-only builtins (no list/range: list(range(10**12)) would only cost memory, but
# a protocol-2 pickle never needs them)
_BUILTINS = {"set": set, "frozenset": frozenset, "complex": complex, "slice": slice,
             "bytearray": bytearray}


def _device(*args):
    from ._device import device
    return device(*args)


def _size(*args):
    from ._tensor_base import Size
    return Size(*args)


def _encode(text, encoding="latin1"):
    # protocol 2 pickles bytes as _codecs.encode(str, 'latin1'); nothing else is allowed
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode is allowed only for bytes (latin1)")
    return text.encode("latin1")


def _parameter_class():
    from .nn import Parameter
    return Parameter


def _rebuild_tensor_v2(storage, offset, size, stride, requires_grad=False, hooks=None,
                       metadata=None):
    return _owner(storage).rebuild(storage, offset, size, stride, requires_grad, hooks)


def _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, hooks, dtype,
                       metadata=None):
    if not isinstance(dtype, np.dtype):
        raise pickle.UnpicklingError(f"_rebuild_tensor_v3: {dtype!r} is not a dtype")
    return _owner(storage).rebuild(storage, offset, size, stride, requires_grad, hooks,
                                          dtype)


def _rebuild_parameter(data, requires_grad, hooks=None, state=None):
    if not isinstance(data, Tensor):
        raise pickle.UnpicklingError("_rebuild_parameter: its data is not a tensor")
    return _parameter_class()(data.detach(), requires_grad=bool(requires_grad))


def _rebuild_from_type_v2(func, new_type, args, state):
    # torch wraps tensor subclasses this way; only plain tensors and Parameters are allowed
    if new_type is not Tensor and new_type is not _parameter_class():
        raise pickle.UnpicklingError(f"_rebuild_from_type_v2 of {new_type!r} is not allowed")
    out = func(*args)
    return out if new_type is Tensor or isinstance(out, new_type) else new_type(out)


_REBUILDERS = {"_rebuild_tensor_v2": _rebuild_tensor_v2, "_rebuild_tensor_v3": _rebuild_tensor_v3,
               "_rebuild_parameter": _rebuild_parameter,
               "_rebuild_parameter_with_state": _rebuild_parameter}



def _owner(storage) -> _Unpickler:
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError("a tensor's storage is not a storage of this file")
    return storage.owner
