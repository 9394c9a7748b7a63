"""``DistributedDataParallel``: one model replica per process, gradients averaged during backward.

>>> import tensorbrain as tb                                        # doctest: +SKIP
>>> tb.distributed.init_process_group("tcp")                        # under tbrun  # doctest: +SKIP
>>> model = tb.nn.parallel.DistributedDataParallel(tb.nn.Linear(4, 2))   # doctest: +SKIP
>>> model(tb.randn(8, 4)).sum().backward()   # .grad now holds the average over all ranks  # doctest: +SKIP

What happens, and why (PyTorch's design: https://pytorch.org/docs/stable/notes/ddp.html):

* Construction checks that every rank holds the same parameters (names, shapes, dtypes; the
  error names the first difference and the rank), then broadcasts parameters and buffers from
  rank 0 in a few large flat messages, so every replica starts identical.
* Gradients are averaged in buckets (``_reducer.py``): each bucket's all_reduce starts as soon
  as its last gradient is ready and runs while backward computes the earlier layers.
* ``no_sync()`` skips the reduction (gradient accumulation); ``join()`` lets ranks with fewer
  batches stand in for the collectives of the others; ``register_comm_hook`` replaces the
  all_reduce (fp16/bf16 compression, PowerSGD: ``comm_hooks``).
"""
from __future__ import annotations

import contextlib

import numpy as np

from ... import _xp
from ...autograd import grad_mode
from ...distributed.algorithms.join import Join, Joinable, JoinHook
from ...tensor import Tensor
from ..modules.module import Module
from ._reducer import MiB, Reducer

__all__ = ["DistributedDataParallel"]

#: PyTorch broadcasts module state in messages of at most 250 MiB (``_DEFAULT_BUCKET_CAP``...)
BROADCAST_BUCKET_BYTES = 250 * MiB
#: the first bucket is small "so that early gradients don't spill into a large bucket" (PyTorch's
#: ``dist._DEFAULT_FIRST_BUCKET_BYTES``): its all_reduce starts after the last layer's backward
_DEFAULT_FIRST_BUCKET_BYTES = MiB


def _dist():
    from ... import distributed
    return distributed


def _src_rank(dist, group):
    """Global rank of the group's rank 0 (the broadcast source, as PyTorch's ``src=0``)."""
    if group is None:
        return 0
    get = getattr(dist, "get_global_rank", None)
    return get(group, 0) if get is not None else 0


def broadcast_coalesced(dist, tensors, src, group, cap_bytes=BROADCAST_BUCKET_BYTES):
    """Broadcast many tensors from ``src`` in few messages: pack by (dtype, device), up to
    ``cap_bytes`` each, send, unpack in place. One message instead of one per tensor matters
    on sockets, where each message pays tens of microseconds (docs/benchmarks.md: 60 us per
    8-byte all_reduce over sockets, Gloo's 139 us)."""
    groups: dict = {}
    for t in tensors:
        a = t._data
        key = (a.dtype.str, ("cuda", a.device.id) if _xp.is_cupy_array(a) else ("cpu",))
        chunks = groups.setdefault(key, [[]])
        if chunks[-1] and sum(x._data.nbytes for x in chunks[-1]) + a.nbytes > cap_bytes:
            chunks.append([])
        chunks[-1].append(t)
    for chunks in groups.values():
        for chunk in chunks:
            xp = _xp.get_array_module(chunk[0]._data)
            flat = xp.concatenate([t._data.reshape(-1) for t in chunk])
            dist.broadcast(Tensor._wrap(flat), src=src, group=group)
            off = 0
            for t in chunk:
                n = t._data.size
                t._data[...] = flat[off:off + n].reshape(t._data.shape)
                t._version[0] += 1
                off += n


