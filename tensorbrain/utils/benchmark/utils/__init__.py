"""``tb.utils.benchmark.utils`` (``torch.utils.benchmark.utils``): torch's module path of
:mod:`~tensorbrain.utils.benchmark.utils.common`."""
from . import common  # noqa: F401
