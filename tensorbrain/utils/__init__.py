"""``tb.utils``: ``tb.utils.data`` (data sets, samplers, DataLoader)."""
from . import data  # noqa: F401
