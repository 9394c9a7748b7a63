"""``tb.cuda.memory`` (``torch.cuda.memory``): the memory figures, defined in
``tensorbrain/_cuda_memory.py`` and also reached as ``tb.cuda.memory_allocated`` & co."""
from __future__ import annotations

from .._cuda_memory import *  # noqa: F401,F403
from .._cuda_memory import __all__  # noqa: F401
from .monitor import (CUDAPluggableAllocator, MemPool, change_current_allocator,  # noqa: F401,E402
                      memory_snapshot, use_mem_pool)
