"""``tb.models``: ready-made networks (torchvision's ResNets, a tiny transformer)."""
from .resnet import (BasicBlock, Bottleneck, ResNet, ResNet50, resnet18, resnet34,  # noqa: F401
                     resnet50)
from .transformer import TinyTransformer  # noqa: F401

__all__ = ["ResNet", "BasicBlock", "Bottleneck", "ResNet50", "resnet18", "resnet34", "resnet50",
           "TinyTransformer"]
