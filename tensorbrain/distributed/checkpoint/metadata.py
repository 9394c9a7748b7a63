"""``tb.distributed.checkpoint.metadata``: what a checkpoint holds, as torch's dataclasses.

``FileSystemReader(path).read_metadata()`` (and ``HuggingFaceStorageReader``'s) return a
:class:`Metadata`: ``state_dict_metadata`` maps every flattened key to a
:class:`TensorStorageMetadata` (dtype, global size, the saved chunks) or a
:class:`BytesStorageMetadata` (a non-tensor value). Programs read it to list a checkpoint's keys
and sizes before building the state dict to load into.

>>> import tempfile, tensorbrain as tb
>>> import tensorbrain.distributed.checkpoint as dcp
>>> folder = tempfile.mkdtemp()
>>> _ = dcp.save({"w": tb.ones(2, 3), "step": 7}, checkpoint_id=folder)
>>> md = dcp.FileSystemReader(folder).read_metadata()
>>> tuple(md.state_dict_metadata["w"].size), type(md.state_dict_metadata["step"]).__name__
((2, 3), 'BytesStorageMetadata')
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["BytesStorageMetadata", "ChunkStorageMetadata", "Metadata", "MetadataIndex",
           "STATE_DICT_TYPE", "STORAGE_TYPES", "StorageMeta", "TensorProperties",
           "TensorStorageMetadata"]

#: A state dict: nested dicts and lists of tensors, DTensors, arrays and JSON values.
STATE_DICT_TYPE = dict[str, Any]


def _size(sizes):
    from ...tensor import Size
    return Size([int(s) for s in sizes])


@dataclass
class ChunkStorageMetadata:
    """One saved piece of a tensor: where it starts in the global tensor, and its shape.

    Args:
        offsets: the piece's first index in each dimension.
        sizes: the piece's shape.
    """
    offsets: Any
    sizes: Any


@dataclass
class TensorProperties:
    """A saved tensor's element type.

    Args:
        dtype: the ``tb.dtype``.
    """
    dtype: Any = None


@dataclass
class TensorStorageMetadata:
    """A saved tensor: its properties, global size and chunks.

    Args:
        properties: its :class:`TensorProperties`.
        size: the global shape (``tb.Size``).
        chunks: the saved :class:`ChunkStorageMetadata` pieces, which cover it.
    """
    properties: TensorProperties
    size: Any
    chunks: list = field(default_factory=list)


@dataclass
class BytesStorageMetadata:
    """A saved non-tensor value (stored as JSON in TensorBrain's checkpoints)."""


STORAGE_TYPES = TensorStorageMetadata | BytesStorageMetadata


@dataclass(frozen=True)
class MetadataIndex:
    """Names one item of a checkpoint: its key, and for a tensor piece its offset.

    Args:
        fqn: the flattened key (``"model.layer.weight"``).
        offset: the piece's offsets, or None.
        index: a hint into the chunk list, or None.
    """
    fqn: str
    offset: Any = None
    index: int | None = field(default=None, compare=False)


@dataclass
class StorageMeta:
    """Where the checkpoint was saved.

    Args:
        checkpoint_id: the folder.
        save_id: the save's token.
        load_id: unused (torch's field).
    """
    checkpoint_id: Any = None
    save_id: str | None = None
    load_id: str | None = None


@dataclass
class Metadata:
    """Every key of a checkpoint (torch's ``Metadata``).

    Args:
        state_dict_metadata: flattened key -> :class:`TensorStorageMetadata` or
            :class:`BytesStorageMetadata`.
        planner_data: the JSON values of the non-tensor keys (TensorBrain keeps them here).
        storage_data: the file each chunk is in: ``MetadataIndex -> file name``.
        storage_meta: where and which save.
        version: the file format.
    """
    state_dict_metadata: dict
    planner_data: Any = None
    storage_data: Any = None
    storage_meta: StorageMeta | None = None
    version: str | None = None

    @classmethod
    def from_json(cls, md: dict, checkpoint_id=None) -> Metadata:
        """The dataclasses of a checkpoint's parsed ``.metadata`` (TensorBrain's JSON).

        Args:
            md: the JSON document.
            checkpoint_id: the folder it was read from.
        """
        from ..._dtype import as_dtype
        entries: dict[str, TensorStorageMetadata | BytesStorageMetadata] = {}
        values: dict = {}
        files: dict = {}
        for key, e in md["state_dict_metadata"].items():
            if e["type"] != "tensor":
                entries[key] = BytesStorageMetadata()
                values[key] = e.get("value")
                continue
            chunks = []
            for c in e["chunks"]:
                chunks.append(ChunkStorageMetadata(_size(c["offsets"]), _size(c["lengths"])))
                files[MetadataIndex(key, tuple(c["offsets"]))] = c.get("file")
            entries[key] = TensorStorageMetadata(TensorProperties(as_dtype(e["dtype"])),
                                                 _size(e["size"]), chunks)
        return cls(entries, planner_data=values, storage_data=files,
                   storage_meta=StorageMeta(checkpoint_id, md.get("token")),
                   version=md.get("format"))
