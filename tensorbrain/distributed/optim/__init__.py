"""``tb.distributed.optim``: ``ZeroRedundancyOptimizer`` (optimizer state sharded across
ranks) and ``DistributedOptimizer`` (steps with a distributed autograd context's gradients)."""
from .optimizer import DistributedOptimizer
from .zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["DistributedOptimizer", "ZeroRedundancyOptimizer"]
