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

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]
__all__ += ["Adadelta", "Adagrad", "Adamax", "NAdam", "RAdam", "LBFGS"]
