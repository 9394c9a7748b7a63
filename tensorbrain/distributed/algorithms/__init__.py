"""Algorithms on top of the collectives, as ``torch.distributed.algorithms``: :mod:`.join`."""
from .join import Join, Joinable, JoinHook

__all__ = ["Join", "JoinHook", "Joinable"]
