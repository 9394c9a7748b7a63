"""``tb.distributed.checkpoint.storage``: the storage layer's base classes.

:class:`~.filesystem.FileSystemReader`/``Writer`` and the Hugging Face ones
(:mod:`._hf_storage`) derive from them; ``save``/``load`` take those (a storage class of one's
own, for another medium, is not supported: write to a folder).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .metadata import MetadataIndex

__all__ = ["StorageReader", "StorageWriter", "WriteResult"]


class StorageWriter:
    """The base of checkpoint writers (``torch.distributed.checkpoint.StorageWriter``)."""


class StorageReader:
    """The base of checkpoint readers (``torch.distributed.checkpoint.StorageReader``)."""


@dataclass(frozen=True)
class WriteResult:
    """Where one item was written.

    Args:
        index: the item.
        size_in_bytes: its size.
        storage_data: the storage layer's record (the file).
    """
    index: MetadataIndex
    size_in_bytes: int
    storage_data: Any = None
