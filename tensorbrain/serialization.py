"""Checkpoints: ``tb.save(obj, path)`` / ``tb.load(path, map_location=None)``. Never pickle.

File format: a standard safetensors file. Every tensor or NumPy array in ``obj`` is stored as a
named safetensors entry; the structure around them (dicts, lists, tuples, numbers, strings, None)
is JSON in the safetensors ``__metadata__`` under the key ``tensorbrain``. Entries are named after
their path in ``obj`` (``model.fc.weight``), so a bare model state dict saved here has exactly
PyTorch's key names and loads with ``safetensors.torch.load_file`` into the same torch model.

Writes are atomic: the file is written next to its destination under a temporary name, flushed
and fsynced, then renamed over the destination (and the folder fsynced), so a crash mid-save
leaves the previous checkpoint intact.

>>> import tensorbrain as tb, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "ckpt.safetensors")
>>> tb.save({"w": tb.ones(2), "epoch": 3}, path)
>>> tb.load(path)["epoch"]
3
"""
from __future__ import annotations

import json
import math
import os
import threading

import numpy as np

from .tensor import Tensor
from . import _atomic, _checkpoint_io, _torch_format, _torch_save
from ._checkpoint_codec import FORMAT, _decode, _Encoder, _place, _safetensors
from ._checkpoint_io import (add_safe_globals, clear_safe_globals, get_safe_globals,  # noqa: F401
                             safe_globals)

_tls = threading.local()


class skip_data:
    """A block in which :func:`save` writes no tensor bytes and :func:`load` reads none, as
    ``torch.serialization.skip_data``: a save writes every tensor with its shape and dtype but
    zeros for its values (the space is kept, to be filled in a separate pass); a load gives the
    tensors their shapes and dtypes without the saved values (zeros here; torch leaves them
    uninitialised). Tensors nested in dicts, lists and tuples are covered.

    Args:
        materialize_fake_tensors: accepted (TensorBrain has no fake tensors).

    Example:
        >>> import io, tensorbrain as tb
        >>> buf = io.BytesIO()
        >>> with tb.serialization.skip_data():
        ...     tb.save({"w": tb.ones(2)}, buf)
        >>> _ = buf.seek(0)
        >>> tb.load(buf)["w"].tolist()
        [0.0, 0.0]
    """

    def __init__(self, materialize_fake_tensors: bool = False):
        self.materialize_fake_tensors = materialize_fake_tensors

    def __enter__(self):
        self._before = getattr(_tls, "skip_data", False)
        _tls.skip_data = True
        return self

    def __exit__(self, *exc) -> None:
        _tls.skip_data = self._before


