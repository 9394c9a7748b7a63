"""``tb.distributed.tensor.experimental``: torch's experimental DTensor tools, refused by name.

``context_parallel`` shards attention over the sequence with ring attention inside
``F.scaled_dot_product_attention``'s dispatch; ``local_map`` and ``register_sharding`` hook
DTensor's op dispatch. TensorBrain's DTensor has no sharded-op dispatch (layouts and layout
changes only), so each raises ``NotSupportedError`` naming itself and what to use.
"""
from ..._unsupported import refuse_names

refuse_names(globals(), "torch.distributed.tensor.experimental",
             "context_parallel context_parallel_unshard local_map register_sharding "
             "implicit_replication",
             "TensorBrain's DTensor has no sharded-op dispatch (ring attention, local_map "
             "and custom sharding rules plug into it)",
             "sequence parallelism through tb.distributed.tensor.parallel.SequenceParallel, or "
             "full tensors (DTensor.full_tensor()) around the op")
