"""``torch.nn.modules.utils``: the tuple helpers layer code imports (``_pair(3) == (3, 3)``)."""
from __future__ import annotations

import collections.abc
import itertools


def _ntuple(n, name="parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(itertools.repeat(x, n))
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n):
    """``t`` reversed, each element repeated ``n`` times (F.pad's order from conv padding)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults):
    if isinstance(out_size, int):
        return out_size
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict, prefix: str) -> None:
    """Strip ``prefix`` from the keys of ``state_dict`` (and its ``_metadata``) in place, as
    torch's helper for loading a ``DataParallel``/``DDP`` checkpoint (``"module."``).

    Args:
        state_dict: the state dict (an ordered dict).
        prefix: the prefix to remove.
    """
    for key in sorted(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    meta = getattr(state_dict, "_metadata", None)
    if meta is not None:
        for key in list(meta.keys()):
            if key.startswith(prefix) or key == prefix.rstrip("."):
                meta[key[len(prefix):] if key.startswith(prefix) else ""] = meta.pop(key)
