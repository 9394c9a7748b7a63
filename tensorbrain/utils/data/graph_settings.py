"""``tb.utils.data.graph_settings`` (``torch.utils.data.graph_settings``): settings applied
across a DataPipe graph (every DataPipe reachable through the attributes of another)."""
from __future__ import annotations

import warnings
from typing import Any

from .datapipes.datapipe import IterDataPipe


def get_all_graph_pipes(datapipe: Any) -> list:
    """Every DataPipe reachable from ``datapipe`` through attributes (lists and tuples too).

    Args:
        datapipe: the last stage.
    """
    seen: dict[int, Any] = {}
    todo = [datapipe]
    while todo:
        dp = todo.pop()
        if id(dp) in seen or not isinstance(dp, IterDataPipe):
            continue
        seen[id(dp)] = dp
        for v in vars(dp).values():
            todo.extend(v if isinstance(v, (list, tuple)) else [v])
    return list(seen.values())


def apply_shuffle_settings(datapipe: Any, shuffle: bool | None = None) -> Any:
    """Turn every Shuffler of the graph on or off (torch's ``apply_shuffle_settings``); with
    ``shuffle=True`` and no Shuffler, one is added at the end (with torch's warning).

    Args:
        datapipe: the last stage.
        shuffle: on, off, or None (no change).

    Returns:
        The graph's last stage (a new Shuffler when one was added).
    """
    if shuffle is None:
        return datapipe
    shufflers = [p for p in get_all_graph_pipes(datapipe)
                 if hasattr(p, "set_shuffle") and hasattr(p, "set_seed")]
    if not shufflers and shuffle:
        warnings.warn("`shuffle=True` was set, but the datapipe does not contain a `Shuffler`. "
                      "Adding one at the end. Be aware that the default buffer size might not "
                      "be sufficient for your task.", stacklevel=2)
        datapipe = datapipe.shuffle()
        shufflers = [datapipe]
    for s in shufflers:
        s.set_shuffle(shuffle)
    return datapipe


__all__ = ["apply_shuffle_settings", "get_all_graph_pipes"]
