"""``tb.distributed.algorithms._checkpoint``: torch's home of the activation-checkpointing
wrappers that FSDP programs use (:mod:`.checkpoint_wrapper`)."""
