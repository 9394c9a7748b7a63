"""Implementation of the key-value stores; import them from :mod:`tensorbrain.distributed.store`."""
