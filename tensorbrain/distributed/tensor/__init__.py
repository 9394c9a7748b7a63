"""``tb.distributed.tensor``: DTensor, placements and ``distribute_tensor`` (torch's
``torch.distributed.tensor``), a minimal version: layout and layout changes, not sharded ops.

>>> import tensorbrain as tb, tensorbrain.distributed as dist
>>> from tensorbrain.distributed.tensor import distribute_tensor, init_device_mesh, Shard
>>> dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
>>> d = distribute_tensor(tb.arange(6.0).reshape(3, 2), init_device_mesh("cpu", (1,)), [Shard(0)])
>>> d.full_tensor().tolist()
[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
>>> dist.destroy_process_group()
"""
from ..device_mesh import DeviceMesh, init_device_mesh
from ._api import DTensor
from ._dtensor_spec import DTensorSpec
from ._factories import distribute_tensor, empty, full, ones, zeros
from ._module_api import distribute_module
from .placement_types import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "DTensorSpec", "DeviceMesh", "Partial", "Placement", "Replicate", "Shard",
           "distribute_module", "distribute_tensor", "empty", "full", "init_device_mesh", "ones", "zeros"]
