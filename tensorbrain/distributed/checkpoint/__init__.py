"""``tb.distributed.checkpoint``: sharded, resharding, atomic checkpoints (torch's
``torch.distributed.checkpoint``, file format of our own: safetensors + JSON, never pickle).

``save(state_dict, checkpoint_id=dir)`` has every rank write its own pieces and rank 0 the
metadata; ``load(state_dict, checkpoint_id=dir)`` fills a state dict in place at any world size.
``state_dict.get_state_dict`` / ``set_state_dict`` turn models (plain, DDP) and optimizers
(including ``ZeroRedundancyOptimizer``) into such state dicts. ``HuggingFaceStorageWriter`` /
``Reader`` save to and load from Hugging Face safetensors folders; ``format_utils`` converts to
one file and back. See ``docs/dcp.md``.

>>> import tempfile, tensorbrain as tb
>>> import tensorbrain.distributed.checkpoint as dcp
>>> folder = tempfile.mkdtemp()
>>> _ = dcp.save({"w": tb.ones(3), "step": 7}, checkpoint_id=folder)
>>> sd = {"w": tb.zeros(3), "step": 0}
>>> dcp.load(sd, checkpoint_id=folder)
>>> sd["w"].tolist(), sd["step"]
([1.0, 1.0, 1.0], 7)
"""
from ._hf_storage import HuggingFaceStorageReader, HuggingFaceStorageWriter
from .default_planner import DefaultLoadPlanner, DefaultSavePlanner
from .filesystem import FileSystemReader, FileSystemWriter
from .metadata import (BytesStorageMetadata, ChunkStorageMetadata, Metadata, MetadataIndex,
                       TensorStorageMetadata)
from .planner import LoadPlan, LoadPlanner, ReadItem, SavePlan, SavePlanner, WriteItem
from .state_dict_loader import load
from .state_dict_saver import CheckpointException, save
from .stateful import Stateful
from .storage import StorageReader, StorageWriter


from ._async import AsyncCheckpointerType, AsyncSaveResponse, async_save  # noqa: E402,F401


def save_state_dict(state_dict: dict, storage_writer, process_group=None,
                    coordinator_rank: int = 0, no_dist: bool = False, planner=None) -> dict:
    """torch's deprecated spelling of :func:`save` (``storage_writer`` positional).

    Args:
        state_dict: what to save.
        storage_writer: a :class:`FileSystemWriter`.
        process_group: the ranks that save together.
        coordinator_rank: must be 0 (rank 0 writes the metadata).
        no_dist: save from this process alone.
        planner: None or a :class:`DefaultSavePlanner`.

    Returns:
        The committed metadata.

    Raises:
        ValueError: ``coordinator_rank`` is not 0.
    """
    if coordinator_rank != 0:
        raise ValueError(f"save_state_dict(coordinator_rank={coordinator_rank}): rank 0 always "
                         f"writes the metadata; pass 0")
    return save(state_dict, storage_writer=storage_writer, process_group=process_group,
                no_dist=no_dist, planner=planner)


def load_state_dict(state_dict: dict, storage_reader, process_group=None,
                    coordinator_rank: int = 0, no_dist: bool = False, planner=None) -> None:
    """torch's deprecated spelling of :func:`load` (``storage_reader`` positional).

    Args:
        state_dict: the state dict to fill in place.
        storage_reader: a :class:`FileSystemReader`.
        process_group: accepted (loading needs no communication).
        coordinator_rank: must be 0.
        no_dist: accepted.
        planner: None or a :class:`DefaultLoadPlanner`.

    Raises:
        ValueError: ``coordinator_rank`` is not 0.
    """
    if coordinator_rank != 0:
        raise ValueError(f"load_state_dict(coordinator_rank={coordinator_rank}): pass 0")
    load(state_dict, storage_reader=storage_reader, process_group=process_group,
         no_dist=no_dist, planner=planner)


__all__ = ["BytesStorageMetadata", "CheckpointException", "ChunkStorageMetadata",
           "DefaultLoadPlanner", "DefaultSavePlanner", "FileSystemReader", "FileSystemWriter",
           "HuggingFaceStorageReader", "HuggingFaceStorageWriter", "LoadPlan", "LoadPlanner",
           "Metadata", "MetadataIndex", "ReadItem", "SavePlan", "SavePlanner", "Stateful",
           "StorageReader", "StorageWriter", "TensorStorageMetadata", "WriteItem", "async_save",
           "load", "load_state_dict", "save", "save_state_dict"]
