"""The structure codec of tb.save's checkpoints: tensors and arrays out of a nested object into
named safetensors entries plus a JSON tree (:class:`_Encoder`), and back (:func:`_decode`), with
the device placement of ``map_location`` (:func:`_place`). :mod:`tensorbrain.serialization` (the
safetensors files) and :mod:`tensorbrain._checkpoint_io` (the opt-in pickle files) both use it.
"""
from __future__ import annotations

import math

import numpy as np

from . import _xp
from ._device import as_device
from .tensor import Tensor

FORMAT = "tensorbrain.checkpoint/1"


def _safetensors():
    # safetensors is a core dependency (pyproject.toml): tb.save/tb.load always work.
    import safetensors.numpy as stn
    from safetensors import safe_open
    return stn, safe_open


# ***** encoding the structure *****
class _Encoder:
    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def name(self, path: str) -> str:
        base = path or "tensor"
        name, i = base, 1
        while name in self.arrays:
            name, i = f"{base}.{i}", i + 1
        return name

    def encode(self, obj, path: str):
        if isinstance(obj, Tensor):
            name = self.name(path)
            self.arrays[name] = _contiguous(_xp.to_numpy(obj._data))
            node: dict[str, str | bool] = {"T": "tensor", "name": name, "device": str(obj.device)}
            if obj.requires_grad:
                node["requires_grad"] = True
            if _is_parameter(obj):
                node["parameter"] = True
            return node
        if isinstance(obj, np.ndarray) or _xp.is_cupy_array(obj):
            name = self.name(path)
            self.arrays[name] = _contiguous(_xp.to_numpy(obj))
            return {"T": "ndarray", "name": name, "device": "cuda" if _xp.is_cupy_array(obj) else "cpu"}
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, (int, np.integer)):
            return int(obj)
        if isinstance(obj, (float, np.floating)):
            f = float(obj)
            return f if math.isfinite(f) else {"T": "float", "v": repr(f)}
        if isinstance(obj, (list, tuple)):
            items = [self.encode(v, _join(path, str(i))) for i, v in enumerate(obj)]
            return {"T": "tuple" if isinstance(obj, tuple) else "list", "v": items}
        if isinstance(obj, dict):
            keys, vals = [], []
            for k, v in obj.items():
                if isinstance(k, bool) or not isinstance(k, (str, int)):
                    raise TypeError(f"tb.save: dict keys must be str or int, got {type(k).__name__} "
                                    f"at {path or '<root>'!r}")
                keys.append(k)
                vals.append(self.encode(v, _join(path, str(k))))
            return {"T": "dict", "k": keys, "v": vals}
        raise TypeError(f"tb.save cannot store a {type(obj).__name__} (at {path or '<root>'!r}): "
                        "checkpoints hold tensors, NumPy arrays, numbers, strings, None and "
                        "dicts/lists/tuples of them (never pickled objects)")


def _contiguous(arr):
    # Not np.ascontiguousarray: it turns 0-d arrays into 1-d ones.
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def _join(path, key):
    return f"{path}.{key}" if path else key


def _is_parameter(t):
    return type(t).__name__ == "Parameter"


def _decode(node, arrays, map_location):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):  # never written by save(); reject rather than guess
        raise ValueError("unexpected bare list in structure")
    kind = node.get("T")
    if kind == "float":
        return float(node["v"])
    if kind == "list":
        return [_decode(v, arrays, map_location) for v in node["v"]]
    if kind == "tuple":
        return tuple(_decode(v, arrays, map_location) for v in node["v"])
    if kind == "dict":
        return {k: _decode(v, arrays, map_location) for k, v in zip(node["k"], node["v"])}
    if kind in ("tensor", "ndarray"):
        name = node["name"]
        if name not in arrays:
            raise KeyError(f"tensor entry {name!r} is missing from the file")
        arr = arrays[name]
        if not arr.flags.writeable:
            arr = arr.copy()
        if kind == "ndarray":
            return arr if node.get("device", "cpu") == "cpu" and map_location is None else \
                _place(Tensor._wrap(arr), node.get("device", "cpu"), map_location)._data
        t = _place(Tensor._wrap(arr), node.get("device", "cpu"), map_location)
        if node.get("parameter"):
            from .nn import Parameter
            return Parameter(t, requires_grad=node.get("requires_grad", True))
        if node.get("requires_grad"):
            t.requires_grad_(True)
        return t
    raise ValueError(f"unknown node type {kind!r}")


def _place(t: Tensor, saved_device: str, map_location):
    if map_location is None:
        target = saved_device
    elif isinstance(map_location, dict):
        target = map_location.get(saved_device, saved_device)
    elif callable(map_location):
        raise TypeError("map_location as a function is not supported; pass a device or a dict")
    else:
        target = str(as_device(map_location))
    if as_device(target).type == "cuda":
        if not _xp.cuda_available():
            raise RuntimeError(f"the checkpoint holds tensors saved on {saved_device!r} but CUDA is "
                               f"not available here; load with map_location='cpu'")
        return t.to(target)
    return t
