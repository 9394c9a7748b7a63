"""``tb.distributed.config`` (``torch.distributed.config``): torch's distributed settings,
stored and without effect here: ``compile_on_one_rank`` (nothing compiles in TensorBrain) and
``use_torchcomms`` (TensorBrain has its own backends). ``patch(name=value)`` sets them for a
block, as a context manager or decorator; an unknown name is an ``AttributeError``, as torch's.

>>> import tensorbrain.distributed.config as dist_config
>>> with dist_config.patch(compile_on_one_rank=True):
...     dist_config.compile_on_one_rank
True
>>> dist_config.compile_on_one_rank
False
"""
from __future__ import annotations

from .._dynamo.config import _Config

#: torch's defaults.
_DEFAULTS = {"compile_on_one_rank": False, "use_torchcomms": False}
compile_on_one_rank = False
use_torchcomms = False
_config = _Config("torch.distributed.config", _DEFAULTS, values=globals())
patch = _config.patch

__all__ = ["compile_on_one_rank", "patch", "use_torchcomms"]
