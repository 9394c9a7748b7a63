"""``tb.distributed.constants``: the default process-group timeouts (torch's values)."""
from ._groups import default_pg_timeout

#: NCCL groups' default timeout (torch's: the same 30 minutes).
default_pg_nccl_timeout = default_pg_timeout

__all__ = ["default_pg_nccl_timeout", "default_pg_timeout"]
