"""``tb.save``/``tb.load`` on file objects, and whole objects (torch 2.6+ semantics).

Plain data (dicts/lists/tuples of tensors, arrays, numbers, strings) is always a safetensors file
with the structure as JSON (``serialization.py``); that never changes, whether it goes to a path,
an open binary file or an ``io.BytesIO``. Anything else (a whole ``nn.Module``, an object of the
user's class) is what torch pickles; so do we, in the same safetensors container: the tensors are
safetensors entries, the object graph around them is a pickle in the metadata. Loading such a
file follows torch 2.6+: the default ``weights_only=True`` unpickles only allowlisted classes
(:func:`add_safe_globals`, :func:`safe_globals`) and refuses anything else with an error saying
how to opt in; ``weights_only=False`` unpickles everything, after a warning.
"""
from __future__ import annotations

import base64
import io
import json
import os
import pickle
import struct
import warnings

import numpy as np

from . import _atomic, _xp
from ._checkpoint_codec import FORMAT, _decode, _Encoder, _place, _safetensors
from .tensor import Tensor

PICKLE_FORMAT = "tensorbrain.pickle/1"
_MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header

_safe_globals: list = []
# Classes any checkpoint may name without opting in (torch allows the same kinds by default).
_DEFAULT_SAFE = {("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset"),
                 ("builtins", "complex"), ("builtins", "slice"), ("builtins", "range"),
                 ("builtins", "bytearray"), ("tensorbrain.tensor", "Size"),
                 ("tensorbrain._device", "device")}


# ***** allowlist (torch.serialization's names) *****
def add_safe_globals(safe_globals) -> None:
    """Allow these classes/functions in ``weights_only=True`` loads (``torch.serialization``'s API).

    Args:
        safe_globals: classes or functions, or ``(obj, "module.name")`` pairs.
    """
    _safe_globals.extend(safe_globals)


def get_safe_globals() -> list:
    """The user-added allowlist."""
    return list(_safe_globals)


def clear_safe_globals() -> None:
    """Empty the user-added allowlist."""
    _safe_globals.clear()


class safe_globals:
    """``with safe_globals([Net]): tb.load(f)``: allow these globals inside the block only."""

    def __init__(self, safe_globals):
        self.globals = list(safe_globals)

    def __enter__(self):
        self.before = len(_safe_globals)
        _safe_globals.extend(self.globals)

    def __exit__(self, *exc):
        del _safe_globals[self.before:]


def _allowed(module: str, name: str) -> bool:
    if (module, name) in _DEFAULT_SAFE:
        return True
    for g in _safe_globals:
        if isinstance(g, tuple):
            obj, full = g
            if full == f"{module}.{name}":
                return True
        elif getattr(g, "__module__", None) == module and \
                getattr(g, "__qualname__", getattr(g, "__name__", None)) == name:
            return True
    return False


# ***** what goes where *****
def is_plain(obj) -> bool:
    """True when ``obj`` is plain data that the JSON structure holds (never pickled)."""
    if obj is None or isinstance(obj, (bool, int, float, str, np.integer, np.floating, Tensor,
                                       np.ndarray)) or _xp.is_cupy_array(obj):
        return True
    if isinstance(obj, (list, tuple)):
        return all(is_plain(v) for v in obj)
    if isinstance(obj, dict):  # OrderedDict too: a state dict stays safetensors + JSON
        return all(isinstance(k, (str, int)) and not isinstance(k, bool)
                                         and is_plain(v) for k, v in obj.items())
    return False


def is_pickled(path) -> bool:
    """True when the file at ``path`` holds pickled objects (read from its header only)."""
    try:
        with open(path, "rb") as fh:
            return _read_header(fh)[1].get("format") == PICKLE_FORMAT
    except (OSError, ValueError):
        return False  # let the ordinary loader report missing or damaged files


def _read_header(fh):
    raw = fh.read(8)
    if len(raw) != 8:
        raise ValueError("too short for a checkpoint")
    (n,) = struct.unpack("<Q", raw)
    if n > _MAX_HEADER:
        raise ValueError(f"header length {n} is implausible")
    head = fh.read(n)
    if len(head) != n:
        raise ValueError("truncated header")
    header = json.loads(head)
    return raw + head, header.get("__metadata__") or {}, header


