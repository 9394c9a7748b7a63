"""``tb.distributed._composable``: where torch 2.4-2.5 kept FSDP2 (``torch.distributed.
_composable.fsdp.fully_shard``); programs written for those versions import it from here. The
current home is :mod:`tensorbrain.distributed.fsdp`."""
