"""``hvd.DistributedOptimizer``: gradients are all-reduced from hooks as backward produces
them, fused into buckets (Tensor Fusion, with DDP's bucket assignment), and awaited in
``step()``; plus ``broadcast_parameters`` / ``broadcast_optimizer_state`` / objects."""
from __future__ import annotations

import contextlib
import os
import weakref
from typing import Any

from . import mpi_ops
from .compression import Compression

#: Tensor Fusion's buffer size (Horovod: HOROVOD_FUSION_THRESHOLD, bytes; default 64 MiB)
DEFAULT_FUSION_BYTES = 64 * 1024 * 1024
#: the first bucket's size, as DDP's (it fills first, so communication starts early)
FIRST_BUCKET_BYTES = 1024 * 1024


class _Fusion:
    """The per-step state of the fused all-reduces."""

    def __init__(self, params, names, fusion_bytes):
        from ..nn.parallel._reducer import compute_bucket_assignment_by_size
        order = list(reversed(range(len(params))))   # gradients arrive roughly in reverse
        # as DDP: a small first bucket (1 MiB) starts communicating early in backward
        limits = [min(FIRST_BUCKET_BYTES, fusion_bytes), fusion_bytes]
        self.buckets = compute_bucket_assignment_by_size(params, order, limits)
        self.where = {i: b for b, idx in enumerate(self.buckets) for i in idx}
        self.reset()

    def reset(self):
        self.pending = [len(b) for b in self.buckets]
        self.handles = [None] * len(self.buckets)
        self.next = 0


