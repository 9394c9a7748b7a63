"""``torch.utils.mobile_optimizer``: refused by name. ``optimize_for_mobile`` rewrites a
TorchScript module for PyTorch Mobile (Lite Interpreter); TensorBrain writes no TorchScript."""
from .._unsupported import unsupported, unsupported_class

_WHY = "it optimises TorchScript modules for PyTorch Mobile, and TensorBrain has no TorchScript"
_USE = "PyTorch's torch.utils.mobile_optimizer on the model loaded from tb.save's state dict"
optimize_for_mobile = unsupported("torch.utils.mobile_optimizer.optimize_for_mobile", _WHY, _USE)
MobileOptimizerType = unsupported_class("torch.utils.mobile_optimizer.MobileOptimizerType", _WHY,
                                        _USE)

__all__ = ["MobileOptimizerType", "optimize_for_mobile"]
