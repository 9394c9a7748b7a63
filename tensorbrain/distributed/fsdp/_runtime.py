"""What FSDP does around each unit's forward and backward (shared by ``FullyShardedDataParallel``
and ``fully_shard``).

Per iteration, for every unit in forward order:

1. pre-forward: all-gather the unit's parameters (waiting for a prefetch if one was started),
   put the unsharded views where the module's ``forward`` reads them, and with
   ``forward_prefetch`` start the next unit's all-gather (order recorded in the last iteration).
2. post-forward: register a hook on the outputs that runs before the unit's backward, and free
   the unsharded buffer (``reshard_after_forward``, except for the root, whose backward is next).
3. pre-backward (the output hook): all-gather again, and with ``BACKWARD_PRE`` start the
   all-gather of the unit whose backward comes next.
4. post-backward (a post-accumulate-grad hook on each unsharded view, the last one to arrive):
   start the reduce-scatter of the unit's gradients (asynchronous, so it overlaps the backward
   of earlier units), free the buffer, with ``BACKWARD_POST`` prefetch the next unit.
5. end of backward (``queue_callback``): reduce the units whose parameters got no gradient (as
   zeros, so every rank issues the same collectives), wait for the reductions in order, all-reduce
   across replicas (HYBRID_SHARD), and write each rank's shard of the average into ``.grad``.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from ... import _xp
from ...autograd import engine, grad_mode
from ...tensor import Tensor
from .. import distributed_c10d as c10d
from ..errors import DistError

BACKWARD_PRE, BACKWARD_POST = "BACKWARD_PRE", "BACKWARD_POST"


def _tensors(obj, out):
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _tensors(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors(x, out)
    return out


def _cast(obj, dtype):
    if isinstance(obj, Tensor):
        return obj.to(dtype) if obj.is_floating_point() and obj.dtype != dtype else obj
    if isinstance(obj, tuple):
        return tuple(_cast(x, dtype) for x in obj)
    if isinstance(obj, list):
        return [_cast(x, dtype) for x in obj]
    if isinstance(obj, dict):
        return {k: _cast(v, dtype) for k, v in obj.items()}
    return obj


class UnitState:
    """One FSDP unit at run time: its handle, options and per-iteration flags."""

    def __init__(self, name, handle, *, kind, reshard_after_forward, orig_params,
                 backward_prefetch=BACKWARD_PRE, forward_prefetch=False, cast_inputs=False,
                 output_dtype=None, check_group=None, shared=()):
        self.name, self.handle, self.kind = name, handle, kind
        self.reshard_after_forward = bool(reshard_after_forward)
        self.orig_params, self.shared = orig_params, list(shared)
        self.backward_prefetch, self.forward_prefetch = backward_prefetch, forward_prefetch
        self.cast_inputs, self.output_dtype = cast_inputs, output_dtype
        self.check_group = check_group
        self.root: RootState | None = None  # the RootState once the root's first forward ran
        self.flat_param: Any = None  # FSDP1 without use_orig_params: the unit's flat Parameter
        self.wrap_grad: Callable[[Any, Any], Tensor] = _plain_grad  # fully_shard: DTensor grads
        self.requires_grad_sync = True
        self.requires_all_reduce = True     # HSDP: all-reduce across replicas this backward
        self.partial_grad = None            # HSDP shard gradients kept while that is False
        self.divide_factor = None           # None: the number of data-parallel ranks
        self.forward_prefetch_states = None     # FSDP2's explicit prefetch lists
        self.backward_prefetch_states = None
        self.reshard_after_backward = self.is_last_backward = True   # accepted, no effect
        self._reset()
        if handle is not None:
            for e in handle.entries:
                if e.requires_grad:
                    e.view.register_post_accumulate_grad_hook(self._grad_hook(e))
            if not orig_params:
                self.install()

    def _reset(self):
        self.pre_backward_done = False
        self.post_backward_done = False
        self.in_forward_order = False

    # ***** views in the module *****
    def install(self):
        """Point the modules' attributes at the unsharded views (shadowing the sharded
        parameters registered under the same names)."""
        if self.handle is None:
            return
        for e in self.handle.entries:
            e.module.__dict__[e.attr] = e.view
        for module, attr, e in self.shared:
            module.__dict__[attr] = e.view

    def uninstall(self):
        if self.handle is None or not self.orig_params:
            return
        for e in self.handle.entries:
            e.module.__dict__.pop(e.attr, None)
        for module, attr, _ in self.shared:
            module.__dict__.pop(attr, None)

    def _check_params(self):
        """A parameter re-registered or rebound outside FSDP's flat parameter is an error: its
        new value would be silently ignored."""
        for e in self.handle.entries:
            reg = e.module.__dict__["_parameters"].get(e.attr)
            if (reg is not e.orig) if self.orig_params else (reg is not None):
                raise RuntimeError(
                    f"{self.kind} unit '{self.name}' on rank {c10d.get_rank()}: parameter "
                    f"'{e.fqn}' was replaced outside the flat parameter after wrapping; change "
                    f"parameters in place (under no_grad) or before wrapping")
            if self.orig_params:
                lo, hi = self.handle.local_slice(e)
                want = self.handle.shard[lo:hi]
                if e.orig._data.size != want.size or (e.orig._data.size and
                                                     _ptr(e.orig._data) != _ptr(want)):
                    raise RuntimeError(
                        f"{self.kind} unit '{self.name}' on rank {c10d.get_rank()}: parameter "
                        f"'{e.fqn}'.data was rebound to a new array; update it in place "
                        f"(p.data[...] = v or p.copy_(v)) so the sharded storage sees it")

    @property
    def _root(self) -> RootState:
        root = self.root
        if root is None:
            raise RuntimeError(f"{self.kind} unit '{self.name}' on rank {c10d.get_rank()} ran "
                               "before the root module's first forward")
        return root

    # ***** forward *****
    def pre_forward(self, args, kwargs):
        root = self._root
        if root.owner is self:
            root.begin_forward()
        root.record(self)
        if self.handle is not None:
            self._check_params()
            self._unshard()
            if self.orig_params:
                self.install()
        if self.forward_prefetch_states is not None:
            for nxt in self.forward_prefetch_states:
                if nxt.handle is not None:
                    nxt._unshard(async_op=True)
        elif self.forward_prefetch and grad_mode.is_grad_enabled():
            nxt = root.next_in_forward(self)
            if nxt is not None and nxt.handle is not None:
                nxt._unshard(async_op=True)
        if self.cast_inputs and self.handle is not None and \
                self.handle.param_dtype != self.handle.dtype:
            args, kwargs = _cast(args, self.handle.param_dtype), _cast(kwargs,
                                                                       self.handle.param_dtype)
        return args, kwargs

    def post_forward(self, output):
        if self.handle is None:
            return output
        grad_on = grad_mode.is_grad_enabled()
        if grad_on and self.handle.requires_grad:
            for t in _tensors(output, []):
                if t.requires_grad:
                    t.register_hook(self._pre_backward_hook)
        self.uninstall()
        if not grad_on or (self.reshard_after_forward and self._root.owner is not self):
            self.handle.reshard()
        if self.output_dtype is not None:
            output = _cast(output, self.output_dtype)
        return output

    def _unshard(self, async_op=False):
        try:
            self.handle.unshard(async_op=async_op)
        except DistError as exc:
            raise _unit_error(self, "all-gather of its parameters", exc) from exc
        except MemoryError as exc:
            raise _oom(self, "gathering its parameters", exc) from exc

    # ***** backward *****
    def _pre_backward_hook(self, grad):
        if self.pre_backward_done:
            return None
        self.pre_backward_done = True
        root = self._root
        root.backward_started()
        self._unshard()
        if self.orig_params:
            # activation checkpointing inside the unit (torch.utils.checkpoint, a
            # checkpoint_wrapper under fully_shard) re-runs the unit's forward during backward:
            # the modules must read the unsharded parameters then, not the shards
            self.install()
        if self.backward_prefetch == BACKWARD_PRE or self.backward_prefetch_states is not None:
            self._prefetch_backward()
        return None

    def _prefetch_backward(self):
        if self.backward_prefetch_states is not None:
            targets = self.backward_prefetch_states
        else:
            targets = [self._root.next_in_backward(self)]
        for nxt in targets:
            if nxt is not None and nxt.handle is not None and not nxt.post_backward_done:
                nxt._unshard(async_op=True)

    def _grad_hook(self, entry):
        def hook(view):
            root = self.root
            if root is None or view.grad is None:
                return
            root.backward_started()
            try:
                done = self.handle.take_grad(entry)
            except MemoryError as exc:
                raise _oom(self, "collecting its unsharded gradients", exc) from exc
            if done:
                self.post_backward()
        return hook

    def post_backward(self):
        if self.post_backward_done:
            return
        self.post_backward_done = True
        root = self._root
        h = self.handle
        try:
            divide = self.divide_factor if self.divide_factor is not None else h.W * h.R
            finish = h.reduce_grad(root.sync and self.requires_grad_sync, divide)
        except DistError as exc:
            raise _unit_error(self, "reduce-scatter of its gradients", exc) from exc
        except MemoryError as exc:
            raise _oom(self, "reducing its gradients", exc) from exc
        if finish is not None:
            root.pending.append((self, finish))
        h.reshard()
        self.uninstall()
        if self.backward_prefetch == BACKWARD_POST and self.backward_prefetch_states is None:
            self._prefetch_backward()

    def write_grads(self, shard_grad):
        """Give this rank's shard of the averaged gradient to the parameters (accumulating)."""
        h = self.handle
        g = shard_grad.astype(h.dtype, copy=False)
        if h.offload:
            g = _xp.to_numpy(g)
        if not self.orig_params:
            fp = self.flat_param
            if fp.grad is None:
                fp.grad = Tensor._wrap(g)   # a fresh array every backward: no copy needed
            else:
                fp.grad._data += g
            return
        for e in h.entries:
            if not e.requires_grad:
                continue
            lo, hi = h.local_slice(e)
            local = g[lo:hi].reshape(e.orig._data.shape)
            if e.orig.grad is None:
                e.orig.grad = self.wrap_grad(e, local)
            else:
                e.orig.grad._data += local


