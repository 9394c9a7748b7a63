"""``save``: every rank writes its own pieces of the state dict; rank 0 commits the metadata.

The steps (collectives on ``process_group``):

1. each rank lists its items (path, dtype, global size, offsets, lengths; JSON values inline)
   and all ranks exchange the lists (``all_gather_object``);
2. every rank computes the same global plan: items several ranks hold identically (replicated
   tensors, ``Replicate`` DTensor shards, JSON values) are written once, by the holder with the
   fewest bytes so far (torch's ``dedup_save_plans``); sizes and dtypes must agree across ranks
   and the chunks of a tensor must cover it;
3. each rank writes its file; the outcomes are exchanged, and if any rank failed every rank
   raises ``CheckpointException`` naming it (nothing is committed);
4. rank 0 commits ``.metadata`` (``filesystem.py``) and tells the others whether that worked.
"""
from __future__ import annotations

import dataclasses
import enum
import os
import uuid
from typing import Any

from ._items import classify, flatten, volume
from .default_planner import DefaultSavePlanner
from .filesystem import FORMAT, FileSystemWriter
from .planner import SavePlanner, check_planner
from .stateful import Stateful


class CheckpointException(RuntimeError):
    """A save or load failed on some ranks; ``failures`` maps rank -> error text."""

    def __init__(self, msg: str, failures: dict):
        super().__init__(msg)
        self.failures = failures


class _Comm:
    """The few collectives a save needs, or their one-process stand-ins."""

    def __init__(self, process_group, no_dist: bool):
        from .. import distributed_c10d as c10d
        self.c10d = c10d
        self.group = process_group
        self.dist = not no_dist and c10d.is_initialized()
        self.rank = c10d.get_rank(process_group) if self.dist else 0
        self.world = c10d.get_world_size(process_group) if self.dist else 1
        if self.dist and self.rank < 0:
            raise RuntimeError("this rank is not a member of the process group passed to "
                               "save/load")

    def all_gather(self, obj) -> list:
        if not self.dist or self.world == 1:
            return [obj]
        out = [None] * self.world
        self.c10d.all_gather_object(out, obj, group=self.group)
        return out

    def broadcast(self, obj):
        if not self.dist or self.world == 1:
            return obj
        box = [obj]
        self.c10d.broadcast_object_list(box, group=self.group, group_src=0)
        return box[0]


def _writer(checkpoint_id, storage_writer):
    if storage_writer is not None:
        if not isinstance(storage_writer, FileSystemWriter):
            raise TypeError(f"storage_writer must be a FileSystemWriter, got "
                            f"{type(storage_writer).__name__}")
        return storage_writer
    if checkpoint_id is None:
        raise ValueError("save needs checkpoint_id (a folder) or storage_writer")
    return FileSystemWriter(checkpoint_id)


def _entry_name(path: str, offsets) -> str:
    return f"{path}@{','.join(map(str, offsets))}"


def _plan(plans: list, lowest: bool = False) -> tuple:
    """Every rank's view of the same global plan: ``(metadata entries, writes per rank)``."""
    entries: dict = {}
    holders: dict = {}  # (path, offsets, lengths) -> ranks holding that chunk, in rank order
    for rank, plan in enumerate(plans):
        for path, kind, info in plan["items"]:
            known = entries.get(path)
            if kind == "value":
                if known is None:
                    entries[path] = {"type": "value", "value": info}
                elif known["type"] != "value":
                    raise ValueError(f"{path!r} is a tensor on one rank and a non-tensor value "
                                     f"on rank {rank}")
                continue
            if known is None:
                known = entries[path] = {"type": "tensor", "dtype": info["dtype"],
                                         "size": info["size"], "chunks": [], "_from": rank}
            elif known["type"] != "tensor":
                raise ValueError(f"{path!r} is a non-tensor value on one rank and a tensor on "
                                 f"rank {rank}")
            elif (known["dtype"], known["size"]) != (info["dtype"], info["size"]):
                raise ValueError(f"{path!r} differs between ranks: rank {known['_from']} has "
                                 f"{known['dtype']} of global size {tuple(known['size'])}, rank "
                                 f"{rank} has {info['dtype']} of global size "
                                 f"{tuple(info['size'])}")
            if volume(info["lengths"]):
                key = (path, tuple(info["offsets"]), tuple(info["lengths"]))
                holders.setdefault(key, []).append(rank)
    # chunks held by one rank are its own; then each shared chunk goes to its least loaded holder
    load = [0] * len(plans)
    writes: list = [[] for _ in plans]
    shared = []
    for key, ranks in holders.items():
        if len(ranks) == 1:
            writes[ranks[0]].append(key)
            load[ranks[0]] += volume(key[2])
        else:
            shared.append((key, ranks))
    for key, ranks in shared:
        r = ranks[0] if lowest else min(ranks, key=lambda q: (load[q], q))
        writes[r].append(key)
        load[r] += volume(key[2])
    for r, keys in enumerate(writes):
        for path, offsets, lengths in keys:
            entries[path]["chunks"].append({"offsets": list(offsets), "lengths": list(lengths),
                                            "rank": r, "key": _entry_name(path, offsets)})
    for path, e in entries.items():
        e.pop("_from", None)
        if e["type"] == "tensor":
            covered = sum(volume(c["lengths"]) for c in e["chunks"])
            if covered != volume(e["size"]):
                raise ValueError(f"the pieces of {path!r} saved by the ranks cover {covered} of "
                                 f"its {volume(e['size'])} elements: every element must be held "
                                 f"by some rank, each by one chunk layout")
    return entries, writes


