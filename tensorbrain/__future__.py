"""``tb.__future__`` (``torch.__future__``): the two switches of how ``Module.to()`` and friends
treat parameters. TensorBrain keeps the Parameter objects and changes their data in place,
which is what torch does with both switches off (their default); the switches are kept and
read back, and do not change that.

>>> import tensorbrain as tb
>>> tb.__future__.get_overwrite_module_params_on_conversion()
False
"""
from __future__ import annotations

_overwrite_module_params_on_conversion = False
_swap_module_params_on_conversion = False


def set_overwrite_module_params_on_conversion(value: bool) -> None:
    """Record torch's switch (new Parameter objects on conversion); TensorBrain converts in
    place whatever it says."""
    global _overwrite_module_params_on_conversion
    _overwrite_module_params_on_conversion = bool(value)


def get_overwrite_module_params_on_conversion() -> bool:
    """The switch set by :func:`set_overwrite_module_params_on_conversion` (False)."""
    return _overwrite_module_params_on_conversion


def set_swap_module_params_on_conversion(value: bool) -> None:
    """Record torch's switch (``swap_tensors`` on conversion); TensorBrain converts in place
    whatever it says, which keeps every reference to a parameter valid, as swapping does."""
    global _swap_module_params_on_conversion
    _swap_module_params_on_conversion = bool(value)


def get_swap_module_params_on_conversion() -> bool:
    """The switch set by :func:`set_swap_module_params_on_conversion` (False)."""
    return _swap_module_params_on_conversion


__all__ = ["get_overwrite_module_params_on_conversion", "get_swap_module_params_on_conversion",
           "set_overwrite_module_params_on_conversion", "set_swap_module_params_on_conversion"]
