"""``tb.utils``: ``tb.utils.data`` (data sets, samplers, DataLoader)."""
from . import data  # noqa: F401
from . import dlpack  # noqa: F401,E402  (tb.utils.dlpack, as torch.utils.dlpack)