class _DistributedOptimizer:
    """Methods mixed into the user's optimizer class by :func:`DistributedOptimizer`."""

    _hvd_base: type[Any]  # the user's optimizer class, set by DistributedOptimizer

    def _hvd_setup(self, named_parameters, compression, backward_passes_per_step, op,
                   gradient_predivide_factor):
        params = [p for g in self.param_groups for p in g["params"] if p.requires_grad]
        if named_parameters is not None:
            named = list(named_parameters)
            names = [n for n, _ in named]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"Parameter names in named_parameters must be unique; found "
                                 f"duplicates: {', '.join(dup)}")
            by_id = {id(p): n for n, p in named}
            unnamed = [i for i, p in enumerate(params) if id(p) not in by_id]
            if unnamed:
                raise ValueError(f"named_parameters was specified, but one or more model "
                                 f"parameters were not named ({len(unnamed)} of {len(params)}); "
                                 f"pass model.named_parameters() of the model being optimized")
            self._hvd_names = [by_id[id(p)] for p in params]
        else:
            self._hvd_names = [f"allreduce.noname.{i}" for i in range(len(params))]
        if gradient_predivide_factor != 1.0 and op is not mpi_ops.Average:
            raise ValueError("gradient_predivide_factor not supported with op != Average")
        self._hvd_params = params
        self._hvd_compression = compression
        self._hvd_bpps = int(backward_passes_per_step)
        if self._hvd_bpps < 1:
            raise ValueError(f"backward_passes_per_step must be >= 1, got {self._hvd_bpps}")
        self._hvd_op = op
        self._hvd_predivide = float(gradient_predivide_factor)
        self._hvd_delay = [self._hvd_bpps] * len(params)
        self._hvd_skip_sync = False
        self._hvd_synced = False
        threshold = int(os.environ.get("HOROVOD_FUSION_THRESHOLD", DEFAULT_FUSION_BYTES))
        self._hvd_fusion = _Fusion(params, self._hvd_names, max(threshold, 1))
        from .. import _config
        # under live recovery (tbrun --fault_tolerant) the world grows and shrinks: hook always
        self._hvd_elastic = bool(_config.get("TB_FAULT_TOLERANT"))
        self._hvd_world = mpi_ops.size()
        me = weakref.ref(self)
        self._hvd_hooks = [p.register_post_accumulate_grad_hook(
            lambda _p, i=i: (o := me()) is not None and o._hvd_on_grad(i))
            for i, p in enumerate(params)] if self._hvd_world > 1 or self._hvd_elastic else []

    # ---- hooks ------------------------------------------------------------------------------
    def _hvd_on_grad(self, i):
        if self._hvd_delay[i] <= 0:
            raise AssertionError("Gradients were computed more than backward_passes_per_step "
                                 "times before call to step(). Increase backward_passes_per_step "
                                 "to accumulate gradients locally.")
        self._hvd_delay[i] -= 1
        if self._hvd_delay[i] == 0:
            fusion = self._hvd_fusion
            fusion.pending[fusion.where[i]] -= 1
            self._hvd_launch_ready()

    def _hvd_launch_ready(self, force: bool = False):
        """Launch full buckets in bucket order (the same order on every rank)."""
        fusion = self._hvd_fusion
        while fusion.next < len(fusion.buckets) and (force or fusion.pending[fusion.next] == 0):
            fusion.handles[fusion.next] = self._hvd_launch(fusion.buckets[fusion.next])
            fusion.next += 1

    def _hvd_launch(self, indices):
        import tensorbrain as tb
        grads = []
        for i in indices:
            p = self._hvd_params[i]
            g = p.grad if p.grad is not None else tb.zeros_like(p)
            grads.append(g.detach().reshape(-1))
        flat = tb.cat(grads) if len(grads) > 1 else grads[0].clone()
        sent, ctx = self._hvd_compression.compress(flat)
        pre, post = 1.0, 1.0
        if self._hvd_op is mpi_ops.Average:
            pre, post = 1.0 / self._hvd_predivide, self._hvd_predivide
        handle = mpi_ops.allreduce_async_(sent, op=self._hvd_op, prescale_factor=pre,
                                          postscale_factor=post)
        return handle, ctx

    def synchronize(self):
        """Wait for every gradient's all-reduce (launching those not started) and write the
        results into ``.grad``. ``step()`` calls it unless inside ``skip_synchronize()``."""
        if (mpi_ops.size() if self._hvd_elastic else self._hvd_world) == 1:
            self._hvd_delay = [self._hvd_bpps] * len(self._hvd_params)
            return
        fusion = self._hvd_fusion
        started = any(d != self._hvd_bpps for d in self._hvd_delay)
        if not started and fusion.next == 0:
            return
        self._hvd_launch_ready(force=True)   # parameters without a gradient contribute zeros
        for indices, (handle, ctx) in zip(fusion.buckets, fusion.handles, strict=True):
            flat = self._hvd_compression.decompress(mpi_ops.synchronize(handle), ctx)
            offset = 0
            for i in indices:
                p = self._hvd_params[i]
                n = p.numel()
                value = flat[offset:offset + n].reshape(p.shape).to(p.dtype)
                offset += n
                if p.grad is None:
                    p.grad = value.detach().clone()
                else:
                    p.grad._data[...] = value._data
        fusion.reset()
        self._hvd_delay = [self._hvd_bpps] * len(self._hvd_params)
        self._hvd_synced = True

    def _hvd_reset(self):
        """Forget the all-reduces of a step that failed (elastic: the state is restored)."""
        self._hvd_fusion.reset()
        self._hvd_delay = [self._hvd_bpps] * len(self._hvd_params)
        self._hvd_synced = False

    @contextlib.contextmanager
    def skip_synchronize(self):
        """``step()`` inside this block does not synchronize (call ``synchronize()`` first,
        e.g. to clip the averaged gradients)."""
        self._hvd_skip_sync = True
        try:
            yield
        finally:
            self._hvd_skip_sync = False

    def step(self, closure=None):
        """Wait for the averaged gradients, then the wrapped optimizer's step."""
        if not self._hvd_skip_sync:
            self.synchronize()
        self._hvd_synced = False
        return self._hvd_base.step(self, closure) if closure is not None else \
            self._hvd_base.step(self)

    def zero_grad(self, set_to_none: bool = True):
        """Clear the gradients; an error while all-reduces are still in flight."""
        if self._hvd_fusion.next > 0 or (any(d != self._hvd_bpps for d in self._hvd_delay)
                                         and any(d == 0 for d in self._hvd_delay)):
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return self._hvd_base.zero_grad(self, set_to_none=set_to_none)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=mpi_ops.Average,
                         gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, process_set=None):
    """Wrap ``optimizer`` so gradients are averaged over the processes (Horovod's).

    Each gradient is all-reduced from a hook as soon as backward produces it (after
    ``backward_passes_per_step`` local passes), fused with its neighbours into buckets of
    ``HOROVOD_FUSION_THRESHOLD`` bytes (64 MiB), and ``step()`` waits for them. The result is
    an instance of the optimizer's own class sharing its parameters and state.

    Args:
        optimizer: the optimizer to wrap (its state is kept).
        named_parameters: ``model.named_parameters()`` (names for error messages).
        compression: ``hvd.Compression.none`` or ``hvd.Compression.fp16``.
        backward_passes_per_step: local backward passes per all-reduce.
        op: ``hvd.Average`` (default) or ``hvd.Sum``; ``hvd.Adasum`` is not supported.
        gradient_predivide_factor: divide before the sum and multiply after (Average only).

    Raises:
        NotImplementedError: ``op=hvd.Adasum``, or ``groups``/``num_groups``.
        TypeError: an optimizer of the real PyTorch (the message says what to change).
    """
    from .._real_torch import check_not_pytorch
    check_not_pytorch(optimizer, "hvd.DistributedOptimizer")
    if op is mpi_ops.Adasum:
        raise NotImplementedError("op=hvd.Adasum is not supported by tensorbrain.horovod; use "
                                  "hvd.Average (the default) or hvd.Sum")
    if op not in (mpi_ops.Average, mpi_ops.Sum):
        raise ValueError(f"DistributedOptimizer op must be hvd.Average or hvd.Sum, got {op!r}")
    if num_groups or groups:
        raise NotImplementedError("DistributedOptimizer(groups=/num_groups=) is not supported; "
                                  "Tensor Fusion buckets are chosen by HOROVOD_FUSION_THRESHOLD")
    base = type(optimizer)
    namespace = {k: v for k, v in _DistributedOptimizer.__dict__.items()
                 if not k.startswith("__")}
    cls = type(base.__name__, (base,), namespace)
    wrapped = cls.__new__(cls)
    wrapped.__dict__.update(optimizer.__dict__)
    wrapped._hvd_base = base
    wrapped._hvd_setup(named_parameters, compression, backward_passes_per_step, op,
                       gradient_predivide_factor)
    return wrapped


