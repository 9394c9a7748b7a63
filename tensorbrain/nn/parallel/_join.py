"""``DistributedDataParallel.join()``: training on uneven inputs without a hang.

Without it, a rank that runs out of batches leaves the loop while the others wait forever in
their next all_reduce (pytorch/pytorch#38174). PyTorch's ``Join`` fixes this by making the rank
that is done *shadow* the collectives the others still issue. Ours does the same with one
extra, small collective per training forward:

* every training forward inside the context all_reduces (SUM) a vector ``[one-hot of the active
  ranks..., sync flag]``; a joined rank contributes zeros. The sum tells every rank how many are
  still active, which rank is the *authority* (the lowest active rank: buffers and the bucket
  order are broadcast from it instead of rank 0, which may have left) and whether this
  iteration's backward synchronises (``no_sync`` iterations have nothing to shadow);
* a joined rank then mirrors the forward's collectives (bucket rebuild, buffer broadcast) and,
  when the iteration synchronises, reduces zero gradients for every bucket, in bucket order;
* when the sum says nobody is active, all ranks leave together and the parameters and buffers
  are broadcast from the rank that trained the most iterations (the last to join), because the
  ranks that left early missed the last optimizer steps.

Gradients are divided by the initial world size (``divide_by_initial_world_size=True``, as
PyTorch) or by the number of ranks still active.
"""
from __future__ import annotations

import numpy as np

from ... import _xp
from ...autograd import grad_mode
from ...tensor import Tensor


class _JoinContext:
    def __init__(self, ddp, divide_by_initial_world_size, enable, throw_on_early_termination):
        self.ddp = ddp
        self.divide_by_initial = bool(divide_by_initial_world_size)
        self.enable = bool(enable)
        self.throw = bool(throw_on_early_termination)
        self._authority = ddp._src
        self._sync = True
        self._active = ddp._world_size
        self._iters = 0

    def __enter__(self):
        if self.enable:
            if self.ddp._join is not None:
                raise RuntimeError("DistributedDataParallel.join() contexts cannot be nested")
            self.ddp._join = self
        return self

    def _global(self, group_rank):
        ddp = self.ddp
        if ddp.process_group is None:
            return group_rank
        return ddp._dist.get_global_rank(ddp.process_group, group_rank)

    def _notify(self, active: bool, sync: bool):
        """The per-iteration collective; returns the gradient divisor for this iteration."""
        ddp = self.ddp
        W = ddp._world_size
        v = np.zeros(W + 1, dtype=np.int64)
        if active:
            v[ddp._rank] = 1
            v[W] = 1 if sync else 0
            self._iters += 1
        v = ddp.reducer._control_array(v, np.int64)  # on the parameters' device (NCCL)
        ddp._dist.all_reduce(Tensor._wrap(v), group=ddp.process_group)
        v = _xp.to_numpy(v)
        self._active = int(v[:W].sum())
        self._sync = bool(v[W])
        if self._active:
            self._authority = self._global(int(np.flatnonzero(v[:W])[0]))
        if self.throw and self._active < W:
            raise RuntimeError(
                f"DistributedDataParallel.join(throw_on_early_termination=True): detected at "
                f"least one rank that exhausted its inputs ({W - self._active} of {W} ranks have "
                f"joined; this is rank {ddp._rank}). Throwing across all ranks.")
        return W if self.divide_by_initial else max(self._active, 1)

    def __exit__(self, exc_type, exc, tb):
        ddp = self.ddp
        if not self.enable:
            return False
        try:
            if exc_type is not None:
                return False  # the loop's own error; peers will time out on their collectives
            reducer = ddp.reducer
            while True:
                self._notify(active=False, sync=False)
                if self._active == 0:
                    break
                # Mirror one training iteration of the active ranks, in the same order as
                # DistributedDataParallel.forward and its backward.
                if reducer.rebuild_pending:
                    reducer.rebuild_buckets(self._authority)
                if ddp._will_sync_buffers():
                    ddp._sync_buffers(self._authority)
                if self._sync:
                    reducer.shadow_backward()
                    if not reducer._rebuilt and (reducer.static_graph or not reducer.find_unused):
                        reducer.rebuild_pending = True
            self._sync_final_model()
        finally:
            ddp._join = None
        return False

    def _sync_final_model(self):
        """Broadcast the model from the rank that ran the most iterations (the last joiner)."""
        ddp = self.ddp
        W = ddp._world_size
        counts = np.zeros(W, dtype=np.int64)
        counts[ddp._rank] = self._iters
        counts = ddp.reducer._control_array(counts, np.int64)
        ddp._dist.all_reduce(Tensor._wrap(counts), group=ddp.process_group)
        counts = _xp.to_numpy(counts)
        last = int(np.argmax(counts))  # first rank with the most iterations
        if counts.min() == counts.max() or W == 1:
            return  # even inputs: every replica already holds the same model
        from .distributed import broadcast_coalesced
        state = list(ddp.module.parameters()) + list(ddp.module.buffers())
        with grad_mode.no_grad():
            broadcast_coalesced(ddp._dist, state, self._global(last), ddp.process_group)
