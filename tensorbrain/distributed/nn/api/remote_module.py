"""``torch.distributed.nn.api.remote_module``'s path for :class:`RemoteModule`."""
from .._remote_module import RemoteModule

__all__ = ["RemoteModule"]