def broadcast_parameters(params, root_rank: int = 0, process_set=None) -> None:
    """Overwrite every tensor in ``params`` (a state dict, or ``(name, tensor)`` pairs such as
    ``model.named_parameters()``) with ``root_rank``'s, in place.

    Args:
        params: a state dict or ``(name, tensor)`` pairs.
        root_rank: the sender.
        process_set: accepted; the global set.
    """
    items = sorted(params.items()) if isinstance(params, dict) else list(params)
    for _, t in items:
        if t is not None:
            mpi_ops.broadcast_(t, root_rank)


def broadcast_optimizer_state(optimizer, root_rank: int = 0, process_set=None) -> None:
    """Make every process's optimizer state and hyperparameters ``root_rank``'s.

    Args:
        optimizer: the optimizer (loaded in place on the other ranks).
        root_rank: the sender.
        process_set: accepted; the global set.
    """
    if mpi_ops.size() == 1:
        return
    from .. import distributed as dist
    box = [optimizer.state_dict() if mpi_ops.rank() == root_rank else None]
    dist.broadcast_object_list(box, src=root_rank)
    if mpi_ops.rank() != root_rank:
        optimizer.load_state_dict(box[0])


def broadcast_object(obj, root_rank: int = 0, name=None, process_set=None):
    """``root_rank``'s ``obj`` on every process (sent with TensorBrain's safe object codec:
    dicts, lists, numbers, strings, tensors, arrays; no pickle).

    Args:
        obj: the object (read on ``root_rank``).
        root_rank: the sender.
        name: accepted.
        process_set: accepted; the global set.

    Returns:
        ``root_rank``'s object.
    """
    from .. import distributed as dist
    if mpi_ops.size() == 1:
        return obj
    box = [obj if mpi_ops.rank() == root_rank else None]
    dist.broadcast_object_list(box, src=root_rank)
    return box[0]


def allgather_object(obj, name=None, process_set=None) -> list:
    """Every process's ``obj``, in rank order.

    Args:
        obj: this process's object (safe codec types).
        name: accepted.
        process_set: accepted; the global set.

    Returns:
        A list with one object per rank.
    """
    from .. import distributed as dist
    if mpi_ops.size() == 1:
        return [obj]
    out = [None] * mpi_ops.size()
    dist.all_gather_object(out, obj)
    return out
