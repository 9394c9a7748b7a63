"""``tb.distributed.checkpoint.utils``: the checkpoint error and key helpers programs import."""
from __future__ import annotations

from ._items import flatten, unflatten
from .state_dict_saver import CheckpointException

__all__ = ["CheckpointException", "flatten_state_dict", "unflatten_state_dict"]


def flatten_state_dict(state_dict: dict) -> tuple[dict, dict]:
    """``(flat, mapping)``: the leaves under dotted keys, and each key's path of nested keys.

    Args:
        state_dict: nested dicts and lists of tensors and values.

    Example:
        >>> from tensorbrain.distributed.checkpoint.utils import flatten_state_dict
        >>> flatten_state_dict({"a": {"b": 1}, "c": [2, 3]})
        ({'a.b': 1, 'c': [2, 3]}, {'a.b': ('a', 'b'), 'c': ('c',)})
    """
    keys: dict = {}
    flat = {path: value for path, _, _, value in flatten(state_dict, keys)}
    return flat, {k: tuple(v) for k, v in keys.items()}


def unflatten_state_dict(state_dict: dict, mapping: dict) -> dict:
    """The nested state dict again (the inverse of :func:`flatten_state_dict`).

    Args:
        state_dict: the flat dict.
        mapping: its key paths.
    """
    return unflatten(state_dict, {k: list(v) for k, v in mapping.items()})
