"""``tb.distributed.checkpoint.format_utils``: turn a distributed checkpoint into one file and
back, offline (no process group).

``dcp_to_torch_save`` reads every key of a checkpoint folder (saved at any world size) and writes
the whole, nested state dict with ``tb.save``; ``torch_save_to_dcp`` reads a file (``tb.save``'s,
or a torch ``.pt`` through TensorBrain's restricted reader, which runs no code) and writes a
checkpoint folder. TensorBrain writes no pickle, so the "torch save" file is ``tb.save``'s
safetensors format (a bare model state dict in it also loads with
``safetensors.torch.load_file``).

>>> import os, tempfile, tensorbrain as tb
>>> import tensorbrain.distributed.checkpoint as dcp
>>> from tensorbrain.distributed.checkpoint.format_utils import dcp_to_torch_save
>>> folder = tempfile.mkdtemp()
>>> _ = dcp.save({"model": {"w": tb.ones(2)}, "step": 3}, checkpoint_id=folder)
>>> dcp_to_torch_save(folder, os.path.join(folder, "full.pt"))
>>> sd = tb.load(os.path.join(folder, "full.pt"))
>>> sd["model"]["w"].tolist(), sd["step"]
([1.0, 1.0], 3)
"""
from __future__ import annotations

import os

from ._items import unflatten

__all__ = ["dcp_to_torch_save", "load_all", "torch_save_to_dcp"]


def load_all(reader) -> dict:
    """Every key of a checkpoint, nested as it was saved (no template state dict needed).

    Args:
        reader: a ``FileSystemReader`` (or ``HuggingFaceStorageReader``).

    Returns:
        dict: the state dict, tensors on the CPU in their saved dtypes.
    """
    from ... import empty
    from .state_dict_loader import load
    md = reader.read_json()
    flat = {k: (empty(e["size"], dtype=e["dtype"]) if e["type"] == "tensor" else None)
            for k, e in md["state_dict_metadata"].items()}
    load(flat, storage_reader=reader)   # flat keys flatten to themselves
    return unflatten(flat, md.get("keys") or {})


def dcp_to_torch_save(dcp_checkpoint_dir: str | os.PathLike, torch_save_path: str | os.PathLike
                      ) -> None:
    """Write a distributed checkpoint as one ``tb.save`` file.

    Args:
        dcp_checkpoint_dir: the checkpoint folder.
        torch_save_path: the file to write (atomically).

    Raises:
        FileNotFoundError: no checkpoint in the folder.
    """
    from ... import save
    from .filesystem import FileSystemReader
    save(load_all(FileSystemReader(dcp_checkpoint_dir)), os.fspath(torch_save_path))


def torch_save_to_dcp(torch_save_path: str | os.PathLike,
                      dcp_checkpoint_dir: str | os.PathLike) -> None:
    """Write a ``tb.save`` file (or torch ``.pt`` file) as a distributed checkpoint folder.

    Args:
        torch_save_path: the file (``tb.load`` reads it; a torch pickle through the restricted
            reader).
        dcp_checkpoint_dir: the folder to write.

    Raises:
        TypeError: the file does not hold a dict.
    """
    from ... import load
    from .state_dict_saver import save
    state_dict = load(os.fspath(torch_save_path))
    if not isinstance(state_dict, dict):
        raise TypeError(f"torch_save_path={os.fspath(torch_save_path)!r} holds a "
                        f"{type(state_dict).__name__}, not a state dict (dict)")
    save(state_dict, checkpoint_id=dcp_checkpoint_dir, no_dist=True)
