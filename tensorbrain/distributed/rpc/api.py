"""``tb.distributed.rpc.api`` (``torch.distributed.rpc.api``): torch's module path of the RPC
calls, which live in :mod:`tensorbrain.distributed.rpc` (the same objects)."""
from . import RRef, get_worker_info, remote, rpc_async, rpc_sync, shutdown

__all__ = ["RRef", "get_worker_info", "remote", "rpc_async", "rpc_sync", "shutdown"]