# ***** saving *****
class _Pickler(pickle.Pickler):
    """Pickles the object graph; every Tensor and ndarray becomes a safetensors entry instead."""

    def __init__(self, file, encoder):
        super().__init__(file, protocol=4)
        self.encoder, self.memo_ids = encoder, {}

    def persistent_id(self, obj):
        if not (isinstance(obj, (Tensor, np.ndarray)) or _xp.is_cupy_array(obj)):
            return None
        key = id(obj)
        if key not in self.memo_ids:
            node = self.encoder.encode(obj, f"obj.{len(self.memo_ids)}")
            self.memo_ids[key] = (obj, json.dumps(node, separators=(",", ":")))
        return self.memo_ids[key][1]


def to_bytes(obj) -> bytes:
    """The checkpoint bytes for ``obj``: JSON structure when plain, else pickle + tensors."""
    stn, _ = _safetensors()
    enc = _Encoder()
    if is_plain(obj):
        structure = enc.encode(obj, "")
        metadata = {"format": FORMAT, "tensorbrain": json.dumps(structure, separators=(",", ":"))}
    else:
        buf = io.BytesIO()
        _Pickler(buf, enc).dump(obj)
        metadata = {"format": PICKLE_FORMAT, "pickle": base64.b64encode(buf.getvalue()).decode()}
    return stn.save(enc.arrays, metadata=metadata)


def save(obj, f) -> None:
    """Write ``obj`` to an open binary file / BytesIO, or (whole objects) atomically to a path."""
    data = to_bytes(obj)
    if hasattr(f, "write"):
        f.write(data)
        return
    def fill(tmp):
        with open(tmp, "wb") as fh:
            fh.write(data)
    _atomic.write(f, fill)


# ***** loading *****
class _Unpickler(pickle.Unpickler):
    def __init__(self, file, arrays, map_location, weights_only):
        super().__init__(file)
        self.arrays, self.map_location, self.weights_only = arrays, map_location, weights_only
        self.loaded = {}

    def persistent_load(self, pid):
        if pid not in self.loaded:
            self.loaded[pid] = _decode(json.loads(pid), self.arrays, self.map_location)
        return self.loaded[pid]

    def find_class(self, module, name):
        if self.weights_only and not _allowed(module, name):
            short = name.split(".")[-1]
            raise pickle.UnpicklingError(
                f"Weights only load failed: the checkpoint holds a {module}.{name}, which is not "
                f"an allowed global by default. If you trust the file, either load it with "
                f"tb.load(f, weights_only=False) (this unpickles and can run arbitrary code), or "
                f"allow the class: tb.serialization.add_safe_globals([{short}]) or "
                f"`with tb.serialization.safe_globals([{short}]): tb.load(f)`. A state dict "
                f"(tb.save(model.state_dict(), f)) needs neither")
        return super().find_class(module, name)


def load(f, map_location=None, weights_only=True):
    """Load what :func:`save` or ``serialization.save`` wrote, from a path or a binary file."""
    stn, _ = _safetensors()
    where = getattr(f, "name", None) or type(f).__name__
    if hasattr(f, "read"):
        fh, close = f, False
    else:
        fh, close = open(os.fspath(f), "rb"), True
        where = os.fspath(f)
    try:
        head, metadata, header = _read_header(fh)
        size = max([v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"],
                   default=0)
        body = fh.read(size)
        if len(body) != size:
            raise ValueError(f"truncated: {len(body)} of {size} data bytes")
        arrays = stn.load(head + body)
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        raise ValueError(f"{where!r} is not a readable TensorBrain checkpoint: it is truncated, "
                         f"corrupt or not a safetensors file ({type(exc).__name__}: {exc})") from None
    finally:
        if close:
            fh.close()
    arrays = {k: (v if v.flags.writeable else v.copy()) for k, v in arrays.items()}
    fmt = metadata.get("format")
    if fmt == PICKLE_FORMAT:
        if weights_only is False:
            warnings.warn("tb.load(weights_only=False) unpickles the objects in this file, which "
                          "can run arbitrary code: only load files you trust", UserWarning,
                          stacklevel=3)
        data = base64.b64decode(metadata["pickle"])
        return _Unpickler(io.BytesIO(data), arrays, map_location, weights_only is not False).load()
    if fmt == FORMAT:
        return _decode(json.loads(metadata["tensorbrain"]), arrays, map_location)
    if "tensorbrain" in metadata:
        raise ValueError(f"{where!r} was written by an unknown TensorBrain checkpoint format "
                         f"{fmt!r}; this version reads {FORMAT!r} and {PICKLE_FORMAT!r}")
    return {k: _place(Tensor._wrap(v), "cpu", map_location) for k, v in arrays.items()}
