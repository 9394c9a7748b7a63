"""``tb.ao`` (``torch.ao``): ``tb.ao.quantization`` is :mod:`tensorbrain.quantization` (torch's
``torch.quantization`` re-exports ``torch.ao.quantization`` the same way), with its
``observer`` and ``qconfig`` submodules importable under both paths."""
import sys

from .. import quantization
from ..quantization import observer as _observer, qconfig as _qconfig

for _name, _module in (("", quantization), (".observer", _observer), (".qconfig", _qconfig)):
    sys.modules.setdefault(f"{__name__}.quantization{_name}", _module)

__all__ = ["quantization"]
