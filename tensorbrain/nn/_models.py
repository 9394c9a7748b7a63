"""``tb.nn.ResNet50``: the name of ``tb.models.ResNet50`` in the ``tb.nn`` namespace (the
distributed guide's first spelling; torch has no ``nn.ResNet50``, the model lives in
``tb.models``).

This module sits in the models layer (tests/test_layers.py), above nn: ``tb.nn``'s
``__getattr__`` loads it on first use, as it loads ``tb.nn.parallel``, so ``import
tensorbrain.nn`` needs no model and nn imports nothing of ``tensorbrain.models``.
"""
from __future__ import annotations

from ..models import ResNet50

__all__ = ["ResNet50"]
