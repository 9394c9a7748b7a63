"""The backward engine: iterative (no recursion limit), frees the graph as it goes.

Order: a node runs once every consumer has delivered its gradient; among ready nodes the most
recently created runs first (PyTorch's rule), so gradients are produced in reverse forward order.
A leaf is accumulated (and its post-accumulate-grad hooks run) once all its contributions are
summed, so a hook sees the leaf's full gradient exactly once per backward: DDP relies on this.
"""
from __future__ import annotations

import heapq

import numpy as np

from . import anomaly, grad_mode
from .graph import Node, SliceGrad, _local, queue_callback  # noqa: F401  (queue_callback: re-exported)
from .._tensor_base import TensorBase as Tensor
from .._xp import add, get_array_module

# tensorbrain.profiler's slot: while a profile records, ``hook(node, grad)`` runs each node's
# backward (timing it); None otherwise. Read once per backward() call.
PROFILE_HOOK: list = [None]


def _sum_into(prev, g, owned):
    """``prev + g`` for the pending sum of one node or leaf. ``owned`` holds the ids of the
    arrays this backward made for its sums and has not handed out yet: those are added into in
    place (no one else can see them); any other array gets a new one. Slices of one array stay
    slices until the sum meets a full-size gradient or leaves the engine (``SliceGrad.dense``)."""
    if type(prev) is SliceGrad and type(g) is SliceGrad:
        return prev.plus(g)
    if type(prev) is SliceGrad:
        prev = prev.dense()
        owned.add(id(prev))
    if id(prev) in owned:
        if type(g) is SliceGrad:
            prev[g.index] += g.value
        elif isinstance(prev, np.generic):   # a NumPy scalar (a 0-d op's sum): a new one
            prev = prev + g
        else:
            add(prev, g, out=prev)
        return prev
    if type(g) is SliceGrad:
        out = prev.copy()
        out[g.index] += g.value
    else:
        out = add(prev, g)   # large float32 sums split across threads (_xp.add)
    owned.add(id(out))
    return out


def _take(grad, owned):
    """A pending sum leaving the engine's hands: a plain array from now on."""
    owned.discard(id(grad))
    return grad.dense() if type(grad) is SliceGrad else grad


# ***** a place offered for a leaf's gradient (DDP's resident arena) *****
# Set by the first offer: until a program makes one, linear's backward and autograd.grad skip
# the lookups below.
_offered = False


def offer_grad_dests(leaves, arrays) -> None:
    """Offer each array of ``arrays`` as where the next backward may write the whole gradient
    of the leaf at the same position of ``leaves``, once; leaves that have a ``.grad`` are
    skipped.

    DDP's reducer offers each parameter without a ``.grad`` its slot of the shared-memory
    gradient arena for one synchronised backward, a bucket at a time, so the weight- and
    bias-gradient products write straight there and the reducer's hook has nothing to copy
    (docs/ddp.md). An op that makes a leaf's gradient in one array takes the offer with
    :func:`take_grad_dest`; other ops ignore it and the hook copies, as before.

    Args:
        leaves: tensors that require grad and have no ``grad_fn``.
        arrays: contiguous arrays of their shapes and dtypes, one per leaf.
    """
    global _offered
    _offered = True
    for leaf, array in zip(leaves, arrays):
        if leaf.grad is None:
            leaf.__dict__["_grad_dest"] = array


def take_grad_dest(leaf, shape, dtype):
    """The array offered for ``leaf``'s gradient when it fits and will become ``.grad`` as is
    (``leaf.grad`` is None), else None. An offer is taken once: a weight used twice gets it for
    one contribution, and the engine sums the two into a new array (``_sum_into``).

    Args:
        leaf: the tensor whose gradient the caller is about to compute.
        shape: the gradient's shape.
        dtype: the gradient's dtype.
    """
    if not _offered:
        return None
    d = leaf.__dict__.pop("_grad_dest", None)
    if d is None or leaf.grad is not None or d.shape != shape or d.dtype != dtype:
        return None
    return d


def withdraw_grad_dests(leaves) -> None:
    """Take back every offer to ``leaves`` (a backward that returns gradients instead of
    accumulating them, or the end of the backward the offers were for).

    Args:
        leaves: the tensors offered to (any that were not are skipped).
    """
    for leaf in leaves:
        leaf.__dict__.pop("_grad_dest", None)


def _check_saved(node):
    for tensor, version in node.saved:
        if tensor._version[0] != version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: {node.name} needs a tensor of shape {tuple(tensor.shape)} "
                f"at version {version}, but it is now at version {tensor._version[0]}. Make a "
                "copy (.clone()) before changing it in place, or change it after backward.")


def _accumulate_leaf(leaf, grad, inputs_filter, results):
    hooks = leaf._hooks
    if hooks:
        for hook in hooks:
            new = hook(Tensor._wrap(grad))
            if new is not None:
                grad = new._data
    if inputs_filter is not None:  # autograd.grad: collect instead of accumulating into .grad
        if id(leaf) in inputs_filter:
            prev = results.get(id(leaf))
            results[id(leaf)] = grad if prev is None else prev + grad
        return
    if leaf.grad is None:
        # The engine hands each array to one consumer only (see run_backward), so the leaf may
        # keep it; read-only arrays (broadcast views from sum/mean backward) are copied.
        if not getattr(grad.flags, "writeable", True):
            grad = grad.copy()
        leaf.grad = Tensor._wrap(grad)
    else:
        g = leaf.grad._data
        if g.shape != grad.shape:
            raise RuntimeError(f"gradient of shape {tuple(grad.shape)} cannot be accumulated into "
                               f".grad of shape {tuple(g.shape)}")
        g += grad  # in place: .grad may be a view into a DDP bucket
    for hook in leaf._post_acc_hooks or ():
        hook(leaf)


