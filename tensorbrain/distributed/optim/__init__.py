"""``tb.distributed.optim``: ``ZeroRedundancyOptimizer`` (optimizer state sharded across ranks),
``DistributedOptimizer`` (steps with a distributed autograd context's gradients) and
``PostLocalSGDOptimizer`` (local SGD with periodic model averaging)."""
from .optimizer import DistributedOptimizer
from .post_localSGD_optimizer import PostLocalSGDOptimizer
from .zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["DistributedOptimizer", "PostLocalSGDOptimizer", "ZeroRedundancyOptimizer"]
