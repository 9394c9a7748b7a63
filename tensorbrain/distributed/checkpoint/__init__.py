"""``tb.distributed.checkpoint``: sharded, resharding, atomic checkpoints (torch's
``torch.distributed.checkpoint``, file format of our own: safetensors + JSON, never pickle).

``save(state_dict, checkpoint_id=dir)`` has every rank write its own pieces and rank 0 the
metadata; ``load(state_dict, checkpoint_id=dir)`` fills a state dict in place at any world size.
``state_dict.get_state_dict`` / ``set_state_dict`` turn models (plain, DDP) and optimizers
(including ``ZeroRedundancyOptimizer``) into such state dicts. See ``docs/dcp.md``.

>>> import tempfile, tensorbrain as tb
>>> import tensorbrain.distributed.checkpoint as dcp
>>> folder = tempfile.mkdtemp()
>>> _ = dcp.save({"w": tb.ones(3), "step": 7}, checkpoint_id=folder)
>>> sd = {"w": tb.zeros(3), "step": 0}
>>> dcp.load(sd, checkpoint_id=folder)
>>> sd["w"].tolist(), sd["step"]
([1.0, 1.0, 1.0], 7)
"""
from .filesystem import FileSystemReader, FileSystemWriter
from .state_dict_loader import load
from .state_dict_saver import CheckpointException, save
from .stateful import Stateful


def async_save(*args, **kwargs):
    """Not supported: raises ``NotImplementedError`` (use ``save``)."""
    raise NotImplementedError("tb.distributed.checkpoint.async_save is not supported yet; use "
                              "save(), which is synchronous")


__all__ = ["CheckpointException", "FileSystemReader", "FileSystemWriter", "Stateful", "async_save",
           "load", "save"]
