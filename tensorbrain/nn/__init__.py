"""``tb.nn``: modules, parameters, losses, initialisation and functional ops, as ``torch.nn``.

>>> import tensorbrain as tb
>>> model = tb.nn.Sequential(tb.nn.Linear(8, 16), tb.nn.ReLU(), tb.nn.Linear(16, 3))
>>> loss = tb.nn.CrossEntropyLoss()(model(tb.randn(4, 8)), tb.tensor([0, 1, 2, 0]))
>>> loss.backward()
>>> model[0].weight.grad.shape
tb.Size([16, 8])

``tb.nn.parallel`` (DistributedDataParallel, DataParallel), ``tb.nn.SyncBatchNorm`` and
``tb.nn.ResNet50`` load on first use.
"""
from . import functional, init
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from .parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter

from . import utils  # noqa: E402  (clip_grad_*, needs Parameter)

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer", "functional", "init", "utils", "parallel", "attention",
           "SyncBatchNorm",
           "DataParallel",
           "ResNet50", *_modules_all]


def __getattr__(name):
    import importlib
    if name in ("parallel", "attention"):
        return importlib.import_module(f".{name}", __name__)
    if name == "DataParallel":  # torch.nn.DataParallel (tb.nn.parallel owns it)
        return importlib.import_module(".parallel", __name__).DataParallel
    if name == "SyncBatchNorm":
        return importlib.import_module(".modules.sync_batchnorm", __name__).SyncBatchNorm
    if name == "ResNet50":  # tb.models.ResNet50 (the guide's first spelling; see _models.py)
        return importlib.import_module("._models", __name__).ResNet50
    raise AttributeError(f"module 'tensorbrain.nn' has no attribute {name!r}")