def _without_data(obj):
    """``obj`` with each tensor/array replaced by zeros of its shape and dtype (skip_data)."""
    if isinstance(obj, Tensor):
        out = Tensor._wrap(np.zeros(tuple(obj.shape), dtype=np.dtype(obj.dtype))).to(obj.device)
        return out.requires_grad_(obj.requires_grad) if obj.is_floating_point() else out
    if isinstance(obj, np.ndarray):
        return np.zeros_like(obj)
    if isinstance(obj, dict):
        return type(obj)((k, _without_data(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
        return type(obj)(_without_data(v) for v in obj)
    return obj


def save(obj, f, format: str = "safetensors") -> None:
    """Save ``obj`` (nested dicts/lists of tensors, arrays, numbers, strings) to ``f`` atomically.

    ``f`` may also be an open binary file or ``io.BytesIO``; an ``obj`` beyond plain data (a
    whole module) is pickled around its tensors, as torch does (see ``_checkpoint_io``).
    ``format="torch"`` writes torch's own zip format instead (a ``.pt`` that
    ``torch.load(f, weights_only=True)`` reads), for plain data only.

    Args:
        obj (Any): the object to save.
        f (str | os.PathLike | BinaryIO): a path, an open binary file or ``io.BytesIO``.
        format (str): ``"safetensors"`` (the default: safetensors with the structure as JSON)
            or ``"torch"`` (torch's zip format; see docs/checkpoints.md).

    Raises:
        ValueError: an unknown ``format``.
        TypeError: ``obj`` holds something the format cannot store (named with its path).
    """
    if getattr(_tls, "skip_data", False):
        obj = _without_data(obj)
    if format != "safetensors":
        if format != "torch":
            raise ValueError(f"tb.save: format={format!r} is unknown; use 'safetensors' (the "
                             f"default) or 'torch' (a .pt that torch.load reads)")
        return _torch_save.save(obj, f)
    if hasattr(f, "write") or not _checkpoint_io.is_plain(obj):
        return _checkpoint_io.save(obj, f)
    stn, _ = _safetensors()
    path = os.fspath(f)
    enc = _Encoder()
    structure = enc.encode(obj, "")
    metadata = {"format": FORMAT, "tensorbrain": json.dumps(structure, separators=(",", ":"))}
    _atomic.write(path, _atomic.safetensors_fill(stn.save_file, enc.arrays, metadata))


# ***** decoding *****
def load(f, map_location=None, weights_only=True):
    """Load a checkpoint written by :func:`save`, or by ``torch.save`` (``.pt``/``.bin``).

    ``map_location``: None puts tensors back on the device they were saved from; a device
    (``'cpu'``, ``'cuda:0'``) puts them all there; a dict maps saved devices to new ones. A plain
    safetensors file (no TensorBrain structure) loads as a flat ``{name: Tensor}`` dict.
    ``f`` may be a path, an open binary file or ``io.BytesIO``. ``weights_only`` (default True,
    as torch 2.6+) matters only for files holding whole objects: True refuses classes that are
    not allowlisted (``add_safe_globals``), False unpickles them after a warning. A torch file
    (``torch.save``'s zip format) is always read with torch's weights-only rules, whatever
    ``weights_only`` says: its pickle never runs code (``_torch_format``).

    Args:
        f (str | os.PathLike | BinaryIO): a path, an open binary file or ``io.BytesIO``.
        map_location (str | device | dict | None): None, a device, or a dict from saved
            devices to new ones.
        weights_only (bool): refuse classes that are not allowlisted in whole-object files.

    Returns:
        Any: the saved object, with its tensors as :class:`Tensor` s.

    Raises:
        FileNotFoundError: no file at ``f``.
        ValueError: the file is damaged, truncated or of a format this version does not read
            (named in the message).
        pickle.UnpicklingError: a class or global that is not allowed (named).

    Example:
        >>> import io, tensorbrain as tb
        >>> buf = io.BytesIO()
        >>> tb.save({"w": tb.ones(2)}, buf)
        >>> _ = buf.seek(0)
        >>> tb.load(buf, map_location="cpu")["w"].tolist()
        [1.0, 1.0]
    """
    out = _load(f, map_location, weights_only)
    return _without_data(out) if getattr(_tls, "skip_data", False) else out


def _load(f, map_location, weights_only):
    if _torch_format.is_torch_file(f):  # torch.save's zip (.pt/.bin): never runs its pickle
        return _torch_format.load(f, map_location)
    if hasattr(f, "read") or _checkpoint_io.is_pickled(f):
        return _checkpoint_io.load(f, map_location, weights_only)
    stn, safe_open = _safetensors()
    path = os.fspath(f)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no checkpoint at {path!r}")
    try:
        metadata, arrays = _read_direct(path)
        if arrays is None:  # a dtype the direct reader does not know: safetensors reads it
            with safe_open(path, framework="numpy") as sf:
                metadata = sf.metadata() or {}
                arrays = {k: sf.get_tensor(k) for k in sf.keys()}
    except Exception as exc:  # safetensors raises its own error types for bad files
        size = os.path.getsize(path)
        raise ValueError(f"{path!r} ({size} bytes) is not a readable TensorBrain checkpoint: it is "
                         f"truncated, corrupt or not a safetensors file ({type(exc).__name__}: "
                         f"{exc})") from None
    if metadata.get("format") != FORMAT:
        if "tensorbrain" in metadata:
            raise ValueError(f"{path!r} was written by an unknown TensorBrain checkpoint format "
                             f"{metadata.get('format')!r}; this version reads {FORMAT!r}")
        return {k: _place(Tensor._wrap(v.copy() if not v.flags.writeable else v), "cpu", map_location)
                for k, v in arrays.items()}
    try:
        structure = json.loads(metadata["tensorbrain"])
        return _decode(structure, arrays, map_location)
    except (KeyError, ValueError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        # RecursionError: a crafted structure nested thousands deep; AttributeError/IndexError:
        # a node of the wrong JSON type. All mean the file is damaged, never a crash.
        raise ValueError(f"{path!r} has a damaged TensorBrain structure: "
                         f"{type(exc).__name__}: {exc}"[:2000]) from None


# safetensors dtype names -> NumPy (the ones tb.save writes; others go through safetensors)
_ST_DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16",
              "U32": "uint32", "I32": "int32", "U64": "uint64", "I64": "int64", "F16": "float16",
              "F32": "float32", "F64": "float64"}
_MAX_HEADER = 100 * 1024 * 1024  # safetensors' own cap on the JSON header


def _read_direct(path):
    """``(metadata, {name: array})`` read straight from the file into the final arrays: one
    copy, so peak memory is about the file size (safetensors' reader plus a copy made 2.3x).
    ``arrays`` is None when an entry has a dtype not listed in ``_ST_DTYPES``. Every offset,
    shape and size is checked against the file before anything is allocated."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise ValueError("shorter than the 8-byte safetensors header length")
        n = int.from_bytes(head, "little")
        if n > min(_MAX_HEADER, size - 8):
            raise ValueError(f"header length {n} exceeds the file")
        header = json.loads(fh.read(n))
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
        metadata = header.pop("__metadata__", None) or {}
        if not isinstance(metadata, dict):
            raise ValueError("__metadata__ is not a JSON object")
        data_start, data_len = 8 + n, size - 8 - n
        plan = []
        for name, info in header.items():
            dt = _ST_DTYPES.get(info.get("dtype")) if isinstance(info, dict) else None
            if dt is None:
                return metadata, None
            shape, (lo, hi) = [int(d) for d in info["shape"]], [int(o) for o in info["data_offsets"]]
            count = math.prod(shape)
            if min(shape, default=0) < 0 or not 0 <= lo <= hi <= data_len \
                    or hi - lo != count * np.dtype(dt).itemsize:
                raise ValueError(f"entry {name!r}: shape {shape} x {dt} does not match its byte "
                                 f"range [{lo}, {hi}) in a data section of {data_len} bytes")
            plan.append((lo, name, shape, dt))
        arrays = {}
        for lo, name, shape, dt in sorted(plan):
            arr = np.empty(shape, dt)
            fh.seek(data_start + lo)
            if arr.nbytes and fh.readinto(memoryview(arr.reshape(-1).view(np.uint8))) != arr.nbytes:
                raise ValueError(f"entry {name!r} is truncated")
            arrays[name] = arr
    return metadata, arrays


# ***** torch.serialization's helpers for storages and torch files *****
def location_tag(storage) -> str:
    """Where a storage (or tensor) lives, as torch tags it in a checkpoint: ``"cpu"`` or
    ``"cuda:N"``.

    Args:
        storage: a storage (``t.untyped_storage()``) or a tensor.

    Raises:
        RuntimeError: an object with no device, as torch.
    """
    dev = getattr(storage, "device", None)
    if dev is None:
        raise RuntimeError(f"don't know how to determine data location of "
                           f"{type(storage).__module__}.{type(storage).__qualname__}")
    return "cpu" if dev.type == "cpu" else f"cuda:{dev.index or 0}"


def default_restore_location(storage, location: str):
    """``storage`` placed where ``location`` (a :func:`location_tag`) says, as torch's default
    ``map_location`` does: ``"cpu"`` keeps it, ``"cuda:N"`` copies it to that GPU.

    Args:
        storage: a storage.
        location: ``"cpu"`` or ``"cuda[:N]"``.

    Raises:
        RuntimeError: a CUDA location without CUDA, or an unknown tag (torch's messages).
    """
    if location.startswith("cpu"):
        return storage
    if location.startswith("cuda"):
        from . import _xp
        if not _xp.cuda_available():
            raise RuntimeError("Attempting to deserialize object on a CUDA device but "
                               "torch.cuda.is_available() is False. If you are running on a "
                               "CPU-only machine, please use torch.load with "
                               "map_location=torch.device('cpu') to map your storages to the CPU.")
        index = int(location.split(":")[1]) if ":" in location else 0
        with _xp.cupy().cuda.Device(index):
            return type(storage)(_xp.cupy().asarray(storage._array))
    raise RuntimeError(f"don't know how to restore data location of "
                       f"{type(storage).__module__}.{type(storage).__qualname__} "
                       f"(tagged with {location})")


def normalize_storage_type(storage_type: type) -> type:
    """The TensorBrain storage class of the same name (``FloatStorage``...), as torch's.

    Args:
        storage_type: a storage class.
    """
    import tensorbrain
    return getattr(tensorbrain, storage_type.__name__)


class set_default_mmap_options:
    """Context manager (or plain call) setting the ``mmap`` flags torch uses for
    ``torch.load(..., mmap=True)``: ``mmap.MAP_PRIVATE`` (default) or ``mmap.MAP_SHARED``.
    Stored and checked as torch's; TensorBrain's loader reads safetensors and torch files
    without memory-mapping them, so the flag has no effect on reading.

    Args:
        flags: ``mmap.MAP_PRIVATE`` or ``mmap.MAP_SHARED``.

    Raises:
        ValueError: other flags, as torch.
    """

    flags: int | None = None

    def __init__(self, flags: int) -> None:
        import mmap
        if flags not in (mmap.MAP_PRIVATE, mmap.MAP_SHARED):
            raise ValueError(f"Invalid argument in function set_default_mmap_options, expected "
                             f"mmap.MAP_PRIVATE or mmap.MAP_SHARED, but got {flags}")
        self.prev = set_default_mmap_options.flags
        set_default_mmap_options.flags = flags

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        set_default_mmap_options.flags = self.prev


def get_unsafe_globals_in_checkpoint(f) -> list[str]:
    """The globals a torch checkpoint's pickle names that a weights-only load would refuse
    (torch's allow-list and :func:`add_safe_globals`), read without running the pickle.

    Args:
        f: a path or a binary file of ``torch.save``'s zip format.

    Returns:
        ``["module.Name", ...]``, sorted.

    Raises:
        ValueError: not a torch zip checkpoint.
    """
    return _torch_format.unsafe_globals(f)
