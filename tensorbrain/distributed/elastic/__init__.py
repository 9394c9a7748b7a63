"""torch.distributed.elastic's paths that scripts import (``multiprocessing.errors.record``)."""
