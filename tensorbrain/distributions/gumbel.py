"""``torch.distributions.gumbel``: :class:`Gumbel` (defined in ``continuous.py``)."""
from .continuous import Gumbel

__all__ = ["Gumbel"]