class DistributedDataParallel(Module, Joinable):
    """Data parallelism across processes (``torch.nn.parallel.DistributedDataParallel``).

    ``module``'s parameters are synchronised from rank 0 at construction; each backward averages
    the gradients over the process group's ranks. ``device_ids`` (one CUDA device, or None for
    CPU/the module's device) and ``output_device`` are accepted as in PyTorch; inputs are moved
    to ``device_ids[0]`` when given. ``bucket_cap_mb`` (25) sets the bucket size after the
    first, 1 MiB bucket. See docs/ddp.md.

    Args:
        module (Module): the model; every rank builds the same one (the parameters' names and
            shapes are checked across ranks, then rank 0's values are broadcast).
        device_ids (list[int | device] | None): one CUDA device per process, as torch, or None
            for a CPU module or one already on its device.
        output_device (int | device | None): where outputs go; default ``device_ids[0]``.
        dim (int): accepted for torch's signature (the batch dimension of inputs that torch
            scatters over several devices per process); one device per process ignores it.
        broadcast_buffers (bool): broadcast rank 0's buffers (BatchNorm statistics) before
            each forward.
        process_group (ProcessGroup | None): the group to average over; None: the default group.
        bucket_cap_mb (float | None): the size of each gradient bucket after the first (1 MiB);
            None: 25.
        find_unused_parameters (bool): walk the graph after each forward to mark parameters
            that get no gradient this iteration, so their buckets are not waited for.
        check_reduction (bool): accepted for torch's signature (deprecated there); no effect.
        gradient_as_bucket_view (bool): make each parameter's ``.grad`` a view of its bucket
            (one copy less per step).
        static_graph (bool): the set of used parameters never changes: found once in the first
            iteration, then reused.

    Raises:
        RuntimeError: no process group is initialized, or no parameter requires a gradient.
        ValueError: ``device_ids`` with more than one device, or with a CPU module.

    Example:
        >>> import tensorbrain as tb, tensorbrain.distributed as dist
        >>> dist.init_process_group("tcp", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
        >>> model = tb.nn.parallel.DistributedDataParallel(tb.nn.Linear(3, 2))
        >>> model(tb.ones(4, 3)).shape
        tb.Size([4, 2])
        >>> dist.destroy_process_group()
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        from ..._real_torch import check_not_pytorch
        check_not_pytorch(module, "DistributedDataParallel")
        dist = _dist()
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("DistributedDataParallel needs a process group: call "
                               "tb.distributed.init_process_group(...) first (tbrun sets RANK, "
                               "WORLD_SIZE, MASTER_ADDR and MASTER_PORT for env://)")
        params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have "
                               "any parameter that requires a gradient.")
        devices = {p.device for _, p in module.named_parameters()}
        if device_ids is not None:
            if len(device_ids) != 1:
                raise ValueError(f"device_ids can only be None or contain a single element "
                                 f"(one device per process), got {device_ids}")
            if any(d.type == "cpu" for d in devices):
                raise ValueError(f"DistributedDataParallel device_ids and output_device arguments "
                                 f"only work with single-device CUDA modules, but got "
                                 f"device_ids {device_ids}, output_device {output_device}, and "
                                 f"module parameters on {sorted(map(str, devices))}; pass "
                                 f"device_ids=None for CPU modules")
        self.module = module
        self.device_ids = device_ids
        self.output_device = output_device if output_device is not None else (
            device_ids[0] if device_ids else None)
        self.dim = dim
        self.broadcast_buffers = bool(broadcast_buffers)
        self.process_group = process_group
        self.find_unused_parameters = bool(find_unused_parameters)
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self.static_graph = bool(static_graph)
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * MiB)
        self._dist = dist
        self._rank = dist.get_rank(process_group)
        self._world_size = dist.get_world_size(process_group)
        self._src = _src_rank(dist, process_group)
        Joinable.__init__(self)
        self._join_hook = None  # the hook of the join() context, while one is active
        names = [n for n, _ in params]
        self._verify_params_across_ranks(module)
        self._buffers_list = [b for _, b in module.named_buffers()]
        state = [p for _, p in module.named_parameters()] + self._buffers_list
        if self._world_size > 1 and state:
            with grad_mode.no_grad():
                broadcast_coalesced(dist, state, self._src, process_group)
        self.reducer = Reducer([p for _, p in params], names, dist, process_group,
                               self.bucket_bytes_cap, _DEFAULT_FIRST_BUCKET_BYTES,
                               find_unused_parameters,
                               gradient_as_bucket_view, static_graph)

    # ***** construction checks *****
    def _verify_params_across_ranks(self, module):
        dist = self._dist
        mine = [[n, list(p.shape), str(p.dtype), bool(p.requires_grad)]
                for n, p in module.named_parameters()]
        if self._world_size == 1:
            return
        gathered = [None] * self._world_size
        dist.all_gather_object(gathered, mine, group=self.process_group)
        ref = [list(map(_as_list, e)) for e in gathered[0]]
        for r, theirs in enumerate(gathered):
            theirs = [list(map(_as_list, e)) for e in theirs]
            if theirs == ref:
                continue
            if len(theirs) != len(ref):
                only0 = sorted({e[0] for e in ref} - {e[0] for e in theirs})
                onlyr = sorted({e[0] for e in theirs} - {e[0] for e in ref})
                raise RuntimeError(
                    f"DistributedDataParallel: rank {r} has {len(theirs)} parameters but rank 0 "
                    f"has {len(ref)} (only on rank 0: {only0}; only on rank {r}: {onlyr}). Every "
                    f"rank must build the same model.")
            for a, b in zip(ref, theirs):
                if a != b:
                    what = ("name" if a[0] != b[0] else "shape" if a[1] != b[1] else
                            "dtype" if a[2] != b[2] else "requires_grad")
                    raise RuntimeError(
                        f"DistributedDataParallel: parameter '{a[0]}' differs in {what} between "
                        f"rank 0 ({a[0]}, shape {tuple(a[1])}, {a[2]}, requires_grad={a[3]}) and "
                        f"rank {r} ({b[0]}, shape {tuple(b[1])}, {b[2]}, requires_grad={b[3]}). "
                        f"Every rank must build the same model.")

    # ***** forward *****
    def forward(self, *inputs, **kwargs):
        grad_on = grad_mode.is_grad_enabled()
        sync = grad_on and self.require_backward_grad_sync
        div = None
        collective = True  # may this forward issue collectives?
        joining = self._join_config.enable
        if joining:
            # Inside join() only training forwards are mirrored by the ranks that ran out of
            # data (they wait for the notify all_reduce), so only those may communicate.
            collective = grad_on and self.module.training
            if collective:
                Join.notify_join_context(self)
                div = self._join_hook.notify(active=True, sync=sync)
        src = self._join_hook.authority if joining else self._src
        if collective and grad_on and self.reducer.rebuild_pending:
            self.reducer.rebuild_buckets(src)
        if collective and self._will_sync_buffers():
            self._sync_buffers(src)
        if self.device_ids:
            inputs, kwargs = _move_to(inputs, self.device_ids[0]), _move_to(kwargs, self.device_ids[0])
        out = self.module(*inputs, **kwargs)
        if sync:
            self.reducer.prepare_for_backward(
                out if (self.find_unused_parameters or self.static_graph) else None, div)
        elif grad_on:
            self.reducer.expect_hooks = False  # no_sync(): this forward's backward stays local
        return out

    def _will_sync_buffers(self):
        return (self.broadcast_buffers and self.require_forward_param_sync
                and self._world_size > 1 and bool(self._buffers_list))

    def _sync_buffers(self, src):
        with grad_mode.no_grad():
            broadcast_coalesced(self._dist, self._buffers_list, src, self.process_group)

    # ***** contexts *****
    @contextlib.contextmanager
    def no_sync(self):
        """Accumulate gradients locally: backward passes of forwards run inside this context do
        not communicate; the first backward after it averages the accumulated sum.

        >>> with ddp.no_sync():               # doctest: +SKIP
        ...     ddp(x1).sum().backward()      # local only
        >>> ddp(x2).sum().backward()          # averages grad(x1) + grad(x2) over ranks  # doctest: +SKIP
        """
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def join(self, divide_by_initial_world_size=True, enable=True,
             throw_on_early_termination=False):
        """Context manager for uneven inputs: a rank that leaves the loop early keeps answering
        the others' collectives with zeros until every rank is done (PyTorch's ``Join``).

        Args:
            divide_by_initial_world_size: divide gradients by the world size at the start (True,
                as torch) or by the number of ranks still training.
            enable: False makes the context do nothing.
            throw_on_early_termination: raise on every rank once one runs out of inputs.

        Returns:
            Join: ``Join([self], ...)`` (``tensorbrain.distributed.algorithms.join``).
        """
        return Join([self], enable, throw_on_early_termination,
                    divide_by_initial_world_size=divide_by_initial_world_size)

    def join_hook(self, **kwargs):
        """The :class:`JoinHook` that shadows this model's collectives on a rank that has joined.

        Args:
            **kwargs: ``divide_by_initial_world_size`` (default True).

        Returns:
            JoinHook: the hook.
        """
        self._join_hook = _DDPJoinHook(self, kwargs.get("divide_by_initial_world_size", True))
        return self._join_hook

    @property
    def join_device(self):
        """The parameters' device (that of the join notification)."""
        return next(iter(self.module.parameters())).device

    @property
    def join_process_group(self):
        """The process group of the gradient all_reduce (None: the default group)."""
        return self.process_group

    # ***** communication hooks *****
    def register_comm_hook(self, state, hook):
        """Replace the bucket all_reduce by ``hook(state, bucket) -> Future``.

        ``bucket`` is a :class:`GradBucket`; the returned Future (or Work) must finish with the
        reduced flat buffer (or None after reducing ``bucket.buffer()`` in place). With a hook
        the gradients are *not* pre-divided by the world size: the hook averages. Register once,
        before the first backward.
        """
        if self.reducer.comm_hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be "
                               "called once.")
        if self.reducer.iterations > 0:
            raise RuntimeError("register_comm_hook must be called before the first backward")
        if not callable(hook):
            raise TypeError(f"hook must be callable, got {type(hook).__name__}")
        self.reducer.comm_hook, self.reducer.comm_hook_state = hook, state

    def _get_bucket_indices(self):
        return self.reducer.bucket_indices()

    def __del__(self):
        reducer = self.__dict__.get("reducer")
        if reducer is not None:
            reducer.remove_hooks()


