"""``torch.distributed.nn.api``'s path: :mod:`.remote_module`."""
