"""``tb.overrides`` (``torch.overrides``): the ``__torch_function__`` protocol's helpers.
TensorBrain has no ``__torch_function__`` dispatch: ``has_torch_function*`` are False (nothing
overrides), ``is_tensor_like`` asks ``isinstance(x, Tensor)``; ``TorchFunctionMode`` and
``handle_torch_function`` are refused by name (``tensorbrain/_unsupported.py``).

>>> import tensorbrain as tb
>>> tb.overrides.has_torch_function((tb.ones(1),)), tb.overrides.is_tensor_like(tb.ones(1))
(False, True)
"""
from __future__ import annotations

from .tensor import Tensor
from ._unsupported import unsupported, unsupported_class

_WHY = "TensorBrain has no __torch_function__ dispatch"


def has_torch_function(relevant_args) -> bool:
    """False: no argument overrides TensorBrain's functions.

    Args:
        relevant_args: the arguments to look at.
    """
    return False


def has_torch_function_unary(obj) -> bool:
    """False (see :func:`has_torch_function`).

    Args:
        obj: the argument.
    """
    return False


def has_torch_function_variadic(*args) -> bool:
    """False (see :func:`has_torch_function`).

    Args:
        *args: the arguments.
    """
    return False


def is_tensor_like(inp) -> bool:
    """Whether ``inp`` is a TensorBrain Tensor.

    Args:
        inp: any object.
    """
    return isinstance(inp, Tensor)


def get_default_nowrap_functions() -> set:
    """The functions torch's ``__torch_function__`` does not wrap; an empty set here (there is
    no ``__torch_function__`` dispatch)."""
    return set()


handle_torch_function = unsupported("torch.overrides.handle_torch_function", _WHY)
TorchFunctionMode = unsupported_class("torch.overrides.TorchFunctionMode", _WHY)
BaseTorchFunctionMode = unsupported_class("torch.overrides.BaseTorchFunctionMode", _WHY)