def _as_list(x):
    return list(x) if isinstance(x, tuple) else x


def _move_to(obj, dev):
    if isinstance(obj, Tensor):
        return obj.to(dev)
    if isinstance(obj, tuple):
        return tuple(_move_to(x, dev) for x in obj)
    if isinstance(obj, list):
        return [_move_to(x, dev) for x in obj]
    if isinstance(obj, dict):
        return {k: _move_to(v, dev) for k, v in obj.items()}
    return obj


# ***** join(): the ranks that ran out of inputs shadow the others' collectives *****
class _DDPJoinHook(JoinHook):
    """DDP's side of ``join()`` (``tensorbrain.distributed.algorithms.join`` runs the loop).

    Besides the join context's own notification, every training forward inside the context
    all_reduces (SUM) a vector ``[one-hot of the active ranks..., sync flag]``; a joined rank
    contributes zeros (:meth:`main_hook`). The sum tells every rank how many are still active,
    which rank is the *authority* (the lowest active rank: buffers and the bucket order are
    broadcast from it instead of rank 0, which may have left) and whether this iteration's
    backward synchronises (``no_sync`` iterations have nothing to shadow). A joined rank then
    mirrors the forward's collectives (bucket rebuild, buffer broadcast) and, when the iteration
    synchronises, reduces zero gradients for every bucket, in bucket order. When all ranks have
    joined, the parameters and buffers are broadcast from the rank that trained the most
    iterations (the last to join), because the ranks that left early missed the last optimizer
    steps (:meth:`post_hook`).

    Gradients are divided by the initial world size (``divide_by_initial_world_size=True``, as
    torch) or by the number of ranks still active.
    """

    def __init__(self, ddp, divide_by_initial_world_size):
        self.ddp = ddp
        self.divide_by_initial = bool(divide_by_initial_world_size)
        self.authority = ddp._src
        self.sync = True
        self.active = ddp._world_size
        self.iterations = 0

    def _global(self, group_rank):
        ddp = self.ddp
        if ddp.process_group is None:
            return group_rank
        return ddp._dist.get_global_rank(ddp.process_group, group_rank)

    def notify(self, active: bool, sync: bool):
        """The per-iteration collective; returns the gradient divisor for this iteration."""
        ddp = self.ddp
        W = ddp._world_size
        v = np.zeros(W + 1, dtype=np.int64)
        if active:
            v[ddp._rank] = 1
            v[W] = 1 if sync else 0
            self.iterations += 1
        v = ddp.reducer._control_array(v, np.int64)  # on the parameters' device (NCCL)
        ddp._dist.all_reduce(Tensor._wrap(v), group=ddp.process_group)
        v = _xp.to_numpy(v)
        self.active = int(v[:W].sum())
        self.sync = bool(v[W])
        if self.active:
            self.authority = self._global(int(np.flatnonzero(v[:W])[0]))
        return W if self.divide_by_initial else max(self.active, 1)

    def main_hook(self):
        """Mirror one training iteration of the active ranks, in the order of
        :meth:`DistributedDataParallel.forward` and its backward."""
        ddp, reducer = self.ddp, self.ddp.reducer
        self.notify(active=False, sync=False)
        if reducer.rebuild_pending:
            reducer.rebuild_buckets(self.authority)
        if ddp._will_sync_buffers():
            ddp._sync_buffers(self.authority)
        if self.sync:
            reducer.shadow_backward()
            if not reducer._rebuilt and (reducer.static_graph or not reducer.find_unused):
                reducer.rebuild_pending = True

    def post_hook(self, is_last_joiner: bool):
        """Broadcast the model from the rank that ran the most iterations (the last joiner)."""
        ddp = self.ddp
        W = ddp._world_size
        counts = np.zeros(W, dtype=np.int64)
        counts[ddp._rank] = self.iterations
        counts = ddp.reducer._control_array(counts, np.int64)
        ddp._dist.all_reduce(Tensor._wrap(counts), group=ddp.process_group)
        counts = _xp.to_numpy(counts)
        last = int(np.argmax(counts))  # first rank with the most iterations
        if counts.min() == counts.max() or W == 1:
            return  # even inputs: every replica already holds the same model
        state = list(ddp.module.parameters()) + list(ddp.module.buffers())
        with grad_mode.no_grad():
            broadcast_coalesced(ddp._dist, state, self._global(last), ddp.process_group)