def save(state_dict: dict, *, checkpoint_id=None, storage_writer=None, planner=None,
         process_group=None, no_dist: bool = False) -> dict:
    """Save ``state_dict`` into the folder ``checkpoint_id``; every rank of the group calls it.

    Each rank writes the tensors it holds (a DTensor: its local shard, at its global offset;
    a plain tensor is taken as replicated and written once); rank 0 writes ``.metadata`` (JSON).
    The previous checkpoint in the folder stays whole until the new one is committed.

    Args:
        state_dict: nested dicts/lists of Tensors, DTensors, arrays and JSON values; a
            top-level :class:`Stateful` value (a model, an ``AppState``) is saved as its
            ``state_dict()``.
        checkpoint_id: the checkpoint folder (shared by all ranks).
        storage_writer: a :class:`FileSystemWriter` instead of ``checkpoint_id``.
        planner: None or a :class:`DefaultSavePlanner` (``dedup_save_to_lowest_rank=True``:
            a replicated item is written by the lowest rank holding it); a planner with its own
            planning methods is refused.
        process_group: the ranks that save together (default: the whole world).
        no_dist: save from this process alone, without collectives.

    Returns:
        The metadata that was committed.

    Raises:
        CheckpointException: writing failed on some rank (every rank raises, naming it).
        ValueError: ranks disagree on a key's dtype or global size, or its pieces leave gaps.
        TypeError: a value that is neither a tensor nor JSON data.

    Example::

        dcp.save({"model": model.state_dict(), "epoch": 3}, checkpoint_id="ckpt/step100")
    """
    check_planner(planner, SavePlanner, DefaultSavePlanner, "save")
    writer = _writer(checkpoint_id, storage_writer)
    comm = _Comm(process_group, no_dist)
    if not isinstance(state_dict, dict):
        raise TypeError(f"a state dict must be a dict, got {type(state_dict).__name__}")
    state_dict = {k: (v.state_dict() if isinstance(v, Stateful) else v)
                  for k, v in state_dict.items()}
    items, arrays = [], {}
    keys: dict = {}
    for path, _, _, value in flatten(state_dict, keys):
        kind, info = classify(path, value)
        if kind == "value":
            items.append([path, "value", info])
            continue
        arr = info.pop("array")
        info["lengths"] = [int(n) for n in arr.shape]
        items.append([path, "tensor", info])
        arrays[(path, tuple(info["offsets"]), tuple(info["lengths"]))] = arr
    token = uuid.uuid4().hex if comm.rank == 0 else None
    plans = comm.all_gather({"token": token, "items": items})
    token = plans[0]["token"]
    # the same plan on every rank, so a bad plan (or a refusal of the writer) raises on all
    entries, writes = _plan(plans, bool(getattr(planner, "dedup_save_to_lowest_rank", False)))
    writer.check_plan(entries)
    mine = {_entry_name(path, offsets): arrays[(path, offsets, lengths)]
            for path, offsets, lengths in writes[comm.rank]}
    outcome: dict[str, str | None] = {"file": None, "error": None}
    try:
        outcome["file"] = writer.write_rank(comm.rank, token, mine)
    except Exception as exc:  # reported to every rank below, then raised everywhere
        outcome["error"] = f"{type(exc).__name__}: {exc}"
    outcomes = comm.all_gather(outcome)
    failures = {r: o["error"] for r, o in enumerate(outcomes) if o["error"]}
    if failures:
        raise CheckpointException(
            f"save to {writer.path!r} failed on rank(s) {sorted(failures)}: "
            + "; ".join(f"rank {r}: {e}" for r, e in failures.items())
            + " (nothing was committed; the previous checkpoint is unchanged)", failures)
    files = [o["file"] for o in outcomes]
    for e in entries.values():
        for c in e.get("chunks", ()):
            c["file"] = files[c.pop("rank")]
    metadata = {"format": FORMAT, "world_size": comm.world, "token": token,
                "files": [f for f in files if f], "state_dict_metadata": entries,
                "keys": keys}
    error = None
    if comm.rank == 0:
        try:
            writer.commit(metadata, token)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
    error = comm.broadcast(error)
    if error:
        raise CheckpointException(f"committing {os.path.join(writer.path, '.metadata')} failed "
                                  f"on rank 0: {error}", {0: error})
    return metadata



class AsyncCheckpointerType(enum.Enum):
    """Where :func:`~tensorbrain.distributed.checkpoint.async_save` writes (torch's);
    TensorBrain runs ``THREAD``."""

    THREAD = "thread"
    PROCESS = "process"


@dataclasses.dataclass
class AsyncSaveResponse:
    """What ``async_save`` returns when given an ``async_stager``: a future for the staging
    and one for the write (torch's)."""

    staging_completion: Any
    upload_completion: Any
