"""Named tuples returned by ops, as ``torch.return_types``."""
from typing import NamedTuple, Any


class MinMax(NamedTuple):
    values: Any
    indices: Any


class Sort(NamedTuple):
    values: Any
    indices: Any
