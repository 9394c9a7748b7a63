"""``tb.fx.traceback`` (``torch.fx.traceback``): annotations copied onto the nodes a trace
makes. Inside ``with annotate({"stage": 1}):`` every node created gets
``node.meta["custom"] == {"stage": 1}`` (nested blocks merge), as torch's.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any
from collections.abc import Callable, Iterator

_current_annotations: dict[str, Any] = {}
_preserve = [False]


@contextlib.contextmanager
def annotate(annotation_dict: dict[str, Any]) -> Iterator[None]:
    """Attach ``annotation_dict`` to ``node.meta["custom"]`` of the nodes made in the block.

    Args:
        annotation_dict: the annotations (merged over those of enclosing blocks).

    Example:
        >>> import tensorbrain as tb
        >>> def f(x):
        ...     with tb.fx.traceback.annotate({"stage": 0}):
        ...         return x + 1
        >>> [n.meta.get("custom") for n in tb.fx.symbolic_trace(f).graph.nodes]
        [None, {'stage': 0}, None]
    """
    global _current_annotations
    saved = _current_annotations
    _current_annotations = {**saved, **annotation_dict}
    try:
        yield
    finally:
        _current_annotations = saved


def annotate_fn(annotation_dict: dict[str, Any]) -> Callable[[Callable], Callable]:
    """A decorator: the function's nodes get ``annotation_dict`` (see :func:`annotate`).

    Args:
        annotation_dict: the annotations.
    """
    def decorator(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with annotate(annotation_dict):
                return fn(*args, **kwargs)
        return wrapped
    return decorator


@contextlib.contextmanager
def preserve_node_meta(enable: bool = True) -> Iterator[None]:
    """Keep node metadata when a graph is re-traced or transformed (torch's switch; the
    annotations above are always kept here).

    Args:
        enable: the setting inside the block.
    """
    saved = _preserve[0]
    _preserve[0] = enable
    try:
        yield
    finally:
        _preserve[0] = saved


def has_preserved_node_meta() -> bool:
    """Whether :func:`preserve_node_meta` is on."""
    return _preserve[0]


__all__ = ["annotate", "annotate_fn", "has_preserved_node_meta", "preserve_node_meta"]
