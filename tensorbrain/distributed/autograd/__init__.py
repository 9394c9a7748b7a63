"""``tb.distributed.autograd``: backward across RPC (torch's ``torch.distributed.autograd``).

Inside ``with dist_autograd.context() as context_id:`` every RPC records its autograd edges:
tensors sent that require grad become leaves on the callee (their gradients travel back), and
tensors the callee returns that require grad are linked on the caller to the call's inputs, so
``dist_autograd.backward(context_id, [loss])`` runs the backward pass over every worker the
forward touched: each result's gradient is sent to the worker that made it, which runs its part
of the graph and sends back the gradients of what it received. The gradients of each worker's
leaves (parameters) are kept in the context, not in ``.grad``: read them with
``get_gradients(context_id)`` (a dict tensor -> gradient) or apply them with
``torch.distributed.optim.DistributedOptimizer``. Leaving the ``with`` block frees the context
on every worker it reached.

Example:
    >>> import tensorbrain as tb
    >>> import tensorbrain.distributed.autograd as dist_autograd
    >>> w = tb.tensor([2.0], requires_grad=True)
    >>> with dist_autograd.context() as ctx:
    ...     dist_autograd.backward(ctx, [(w * w).sum()])
    ...     dist_autograd.get_gradients(ctx)[w].tolist()
    [4.0]
"""
from __future__ import annotations

import contextlib
import itertools
import threading

__all__ = ["backward", "context", "get_gradients"]

_contexts: dict = {}
_current = threading.local()
_counter = itertools.count(1)
_lock = threading.Lock()


class _Context:
    def __init__(self, cid: int):
        self.id = cid
        self.peers: set = set()
        self.grads: dict = {}      # id(leaf) -> [leaf, grad array]
        self.sent: dict = {}       # call key -> output tensors (callee side)
        self.recv: dict = {}       # call key -> leaves made from received tensors
        self.lock = threading.Lock()

    def accumulate(self, leaf, grad) -> None:
        if grad is None or getattr(leaf, "_rpc_anchor", False):
            return
        with self.lock:
            entry = self.grads.get(id(leaf))
            if entry is None:
                self.grads[id(leaf)] = [leaf, grad._data.copy()]
            else:
                entry[1] = entry[1] + grad._data


def _ctx(cid: int, create: bool = False) -> _Context:
    with _lock:
        ctx = _contexts.get(cid)
        if ctx is None:
            if not create:
                raise RuntimeError(f"Could not find autograd context with id: {cid}")
            ctx = _contexts[cid] = _Context(cid)
        return ctx


def _active():
    return getattr(_current, "ctx", None)


class context:  # noqa: N801  (torch's name)
    """A distributed autograd context: ``with context() as context_id:``."""

    def __enter__(self) -> int:
        rank = 0
        from ..rpc._agent import running
        agent = running()
        if agent is not None:
            rank = agent.rank
        cid = (rank << 48) + next(_counter)
        self.ctx, self.previous = _ctx(cid, create=True), _active()
        _current.ctx = self.ctx
        return cid

    def __exit__(self, *exc):
        _current.ctx = self.previous
        _release(self.ctx.id)
        return False


def _run_backward(ctx: _Context, roots, grads, retain_graph: bool):
    """Backward from ``roots``; leaf gradients into the context; returns {id(leaf): grad}."""
    import tensorbrain as tb
    from ...autograd.graph import reachable_leaves
    leaves = reachable_leaves(roots)
    if not leaves:
        return {}
    previous = _active()
    _current.ctx = ctx
    try:
        got = tb.autograd.grad(list(roots), leaves, grad_outputs=grads,
                               retain_graph=retain_graph, allow_unused=True)
    finally:
        _current.ctx = previous
    for leaf, g in zip(leaves, got):
        ctx.accumulate(leaf, g)
    return {id(leaf): g for leaf, g in zip(leaves, got)}


def backward(context_id: int, roots, retain_graph: bool = False) -> None:
    """Run backward from ``roots`` (scalars) across every worker the forward reached.

    Args:
        context_id: the id ``context()`` gave.
        roots: the tensors to differentiate (each a scalar).
        retain_graph: keep the graph for another backward.

    Raises:
        RuntimeError: an unknown context id, or a root that is not a scalar.
    """
    import tensorbrain as tb
    ctx = _ctx(context_id)
    roots = list(roots)
    for r in roots:
        if r.numel() != 1:
            raise RuntimeError(f"dist_autograd.backward: roots must be scalars, got shape "
                               f"{tuple(r.shape)}")
    _run_backward(ctx, roots, [tb.ones_like(r) for r in roots], retain_graph)


