"""torch.distributed.elastic.multiprocessing's ``errors`` (``record``, ``ErrorHandler``)."""
