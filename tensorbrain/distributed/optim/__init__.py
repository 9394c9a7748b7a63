"""``tb.distributed.optim``: ``ZeroRedundancyOptimizer`` (optimizer state sharded across ranks)
and ``PostLocalSGDOptimizer`` (local SGD with periodic model averaging)."""
from .post_localSGD_optimizer import PostLocalSGDOptimizer
from .zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["PostLocalSGDOptimizer", "ZeroRedundancyOptimizer"]
