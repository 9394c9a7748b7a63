"""``tb.distributed.elastic.utils`` (``torch.distributed.elastic.utils``): the helpers launcher
code imports: :mod:`.distributed` (``get_free_port``), :mod:`.logging` (``get_logger``),
``macros`` (``${local_rank}`` in worker arguments)."""
from . import distributed, logging
from .api import macros

__all__ = ["distributed", "logging", "macros"]
