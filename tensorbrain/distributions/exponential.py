"""``torch.distributions.exponential``: :class:`Exponential` (defined in ``continuous.py``)."""
from .continuous import Exponential

__all__ = ["Exponential"]
