"""``torch.distributions.uniform``: :class:`Uniform` (defined in ``continuous.py``)."""
from .continuous import Uniform

__all__ = ["Uniform"]
