"""Named tuples returned by ops, as ``torch.return_types``."""
from typing import NamedTuple, Any


class MinMax(NamedTuple):
    """``(values, indices)`` returned by ``max``/``min``/``median``... along a dimension."""
    values: Any
    indices: Any


class Sort(NamedTuple):
    """``(values, indices)`` returned by ``sort`` and ``topk``."""
    values: Any
    indices: Any
