"""``tb.distributed.checkpoint.planner``: torch's planner types.

TensorBrain's ``save``/``load`` plan by themselves (every rank's pieces, replicated items written
once, resharding on load); the planners they accept are :mod:`.default_planner`'s, whose options
(``allow_partial_load``, ``dedup_save_to_lowest_rank``...) they honour. The classes here are
the bases and plan records programs name in annotations and subclasses; ``save``/``load`` refuse
a planner that overrides the planning (a subclass of the bases below with its own methods),
naming it, rather than ignore it.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from .metadata import ChunkStorageMetadata, MetadataIndex, TensorProperties

__all__ = ["LoadItemType", "LoadPlan", "LoadPlanner", "ReadItem", "SavePlan", "SavePlanner",
           "TensorWriteData", "WriteItem", "WriteItemType"]


class WriteItemType(enum.Enum):
    """What a :class:`WriteItem` writes (torch's values)."""
    TENSOR = enum.auto()
    SHARD = enum.auto()
    BYTE_IO = enum.auto()


class LoadItemType(enum.Enum):
    """What a :class:`ReadItem` reads (torch's values)."""
    TENSOR = 0
    BYTE_IO = 1


@dataclass(frozen=True)
class TensorWriteData:
    """A tensor piece to write: its chunk, properties and global size.

    Args:
        chunk: the piece.
        properties: its dtype.
        size: the global shape.
    """
    chunk: ChunkStorageMetadata
    properties: TensorProperties
    size: Any


@dataclass(frozen=True)
class WriteItem:
    """One item of a :class:`SavePlan`.

    Args:
        index: the item's key (and offset).
        type: a :class:`WriteItemType`.
        tensor_data: a tensor piece's data, None for bytes.
    """
    index: MetadataIndex
    type: WriteItemType
    tensor_data: TensorWriteData | None = None


@dataclass(frozen=True)
class ReadItem:
    """One item of a :class:`LoadPlan`: copy a box of a saved piece into a box of the target.

    Args:
        type: a :class:`LoadItemType`.
        dest_index: the target's key and offset.
        dest_offsets: where in the target piece.
        storage_index: the saved piece's key and offset.
        storage_offsets: where in the saved piece.
        lengths: the box's shape.
    """
    type: LoadItemType
    dest_index: MetadataIndex
    dest_offsets: Any
    storage_index: MetadataIndex
    storage_offsets: Any
    lengths: Any


@dataclass(frozen=True)
class SavePlan:
    """A rank's items to write.

    Args:
        items: the :class:`WriteItem` list.
        storage_data: the storage layer's data.
        planner_data: the planner's data.
        usable: False when the plan cannot be reused.
    """
    items: list = field(default_factory=list)
    storage_data: Any = None
    planner_data: Any = None
    usable: bool = True


@dataclass
class LoadPlan:
    """A rank's items to read.

    Args:
        items: the :class:`ReadItem` list.
        storage_data: the storage layer's data.
        planner_data: the planner's data.
    """
    items: list = field(default_factory=list)
    storage_data: Any = None
    planner_data: Any = None


class SavePlanner:
    """The base of save planners (``torch.distributed.checkpoint.planner.SavePlanner``).

    ``save`` accepts :class:`~.default_planner.DefaultSavePlanner` (and subclasses that only
    change its options); a planner overriding the planning methods is refused by name.
    """

    #: the methods whose overriding ``save`` cannot honour
    PLANNING = ("set_up_planner", "create_local_plan", "create_global_plan", "finish_plan",
                "resolve_data")


class LoadPlanner:
    """The base of load planners (``torch.distributed.checkpoint.planner.LoadPlanner``).

    ``load`` accepts :class:`~.default_planner.DefaultLoadPlanner` (and subclasses that only
    change its options); a planner overriding the planning methods is refused by name.
    """

    #: the methods whose overriding ``load`` cannot honour
    PLANNING = ("set_up_planner", "create_local_plan", "create_global_plan", "finish_plan",
                "load_bytes", "resolve_tensor", "commit_tensor")


def check_planner(planner, base: type, default: type, what: str) -> None:
    """Raise when ``planner`` is not one TensorBrain's ``save``/``load`` can honour.

    Args:
        planner: the planner given (None passes).
        base: :class:`SavePlanner` or :class:`LoadPlanner`.
        default: the default planner class (its methods are TensorBrain's).
        what: ``"save"`` or ``"load"``.

    Raises:
        TypeError: not a planner of the right kind.
        NotImplementedError: a planner that overrides the planning.
    """
    if planner is None:
        return
    if not isinstance(planner, base):
        raise TypeError(f"{what}(planner=...) must be a {base.__name__} (such as "
                        f"{default.__name__}()), got {type(planner).__name__}")
    custom = [m for m in base.PLANNING  # type: ignore[attr-defined]
              if getattr(type(planner), m, None) is not getattr(default, m, None)]
    if custom:
        raise NotImplementedError(
            f"{what}(planner={type(planner).__name__}()) overrides {', '.join(custom)}: "
            f"TensorBrain's {what} plans by itself (every rank's pieces, resharding) and cannot "
            f"run a custom plan; use {default.__name__} with its options")
