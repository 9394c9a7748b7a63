"""Model averaging (``torch.distributed.algorithms.model_averaging``): :mod:`.averagers`
(``PeriodicModelAverager``) and :mod:`.utils` (``average_parameters``), used by
``tb.distributed.optim.PostLocalSGDOptimizer`` and ``tb.distributed.ft``'s LocalSGD/DiLoCo."""
from . import averagers, utils

__all__ = ["averagers", "utils"]