def run_backward(roots, grads, retain_graph=False, inputs=None):
    """Backpropagate ``grads`` (arrays) from ``roots`` (tensors).

    With ``inputs`` (tensors) the gradients of those tensors are returned instead of being
    accumulated into ``.grad`` (``autograd.grad``).

    Args:
        roots: the tensors backward starts from.
        grads: their gradients (arrays).
        retain_graph: keep the graph for another pass.
        inputs: accumulate only into these tensors (None: every leaf).
    """
    # 1. Count, for every node and leaf, how many gradient contributions it will receive.
    #    Nodes are their own dict keys (identity hash); leaves are keyed by id() because Tensor
    #    overloads ``==``.
    deps: dict = {}
    leaves: dict = {}
    stack = [r.grad_fn for r in roots if r.grad_fn is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.backward is None:
            raise RuntimeError(
                f"Trying to backward through the graph a second time ({node.name}): its saved "
                "values were freed after the first backward. Specify retain_graph=True on the "
                "first backward() (or autograd.grad()) call if you need to backward twice.")
        for e in node.edges:
            if e is None:
                continue
            if type(e) is Node:
                deps[e] = deps.get(e, 0) + 1
                if e not in seen:
                    stack.append(e)
            else:
                k = id(e)
                deps[k] = deps.get(k, 0) + 1
                leaves[k] = e

    inputs_filter = None if inputs is None else {id(t) for t in inputs}
    if inputs is not None and _offered:  # autograd.grad hands the arrays out: never a slot
        withdraw_grad_dests(leaves.values())
    nonleaf_inputs = {} if inputs is None else {
        t.grad_fn: id(t) for t in inputs if t.grad_fn is not None}
    results: dict[int, object] = {}
    pending: dict = {}   # node or id(leaf) -> summed gradient not yet consumed
    owned: set = set()   # ids of pending sums this backward made (see _sum_into)
    ready = []
    callbacks: list = []
    stack_cb = getattr(_local, "callbacks", None)
    if stack_cb is None:
        stack_cb = _local.callbacks = []
    stack_cb.append(callbacks)
    prev_mode = grad_mode.is_grad_enabled()
    grad_mode._set(False)
    heappush, heappop = heapq.heappush, heapq.heappop
    prof = PROFILE_HOOK[0]
    check_nan = anomaly.is_anomaly_check_nan_enabled()   # tb.autograd.detect_anomaly()
    try:
        for root, grad in zip(roots, grads):
            grad = grad.copy()  # never alias the caller's gradient array
            if root.grad_fn is None:
                if root.requires_grad:
                    _accumulate_leaf(root, grad, inputs_filter, results)
                continue
            key = root.grad_fn
            prev = pending.get(key)
            pending[key] = grad if prev is None else prev + grad
        for root in roots:
            node = root.grad_fn
            if node is not None and deps.get(node, 0) == 0 and node in pending:
                deps[node] = -1  # mark as queued
                heappush(ready, (-node.seq, node))

        # 2. Run nodes in dependency order, newest first (seq is unique: nodes never compare).
        while ready:
            node = heappop(ready)[1]
            grad = _take(pending.pop(node), owned)
            if node.pre_hooks:
                for hook in node.pre_hooks:
                    grad = hook(grad)
            if nonleaf_inputs and node in nonleaf_inputs:  # autograd.grad asked for this tensor
                results[nonleaf_inputs[node]] = grad
            if node.saved:
                _check_saved(node)
            in_grads = node.backward(grad) if prof is None else prof(node, grad)
            inputs = node.inputs
            if not retain_graph:
                node.backward = None
                node.saved = ()
                # Drop the input tensors too: a graph kept alive by its output (the loss) would
                # otherwise hold every activation until the loss is freed, as torch does not.
                node.inputs = ()
            handed = None
            for e, t, g in zip(node.edges, inputs, in_grads):
                if g is None or e is None:
                    continue
                # A backward may return one array for several inputs (add returns g twice);
                # give each consumer its own so in-place accumulation cannot alias them.
                if type(g) is SliceGrad:    # only read: its value may alias another's
                    pass
                elif handed is None:
                    handed = [g]
                elif any(g is h for h in handed):
                    g = g.copy()
                else:
                    handed.append(g)
                td = t._data
                if g.dtype != td.dtype:
                    # A float32 input meeting a float64 one gets a float64 gradient from the op;
                    # the input's gradient takes the input's dtype, as in PyTorch.
                    g = g.astype(td.dtype)
                if g.shape != td.shape:
                    raise RuntimeError(
                        f"{node.name} returned a gradient of shape {tuple(g.shape)} for an input of "
                        f"shape {tuple(t._data.shape)} (an op's backward is wrong; please report it)")
                gv = g.value if type(g) is SliceGrad else g
                if check_nan and get_array_module(gv).isnan(gv).any():
                    raise RuntimeError(f"Function '{node.name}' returned nan values in its "
                                       f"gradient (anomaly detection is on)")
                nxt = e if type(e) is Node else None
                k = e if nxt is not None else id(e)
                prev = pending.get(k)
                pending[k] = g if prev is None else _sum_into(prev, g, owned)
                left = deps[k] - 1
                deps[k] = left
                if left == 0:
                    if nxt is not None:
                        heappush(ready, (-nxt.seq, nxt))
                    else:
                        _accumulate_leaf(e, _take(pending.pop(k), owned), inputs_filter, results)
        # 3. Callbacks queued during backward (DDP's "finalize"), including ones they queue.
        i = 0
        while i < len(callbacks):
            callbacks[i]()
            i += 1
    finally:
        grad_mode._set(prev_mode)
        stack_cb.pop()
    return results

