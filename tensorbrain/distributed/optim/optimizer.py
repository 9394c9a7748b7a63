"""``DistributedOptimizer``: one optimizer per worker that owns parameters, stepped with the
gradients of a distributed autograd context (torch's
``torch.distributed.optim.DistributedOptimizer``)."""
from __future__ import annotations

__all__ = ["DistributedOptimizer"]


class _LocalOptimizer:
    """The optimizer on one owner, over the parameters its RRefs hold."""

    def __init__(self, optimizer_name: str, param_rrefs, args, kwargs):
        from ..rpc import _agent
        cls = _agent.resolve(optimizer_name)
        self.params = [r.local_value() for r in param_rrefs]
        self.optim = cls(self.params, *args, **kwargs)

    def step(self, context_id: int) -> None:
        from .. import autograd as dist_autograd
        grads = dist_autograd.get_gradients(context_id)
        saved = [p.grad for p in self.params]
        for p in self.params:      # the context's gradients, not .grad (torch leaves it alone)
            p.grad = grads.get(p)
        try:
            self.optim.step()
        finally:
            for p, g in zip(self.params, saved):
                p.grad = g


def _new_local_optimizer(optimizer_name, param_rrefs, args, kwargs):
    return _LocalOptimizer(optimizer_name, param_rrefs, args, kwargs)


def _local_step(optimizer_rref, context_id) -> None:
    optimizer_rref.local_value().step(context_id)


class DistributedOptimizer:
    """Step the parameters of every worker with the gradients of one distributed autograd
    context: an ``optimizer_class`` instance is made on each worker that owns some of
    ``params_rref`` (over its own parameters), and ``step(context_id)`` steps them all at once.

    Args:
        optimizer_class: a ``tb.optim`` class (importable by name), e.g. ``optim.SGD``.
        params_rref: RRefs of the parameters (``RRef(p)`` on their owners).
        *args: the optimizer's positional arguments.
        **kwargs: its keywords (``lr=...``).

    Example:
        >>> from tensorbrain.distributed.optim import DistributedOptimizer  # doctest: +SKIP
        >>> opt = DistributedOptimizer(tb.optim.SGD, param_rrefs, lr=0.05)  # doctest: +SKIP
        >>> with dist_autograd.context() as ctx:                            # doctest: +SKIP
        ...     dist_autograd.backward(ctx, [loss]); opt.step(ctx)
    """

    def __init__(self, optimizer_class, params_rref, *args, **kwargs):
        from .. import rpc
        from ..rpc import _agent
        name = _agent.qualified_name(optimizer_class)
        by_owner: dict = {}
        for r in params_rref:
            by_owner.setdefault(r._owner, []).append(r)
        self.remote_optimizers = [
            rpc.remote(owner, _new_local_optimizer, args=(name, refs, list(args), kwargs))
            for owner, refs in sorted(by_owner.items())]

    def step(self, context_id: int) -> None:
        """Step every worker's optimizer with its gradients in ``context_id``.

        Args:
            context_id: the distributed autograd context.
        """
        from .. import rpc
        futures = [rpc.rpc_async(o._owner, _local_step, args=(o, context_id))
                   for o in self.remote_optimizers]
        for f in futures:
            f.wait()
