"""``RemoteModule``: a module that lives on another RPC worker (``torch.distributed.nn.RemoteModule``).

``RemoteModule("worker1/cpu", nn.Linear, args=(4, 2))`` builds the module on ``worker1`` (through
``rpc.remote``); ``forward``/``__call__`` run it there with ``rpc_sync``, ``forward_async`` with
``rpc_async``, and inside ``dist_autograd.context()`` the gradients flow back through the calls;
``remote_parameters()`` hands RRefs to its parameters to a ``DistributedOptimizer``. The module
class must be importable by name on the remote worker (TensorBrain's RPC sends names, never
pickles), which is so for ``tb.nn`` classes and classes defined at module level.
"""
from __future__ import annotations

from ...nn.modules.module import Module
from .. import rpc

__all__ = ["RemoteModule"]

_LOCAL_ONLY = ("parameters", "named_parameters", "buffers", "named_buffers", "children",
               "named_children", "modules", "named_modules", "state_dict", "load_state_dict",
               "to", "cuda", "cpu", "half", "float", "double", "bfloat16", "type", "train",
               "eval", "zero_grad", "requires_grad_", "apply", "share_memory")


def _parameter_rrefs(module_rref, recurse: bool) -> list:
    """On the owner: RRefs to the parameters of the module ``module_rref`` holds."""
    return [rpc.RRef(p) for p in module_rref.local_value().parameters(recurse)]


def _parse_device(remote_device: str) -> tuple[str, str]:
    if not isinstance(remote_device, str) or "/" not in remote_device:
        raise ValueError(f"remote_device={remote_device!r}: expected '<worker name>/<device>' "
                         f"(such as 'trainer0/cpu' or 'rank:1/cuda:0')")
    worker, _, device = remote_device.partition("/")
    if not worker or not device:
        raise ValueError(f"remote_device={remote_device!r}: both the worker and the device must "
                         f"be given ('<worker name>/<device>')")
    return worker, device


class RemoteModule(Module):
    """A module instance on a remote RPC worker, called like a local one.

    Args:
        remote_device (str): ``"<worker name>/<device>"`` or ``"rank:<r>/<device>"``; the device
            is where the module's tensors live on that worker (``cpu`` or ``cuda:N``).
        module_cls (type): the ``nn.Module`` class to build there.
        args (tuple | None): its positional arguments.
        kwargs (dict | None): its keyword arguments.

    Raises:
        ValueError: a malformed ``remote_device``.
        TypeError: ``module_cls`` is not a Module class.

    Example::

        rm = RemoteModule("ps/cpu", tb.nn.Linear, args=(20, 30))
        with dist_autograd.context() as ctx:
            loss = rm(x).sum()
            dist_autograd.backward(ctx, [loss])
        opt = DistributedOptimizer(tb.optim.SGD, rm.remote_parameters(), lr=0.05)
    """

    def __init__(self, remote_device: str, module_cls: type, args: tuple | None = None,
                 kwargs: dict | None = None):
        super().__init__()
        worker, device = _parse_device(remote_device)
        if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
            raise TypeError(f"module_cls must be an nn.Module class, got {module_cls!r}")
        self.on = int(worker[5:]) if worker.startswith("rank:") else worker
        self.device = device
        self.module_rref = rpc.remote(self.on, module_cls, tuple(args or ()), dict(kwargs or {}))
        if device != "cpu":
            self.module_rref.rpc_sync().to(device)

    def forward(self, *args, **kwargs):
        """Run the remote module's forward there and wait for the result.

        Args:
            *args: its positional arguments (tensors and data).
            **kwargs: its keyword arguments.
        """
        return self.module_rref.rpc_sync().forward(*args, **kwargs)

    def forward_async(self, *args, **kwargs):
        """Like :meth:`forward`, returning a Future of the result.

        Args:
            *args: its positional arguments.
            **kwargs: its keyword arguments.
        """
        return self.module_rref.rpc_async().forward(*args, **kwargs)

    def remote_parameters(self, recurse: bool = True) -> list:
        """RRefs to the remote module's parameters (for ``DistributedOptimizer``).

        Args:
            recurse: include submodules' parameters.
        """
        return rpc.rpc_sync(self.on, _parameter_rrefs, (self.module_rref, recurse))

    def get_module_rref(self):
        """The RRef to the remote module."""
        return self.module_rref

    def __getattribute__(self, name):
        if name in _LOCAL_ONLY:
            raise ValueError(f"Method ``{name}`` not supported for RemoteModule: the module "
                             f"lives on {object.__getattribute__(self, 'on')!r}; call it through "
                             f"get_module_rref().rpc_sync().{name}(...)")
        return super().__getattribute__(name)
