"""``tb.optim``: SGD, Adam, AdamW, RMSprop and learning-rate schedulers, as in PyTorch."""
from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .lbfgs import LBFGS
from .nadam import NAdam, RAdam
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD
from ._stateless import swap_in_optimizer_params_and_state
from . import swa_utils  # noqa: E402  (torch.optim.swa_utils)
from .._unsupported import unsupported_class

SparseAdam = unsupported_class("torch.optim.SparseAdam", "TensorBrain has no sparse gradients "
                               "(Embedding(sparse=True) is refused too)", "optim.Adam")

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler",
           "swap_in_optimizer_params_and_state"]
__all__ += ["Adadelta", "Adagrad", "Adamax", "NAdam", "RAdam", "LBFGS", "swa_utils",
            "SparseAdam"]
