"""``Stateful``: objects that ``save``/``load`` turn into state dicts and back (torch's protocol).

A top-level value of the state dict given to ``dcp.save`` that has ``state_dict()`` and
``load_state_dict(sd)`` (a model, an optimizer, an ``AppState`` wrapping both) is saved as its
``state_dict()``; ``dcp.load`` fills that state dict and hands it to ``load_state_dict``.
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["Stateful"]


@runtime_checkable
class Stateful(Protocol):
    """Anything with ``state_dict()`` and ``load_state_dict(state_dict)``."""

    def state_dict(self) -> dict[str, Any]:
        """This object's state, as a state dict."""
        ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the state from ``state_dict``.

        Args:
            state_dict: what ``state_dict()`` returned (possibly loaded from disk).
        """
        ...
