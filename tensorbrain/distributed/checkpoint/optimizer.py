"""``tb.distributed.checkpoint.optimizer``: load an optimizer's state laid out like the model's
parameters (``load_sharded_optimizer_state_dict``, the FSDP recipe of torch's DCP tutorial).

The checkpoint holds ``{optimizer_key: optim_state_dict}`` (saved with
``dcp.save({"model": ..., "optim": FSDP.optim_state_dict(...)}``, or
``get_optimizer_state_dict``); each state tensor whose key names a parameter of
``model_state_dict`` that is a DTensor of the same global size comes back as a DTensor with that
parameter's mesh and placements (this rank's shard read, nothing else), every other tensor whole.
"""
from __future__ import annotations

__all__ = ["load_sharded_optimizer_state_dict"]


def load_sharded_optimizer_state_dict(model_state_dict: dict, optimizer_key: str,
                                      storage_reader, planner=None) -> dict:
    """Read ``optimizer_key`` of a checkpoint, state tensors sharded like their parameters.

    Args:
        model_state_dict: the model's state dict (its DTensors give the layouts).
        optimizer_key: the checkpoint's top-level key of the optimizer state (``"optim"``).
        storage_reader: a ``FileSystemReader`` on the checkpoint.
        planner: None or a ``DefaultLoadPlanner``.

    Returns:
        dict: ``{optimizer_key: {"state": ..., "param_groups": ...}}``.

    Raises:
        KeyError: the checkpoint has no key under ``optimizer_key`` (the keys it has are named).
        TypeError: ``storage_reader`` is not a checkpoint reader.

    Example:
        >>> import tempfile, tensorbrain as tb
        >>> import tensorbrain.distributed.checkpoint as dcp
        >>> from tensorbrain.distributed.checkpoint.optimizer import (
        ...     load_sharded_optimizer_state_dict)
        >>> folder = tempfile.mkdtemp()
        >>> _ = dcp.save({"optim": {"state": {"w": {"step": 2, "m": tb.ones(2)}},
        ...                         "param_groups": [{"lr": 0.1, "params": ["w"]}]}},
        ...              checkpoint_id=folder)
        >>> sd = load_sharded_optimizer_state_dict({"w": tb.zeros(2)}, "optim",
        ...                                        dcp.FileSystemReader(folder))
        >>> sd["optim"]["state"]["w"]["m"].tolist(), sd["optim"]["param_groups"][0]["lr"]
        ([1.0, 1.0], 0.1)
    """
    from ... import empty
    from ..tensor import DTensor
    from ..tensor import empty as dempty
    from ._items import unflatten
    from .filesystem import FileSystemReader
    from .state_dict_loader import load
    if not isinstance(storage_reader, FileSystemReader):
        raise TypeError(f"storage_reader must be a FileSystemReader, got "
                        f"{type(storage_reader).__name__}")
    md = storage_reader.read_json()
    keys = md.get("keys") or {}
    mine = {p: e for p, e in md["state_dict_metadata"].items()
            if (keys.get(p) or p.split("."))[0] == optimizer_key}
    if not mine:
        tops = sorted({(keys.get(p) or p.split("."))[0] for p in md["state_dict_metadata"]})
        raise KeyError(f"optimizer_key={optimizer_key!r}: the checkpoint at "
                       f"{storage_reader.path!r} has no such key (its top-level keys: {tops})")
    flat: dict = {}
    for path, e in mine.items():
        if e["type"] != "tensor":
            flat[path] = None
            continue
        chain = keys.get(path) or path.split(".")
        param = model_state_dict.get(chain[2]) if len(chain) == 4 and chain[1] == "state" \
            else None
        if isinstance(param, DTensor) and list(param.shape) == list(e["size"]):
            flat[path] = dempty(*e["size"], device_mesh=param.device_mesh,
                                placements=param.placements, dtype=e["dtype"])
        else:
            flat[path] = empty(e["size"], dtype=e["dtype"])
    load(flat, storage_reader=storage_reader, planner=planner)
    return {optimizer_key: unflatten(flat, keys).get(optimizer_key, {})}