def _plain_grad(entry, array) -> Tensor:
    """A unit's gradient as a plain Tensor (fully_shard's units make DTensors instead)."""
    return Tensor._wrap(array)


def _unit_error(unit, what, exc):
    """``exc`` (a DistError) again, its message naming the FSDP unit and this rank."""
    msg = str(exc)
    hint = ("a rank ran out of memory" if "MemoryError" in msg else
            "another rank died; its own error says why" if " died" in msg else
            "do all ranks run the same units in the same order?")
    return type(exc)(f"{unit.kind} unit '{unit.name}' on rank {c10d.get_rank()}: the {what} "
                     f"failed ({hint}): {exc}")


def _oom(unit, what, exc):
    """A MemoryError naming the FSDP unit and this rank (the other ranks then fail naming this
    one when it exits)."""
    return MemoryError(f"{unit.kind} unit '{unit.name}' on rank {c10d.get_rank()} ran out of "
                       f"memory {what}: {exc}")


def _ptr(a) -> int:
    if _xp.is_cupy_array(a):
        return int(a.data.ptr)
    return int(a.__array_interface__["data"][0])


class RootState:
    """Iteration bookkeeping shared by every unit under one root."""

    def __init__(self, owner, units):
        self.owner, self.units = owner, list(units)
        self.order, self.prev_order = [], []
        self.pending = []
        self.sync = True
        self._started = False
        for u in self.units:
            u.root = self

    def fingerprint_check(self, group):
        """Every rank must have the same units with the same parameters: compare a summary
        once, before the first collective, instead of hanging on mismatched all-gathers."""
        world = c10d.get_world_size(group)
        if world == 1:
            return
        mine = [[u.name, 0 if u.handle is None else u.handle.total,
                 [] if u.handle is None else [e.fqn for e in u.handle.entries]]
                for u in self.units]
        digest = hashlib.sha256(repr(mine).encode()).hexdigest()
        got: list = [None] * world
        c10d.all_gather_object(got, [digest, mine], group=group)
        ranks = c10d.get_process_group_ranks(group) if group is not None else list(range(world))
        ref = got[0][1]
        for r, (d, theirs) in enumerate(got):
            if d == got[0][0]:
                continue
            kind = self.owner.kind
            for i in range(max(len(ref), len(theirs))):
                a = ref[i] if i < len(ref) else None
                b = theirs[i] if i < len(theirs) else None
                if a != b:
                    raise RuntimeError(
                        f"{kind}: rank {ranks[r]} wraps the model differently from rank "
                        f"{ranks[0]}: unit #{i} is {_describe(a)} on rank {ranks[0]} but "
                        f"{_describe(b)} on rank {ranks[r]}; every rank must build the same "
                        f"model and wrap the same modules (same auto_wrap_policy)")

    def begin_forward(self):
        if self.order:
            self.prev_order = self.order
        self.order = []
        for u in self.units:
            u.in_forward_order = False

    def record(self, unit):
        if not unit.in_forward_order:
            unit.in_forward_order = True
            self.order.append(unit)

    def next_in_forward(self, unit):
        order = self.prev_order
        for i, u in enumerate(order):
            if u is unit:
                return order[i + 1] if i + 1 < len(order) else None
        return None

    def next_in_backward(self, unit):
        order = self.order
        for i, u in enumerate(order):
            if u is unit:
                return order[i - 1] if i > 0 else None
        return None

    def backward_started(self):
        if not self._started:
            self._started = True
            engine.queue_callback(self.finalize)

    def finalize(self):
        """End of backward: flush, wait, write gradients, free buffers."""
        self._started = False
        try:
            for u in reversed(self.order):
                if u.handle is not None and u.handle.requires_grad and not u.post_backward_done:
                    u.post_backward()
            shards = []
            for u, finish in self.pending:
                try:
                    shards.append((u, finish()))
                except DistError as exc:
                    raise _unit_error(u, "reduce-scatter of its gradients", exc) from exc
            works, ready = [], []
            for u, g in shards:
                if u.handle.R > 1:
                    if u.partial_grad is not None:     # summed while all-reduce was off
                        g = g + u.partial_grad
                        u.partial_grad = None
                    if not u.requires_all_reduce:     # HSDP accumulation: keep, do not write
                        u.partial_grad = g
                        continue
                    works.append(c10d.all_reduce(Tensor._wrap(g), group=u.handle.replicate_group,
                                                 async_op=True))
                ready.append((u, g))
            for w in works:
                w.wait()
            for u, g in ready:
                u.write_grads(g)
        finally:
            self.pending = []
            for u in self.units:
                if u.handle is not None:
                    u.handle.reshard()
                    u.uninstall()
                u.pre_backward_done = u.post_backward_done = False


def _describe(entry) -> str:
    if entry is None:
        return "absent"
    name, numel, fqns = entry
    return f"'{name or '(root)'}' ({numel} parameters: {fqns})"
