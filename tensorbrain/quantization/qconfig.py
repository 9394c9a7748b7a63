"""``torch.ao.quantization.qconfig``: :class:`QConfig` (which observers a layer's activation
and weight get) and torch's ready-made ones. They are plain data; the passes that use them
(``prepare``, ``convert``, ``quantize_dynamic``) are refused by name in :mod:`tensorbrain.quantization`.

>>> from tensorbrain.quantization.qconfig import per_channel_dynamic_qconfig
>>> type(per_channel_dynamic_qconfig.weight()).__name__
'PerChannelMinMaxObserver'
"""
from __future__ import annotations

from collections import namedtuple

from ..nn.modules.module import Module
from . import observer as O


class QConfig(namedtuple("QConfig", ["activation", "weight"])):
    """The observer factories for a layer's activation and weight, as torch's ``QConfig``.

    Args:
        activation: a factory (an observer class or ``Observer.with_args(...)``).
        weight: a factory.

    Raises:
        ValueError: an observer instance instead of a factory (torch's check).
    """

    __slots__ = ()

    def __new__(cls, activation, weight):
        if isinstance(activation, Module) or isinstance(weight, Module):
            raise ValueError("QConfig received observer instance, please pass observer class "
                             "instead. Use MyObserver.with_args(x=1) to override arguments to "
                             "constructor if needed")
        return super().__new__(cls, activation, weight)


default_dynamic_qconfig = QConfig(activation=O.default_dynamic_quant_observer,
                                  weight=O.default_weight_observer)
per_channel_dynamic_qconfig = QConfig(activation=O.default_dynamic_quant_observer,
                                      weight=O.default_per_channel_weight_observer)
default_qconfig = QConfig(activation=O.default_observer, weight=O.default_weight_observer)

__all__ = ["QConfig", "default_dynamic_qconfig", "default_qconfig", "per_channel_dynamic_qconfig"]
