"""``load``: fill a state dict in place from a checkpoint saved at any world size.

Each rank reads ``.metadata``, then for every tensor it holds works out the box of the global
tensor it needs (the whole tensor, or a DTensor's local shard) and copies in the overlapping part
of every saved chunk, reading only those bytes. Nothing is exchanged between ranks, so a
checkpoint saved by 4 ranks loads at 2 or 1 and the reverse.
"""
from __future__ import annotations

from ... import _xp
from ._items import box_slices, classify, flatten, overlap, volume
from .default_planner import DefaultLoadPlanner
from .filesystem import FileSystemReader
from .planner import LoadPlanner, check_planner
from .stateful import Stateful


def _reader(checkpoint_id, storage_reader):
    if storage_reader is not None:
        if not isinstance(storage_reader, FileSystemReader):
            raise TypeError(f"storage_reader must be a FileSystemReader, got "
                            f"{type(storage_reader).__name__}")
        return storage_reader
    if checkpoint_id is None:
        raise ValueError("load needs checkpoint_id (a folder) or storage_reader")
    return FileSystemReader(checkpoint_id)


def _fill(reader, path, entry, info):
    dest = info["array"]
    if list(entry["size"]) != info["size"]:
        raise ValueError(f"size mismatch for {path!r}: the checkpoint holds global size "
                         f"{tuple(entry['size'])}, the state dict to load into has "
                         f"{tuple(info['size'])}")
    offsets, lengths = info["offsets"], [int(n) for n in dest.shape]
    xp = _xp.get_array_module(dest)
    got = 0
    for c in entry["chunks"]:
        box = overlap(offsets, lengths, c["offsets"], c["lengths"])
        if box is None:
            continue
        lo, size = box
        piece = reader.read(c["file"], c["key"], box_slices(lo, size, c["offsets"]))
        piece = piece.astype(dest.dtype, copy=False)
        dest[box_slices(lo, size, offsets)] = xp.asarray(piece) if xp is not _xp.np else piece
        got += volume(size)
    if got != volume(lengths):
        raise ValueError(f"checkpoint {reader.path!r} covers {got} of the {volume(lengths)} "
                         f"elements of {path!r} this rank needs")


def load(state_dict: dict, *, checkpoint_id=None, storage_reader=None, planner=None,
         process_group=None, no_dist: bool = False) -> None:
    """Load a checkpoint into ``state_dict`` in place, resharding as needed.

    Tensors (and arrays) are overwritten in place with their saved values, whole; a DTensor
    receives its local shard under its own placements, whatever layout and world size saved it;
    other values (numbers, strings, lists) are replaced in their dict or list.

    Args:
        state_dict: the state dict to fill, with tensors of the right global sizes; a
            top-level :class:`Stateful` value gets ``load_state_dict`` of its filled
            ``state_dict()``.
        checkpoint_id: the checkpoint folder.
        storage_reader: a :class:`FileSystemReader` instead of ``checkpoint_id``.
        planner: None or a :class:`DefaultLoadPlanner` (``allow_partial_load=True``: keys
            the checkpoint lacks keep their values); a planner with its own planning methods is
            refused.
        process_group: accepted for torch's signature; loading needs no communication.
        no_dist: accepted for torch's signature.

    Raises:
        FileNotFoundError: no committed checkpoint in the folder, or a data file is missing.
        RuntimeError: keys of ``state_dict`` missing from the checkpoint (all named).
        ValueError: a global size differs from the saved one, or a tensor/value mismatch.

    Example::

        sd = {"model": model.state_dict(), "epoch": 0}
        dcp.load(sd, checkpoint_id="ckpt/step100")
        model.load_state_dict(sd["model"])
    """
    check_planner(planner, LoadPlanner, DefaultLoadPlanner, "load")
    partial = bool(getattr(planner, "allow_partial_load", False))
    reader = _reader(checkpoint_id, storage_reader)
    entries = reader.read_json()["state_dict_metadata"]
    if not isinstance(state_dict, dict):
        raise TypeError(f"a state dict must be a dict, got {type(state_dict).__name__}")
    stateful = {k: v for k, v in state_dict.items() if isinstance(v, Stateful)}
    given = state_dict
    if stateful:  # fill their state dicts, then hand them back (below)
        state_dict = {k: (v.state_dict() if k in stateful else v) for k, v in given.items()}
    items = flatten(state_dict)
    missing = [path for path, _, _, _ in items if path not in entries]
    if partial:
        items = [item for item in items if item[0] in entries]
    elif missing:
        raise RuntimeError(f"Missing key in checkpoint state_dict: {missing[0]}"
                           + (f" (and {len(missing) - 1} more: {missing[1:6]})"
                              if len(missing) > 1 else "")
                           + f"; checkpoint {reader.path!r} has {len(entries)} keys")
    try:
        for path, parent, key, value in items:
            entry = entries[path]
            kind, info = classify(path, value)
            if entry["type"] != ("tensor" if kind == "tensor" else "value"):
                raise ValueError(f"{path!r}: the checkpoint holds a {entry['type']}, the state "
                                 f"dict a {'tensor' if kind == 'tensor' else 'non-tensor value'}")
            if kind == "tensor":
                _fill(reader, path, entry, info)
                if hasattr(value, "_version"):
                    value._version[0] += 1
                continue
            new = entry["value"]
            if isinstance(value, tuple) and isinstance(new, list):
                new = tuple(new)
            if isinstance(parent, tuple):
                raise TypeError(f"{path!r} sits in a tuple, which cannot be updated in place; "
                                f"use a list")
            parent[key] = new
    finally:
        reader.close()
    for k, v in state_dict.items():
        if k in stateful:
            stateful[k].load_state_dict(v)
        else:
            given[k] = v  # a top-level value replaced in the working copy
