"""``torch.distributed.checkpoint.planner_helpers``: the plan items of one state-dict entry, as
torch's helpers build them for custom planners: :func:`_create_write_items` (what a save writes
for a tensor, a DTensor's local piece, or a value) and :func:`create_read_items_for_chunk_list`
/ :func:`_create_read_items` (the boxes a load copies from the saved pieces that overlap each
local piece). TensorBrain's own ``save``/``load`` plan with the same geometry (``_items.py``).

>>> import tensorbrain as tb
>>> from tensorbrain.distributed.checkpoint.planner_helpers import _create_write_items
>>> item = _create_write_items("w", tb.ones(2, 3))[0]
>>> item.type.name, list(item.tensor_data.chunk.sizes)
('TENSOR', [2, 3])
"""
from __future__ import annotations

from ._items import _dtensor_cls, _is_tensor, classify, overlap
from .metadata import (BytesStorageMetadata, ChunkStorageMetadata, MetadataIndex, TensorProperties,
                       _size)
from .planner import LoadItemType, ReadItem, TensorWriteData, WriteItem, WriteItemType

__all__ = ["create_read_items_for_chunk_list"]


def _local_chunk(fqn: str, obj) -> tuple[ChunkStorageMetadata, list, object]:
    """This rank's piece of ``obj``: its chunk, the global size and the dtype."""
    _, info = classify(fqn, obj)
    chunk = ChunkStorageMetadata(offsets=_size(info["offsets"]), sizes=_size(info["array"].shape))
    return chunk, info["size"], obj.dtype


def _create_write_items(fqn: str, object) -> list[WriteItem]:   # noqa: A002  (torch's name)
    """The write items of one entry: a SHARD item for a DTensor's local piece, a TENSOR item
    for a tensor, a BYTE_IO item for anything else, as torch's.

    Args:
        fqn: the entry's flattened key.
        object: its value.
    """
    if not _is_tensor(object):
        return [WriteItem(index=MetadataIndex(fqn), type=WriteItemType.BYTE_IO)]
    chunk, size, dtype = _local_chunk(fqn, object)
    kind = WriteItemType.SHARD if isinstance(object, _dtensor_cls()) else WriteItemType.TENSOR
    data = TensorWriteData(chunk=chunk, properties=TensorProperties(dtype=dtype),
                           size=_size(size))
    return [WriteItem(index=MetadataIndex(fqn, chunk.offsets), type=kind, tensor_data=data)]


def create_read_items_for_chunk_list(fqn: str, checkpoint_md, local_chunks: list) -> list:
    """A read item for every overlap of a local chunk with a saved chunk, as torch's: the box's
    offsets in the local piece (``dest_offsets``) and in the saved one (``storage_offsets``).

    Args:
        fqn: the entry's key.
        checkpoint_md: its ``TensorStorageMetadata`` (the saved chunks).
        local_chunks: the :class:`ChunkStorageMetadata` pieces this rank loads into.

    Returns:
        list[ReadItem]: local chunks in order, saved chunks in order within each.
    """
    items = []
    for idx, local in enumerate(local_chunks):
        for sidx, saved in enumerate(checkpoint_md.chunks):
            box = overlap(list(local.offsets), list(local.sizes), list(saved.offsets),
                          list(saved.sizes))
            if box is None:
                continue
            offsets, lengths = box
            items.append(ReadItem(
                type=LoadItemType.TENSOR,
                dest_index=MetadataIndex(fqn, local.offsets, idx),
                dest_offsets=_size([o - b for o, b in zip(offsets, local.offsets)]),
                storage_index=MetadataIndex(fqn, saved.offsets, sidx),
                storage_offsets=_size([o - b for o, b in zip(offsets, saved.offsets)]),
                lengths=_size(lengths)))
    return items


def _create_read_items(fqn: str, md, obj) -> list:
    """The read items that load the saved entry ``md`` into ``obj`` (bytes: one BYTE_IO item;
    tensors: :func:`create_read_items_for_chunk_list` over this rank's piece).

    Args:
        fqn: the entry's key.
        md: its ``TensorStorageMetadata`` or ``BytesStorageMetadata``.
        obj: the target value.
    """
    if isinstance(md, BytesStorageMetadata):
        index = MetadataIndex(fqn)
        return [ReadItem(type=LoadItemType.BYTE_IO, dest_index=index, dest_offsets=[0],
                         storage_index=index, storage_offsets=[0], lengths=[0])]
    return create_read_items_for_chunk_list(fqn, md, [_local_chunk(fqn, obj)[0]])
