"""``tb.distributed._tensor``: torch's older import path of DTensor (before
``torch.distributed.tensor`` became public in torch 2.5); the same objects as
:mod:`tensorbrain.distributed.tensor` (see docs/device_mesh.md).

>>> from tensorbrain.distributed._tensor import DTensor, Shard
>>> import tensorbrain.distributed.tensor as t
>>> DTensor is t.DTensor and Shard is t.Shard
True
"""
from ..tensor import (DTensor, DeviceMesh, Partial, Placement, Replicate, Shard,
                      distribute_tensor, empty, full, init_device_mesh, ones, zeros)

__all__ = ["DTensor", "DeviceMesh", "Partial", "Placement", "Replicate", "Shard",
           "distribute_tensor", "empty", "full", "init_device_mesh", "ones", "zeros"]