def get_gradients(context_id: int) -> dict:
    """``{tensor: gradient}`` of this worker's leaves in the context.

    Args:
        context_id: the id ``context()`` gave.
    """
    from ...tensor import Tensor
    ctx = _ctx(context_id)
    with ctx.lock:
        return {leaf: Tensor._wrap(g) for leaf, g in ctx.grads.values()}


# ***** what RPC calls (rpc/__init__.py) *****
def _tensors(obj, out):
    from ...tensor import Tensor
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _tensors(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _tensors(o, out)
    return out


def _before_send(peer: int, msg: dict, payload):
    """In a context: mark the message and remember the inputs that require grad."""
    ctx = _active()
    if ctx is None:
        return None
    ctx.peers.add(peer)
    key = f"{msg.get('op')}:{id(msg)}:{next(_counter)}"
    msg["ctx"], msg["key"] = ctx.id, key
    inputs = [t for t in _tensors(payload, []) if t.requires_grad]
    return ctx, peer, key, inputs


def _after_reply(record, value):
    """Link the result tensors that require grad to the call's inputs (caller side)."""
    if record is None:
        return value
    ctx, peer, key, inputs = record
    outs = [t for t in _tensors(value, []) if t.requires_grad]
    if not outs:
        return value
    import tensorbrain as tb
    linked = {}
    for i, t in enumerate(outs):
        anchor = tb.zeros((), requires_grad=True)
        anchor._rpc_anchor = True
        linked[id(t)] = _RemoteResult.apply({"ctx": ctx.id, "peer": peer, "key": key,
                                             "index": i, "value": t.detach()}, anchor, *inputs)
    return _replace(value, linked)


def _replace(obj, linked):
    from ...tensor import Tensor
    if isinstance(obj, Tensor):
        return linked.get(id(obj), obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_replace(o, linked) for o in obj)
    if isinstance(obj, dict):
        return {k: _replace(v, linked) for k, v in obj.items()}
    return obj


def _make_result_function():
    from ...autograd.function import Function

    class _RemoteResult(Function):
        """A result of an RPC: its gradient goes back to the worker that computed it, whose
        answer is the gradient of each input the call sent."""

        @staticmethod
        def forward(fctx, info, anchor, *inputs):
            fctx.info = info
            fctx.n = len(inputs)
            return info["value"].clone()

        @staticmethod
        def backward(fctx, grad):
            from ..rpc._agent import call
            info = fctx.info
            grads = call(info["peer"], {"op": "backward", "ctx": info["ctx"],
                                             "key": info["key"], "index": info["index"],
                                             "grad": grad.detach()}, "dist_autograd.backward")
            return (None, None, *grads)
    return _RemoteResult


_RemoteResult = _make_result_function()


@contextlib.contextmanager
def _serving(msg, payload):
    """Callee side of a call: inputs that require grad become this context's leaves for the
    call; outputs that require grad are kept for the backward that may come."""
    if "ctx" not in msg:
        yield lambda v: v
        return
    ctx = _ctx(msg["ctx"], create=True)
    ctx.recv[msg["key"]] = [t for t in _tensors(payload, []) if t.requires_grad]
    previous = _active()
    _current.ctx = ctx

    def keep(value):
        ctx.sent[msg["key"]] = [t for t in _tensors(value, []) if t.requires_grad]
        return value
    try:
        yield keep
    finally:
        _current.ctx = previous


def _remote_backward(msg):
    """Callee side of backward: the result's gradient in; the inputs' gradients out."""
    import tensorbrain as tb
    ctx = _ctx(msg["ctx"])
    out = ctx.sent[msg["key"]][msg["index"]]
    got = _run_backward(ctx, [out], [msg["grad"]], retain_graph=True)
    return [got.get(id(leaf)) if got.get(id(leaf)) is not None else tb.zeros_like(leaf)
            for leaf in ctx.recv[msg["key"]]]


def _release(cid: int):
    """Forget a context here and on every worker it reached from here."""
    with _lock:
        ctx = _contexts.pop(cid, None)
    if ctx is None:
        return None
    from ..rpc._agent import call, running
    if running() is not None:
        for peer in ctx.peers:
            try:
                call(peer, {"op": "release", "ctx": cid}, "dist_autograd release")
            except (RuntimeError, ConnectionError, TimeoutError):
                pass   # a worker that is gone has nothing to free
    return None


def _forget_all() -> None:
    with _lock:
        _contexts.clear()
