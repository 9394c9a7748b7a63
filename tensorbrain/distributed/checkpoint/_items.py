"""The state dict as a flat list of items, and the box arithmetic of chunks.

A state dict is walked as torch's ``flatten_state_dict`` does: dicts always, lists and tuples
when they hold tensors or containers; the path of a leaf is its keys joined by dots
(``optim.state.fc.weight.exp_avg``). A leaf is a tensor (a TensorBrain Tensor or a NumPy/CuPy
array: the whole tensor, offsets zero), a DTensor (this rank's shard at its global offset), or a
JSON value (numbers, strings, bools, None and lists of them: step counts, learning rates).
"""
from __future__ import annotations

import json
import math

import numpy as np

from ... import _xp


def _dtensor_cls():
    from ..tensor import DTensor
    return DTensor


def _is_array(v) -> bool:
    return isinstance(v, np.ndarray) or _xp.is_cupy_array(v)


def _is_tensor(v) -> bool:
    from ...tensor import Tensor
    return isinstance(v, Tensor)


def _is_container(v) -> bool:
    if isinstance(v, dict):
        return True
    if isinstance(v, (list, tuple)):
        return any(_is_container(x) or _is_tensor(x) or _is_array(x) for x in v)
    return False


def flatten(state_dict: dict, keys: dict | None = None) -> list:
    """``[(path, parent, key, value)]`` for every leaf, in traversal order.

    Args:
        state_dict: the nested state dict.
        keys: filled with ``path -> [key, key, ...]`` (the keys from the top down: how to
            rebuild the nesting from the flat paths), when given.

    Raises:
        TypeError: ``state_dict`` is not a dict.
        ValueError: two leaves flatten to the same path.
    """
    if not isinstance(state_dict, dict):
        raise TypeError(f"a state dict must be a dict, got {type(state_dict).__name__}")
    out, seen = [], set()

    def walk(node, prefix, above):
        pairs = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in pairs:
            path = f"{prefix}.{k}" if prefix else str(k)
            if _is_container(v):
                walk(v, path, above + [k if isinstance(k, (int, str)) else str(k)])
                continue
            if keys is not None:
                keys[path] = above + [k if isinstance(k, (int, str)) else str(k)]
            if path in seen:
                raise ValueError(f"two entries of the state dict flatten to the same key "
                                 f"{path!r}; rename one of them")
            seen.add(path)
            out.append((path, node, k, v))
    walk(state_dict, "", [])
    return out


def unflatten(flat: dict, keys: dict) -> dict:
    """The nested state dict of ``flat`` (``path -> value``), as :func:`flatten`'s ``keys`` say.

    An integer key makes a list (a state dict's ``param_groups``); paths without an entry in
    ``keys`` stay top-level keys.

    Args:
        flat: the flattened values.
        keys: ``path -> [key, ...]``.
    """
    root: dict = {}
    for path, value in flat.items():
        chain = keys.get(path) or [path]
        node: dict | list = root
        for k, nxt in zip(chain[:-1], chain[1:], strict=True):
            if isinstance(node, list):
                while len(node) <= k:
                    node.append(None)
                if node[k] is None:
                    node[k] = [] if isinstance(nxt, int) else {}
                node = node[k]
            else:
                node = node.setdefault(k, [] if isinstance(nxt, int) else {})
        last = chain[-1]
        if isinstance(node, list):
            while len(node) <= last:
                node.append(None)
        node[last] = value
    return root


def classify(path: str, value):
    """``("tensor", info)`` or ``("value", json_value)`` for one leaf.

    ``info`` holds ``dtype``, ``size`` (global shape), ``offsets`` and ``array`` (this rank's
    piece, a NumPy or CuPy array sharing memory with the value).

    Raises:
        TypeError: a value that is neither a tensor nor JSON data.
        ValueError: a DTensor with a ``Partial`` placement (reduce it first).
    """
    if _is_tensor(value):
        dt = _dtensor_cls()
        if isinstance(value, dt):
            from ..tensor._redistribute import local_offset
            if any(p.is_partial() for p in value.placements):
                raise ValueError(f"{path!r}: a DTensor with placements {value.placements} holds "
                                 f"partial sums; redistribute it to Shard/Replicate before saving")
            if value.device_mesh.get_coordinate() is None:
                raise ValueError(f"{path!r}: this rank is not in the DTensor's mesh")
            size = [int(s) for s in value.shape]
            offsets = [int(o) for o in local_offset(size, value.device_mesh, value.placements)]
            return "tensor", {"dtype": str(value._data.dtype), "size": size, "offsets": offsets,
                              "array": value._data}
        arr = value._data
    elif _is_array(value):
        arr = value
    else:
        try:
            json.dumps(value, allow_nan=True)
        except (TypeError, ValueError):
            raise TypeError(f"{path!r}: a {type(value).__name__} cannot be stored in a distributed "
                            f"checkpoint: it holds tensors, DTensors, arrays and JSON values "
                            f"(numbers, strings, bools, None, lists of them)") from None
        return "value", value
    return "tensor", {"dtype": str(arr.dtype), "size": [int(s) for s in arr.shape],
                      "offsets": [0] * arr.ndim, "array": arr}


def volume(lengths) -> int:
    return math.prod(int(n) for n in lengths)


def overlap(off_a, len_a, off_b, len_b):
    """The intersection of two boxes as ``(offsets, lengths)``, or None when empty."""
    lo = [max(a, b) for a, b in zip(off_a, off_b, strict=True)]
    hi = [min(a + n, b + m) for a, n, b, m in zip(off_a, len_a, off_b, len_b, strict=True)]
    if any(h <= lo_ for lo_, h in zip(lo, hi, strict=True)):
        return None
    return lo, [h - lo_ for lo_, h in zip(lo, hi, strict=True)]


def box_slices(offsets, lengths, origin) -> tuple:
    """Slices selecting the box ``(offsets, lengths)`` out of an array that starts at ``origin``."""
    return tuple(slice(o - s, o - s + n) for o, n, s in zip(offsets, lengths, origin, strict=True))
