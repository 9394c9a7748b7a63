"""``torch.nn.utils.stateless``: ``functional_call`` (torch's older home of
``torch.func.functional_call``)."""
from __future__ import annotations

from ...func import functional_call

__all__ = ["functional_call"]
