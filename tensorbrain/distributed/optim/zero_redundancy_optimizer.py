"""``ZeroRedundancyOptimizer``: optimizer state sharded across ranks (ZeRO stage 1, torch's names).

Each parameter is owned by one rank. Ownership follows ``torch.distributed.optim``'s greedy rule:
within each parameter group, parameters are taken largest first and each goes to the rank with
the fewest elements so far (the counts carry over from group to group, ties go to the lowest
rank). A rank builds ``optimizer_class`` over its own parameters only, so it holds about 1/N of
the optimizer state; ``step()`` updates the owned parameters, then every rank's parameters are
sent from their owners by one all_gather of a flat buffer holding a region per rank (padded to
the largest), where torch broadcasts from each owner in turn (the result is the same). With
``parameters_as_bucket_view=True`` the parameters live in that buffer as views, so nothing is
packed or unpacked.

Gradients must already be averaged across ranks when ``step()`` runs, which is what
``DistributedDataParallel`` does in backward. See ``docs/zero.md``.
"""
from __future__ import annotations

from typing import Any

from ... import _xp
from ...autograd import grad_mode
from ...optim.optimizer import Optimizer
from ...tensor import Tensor

__all__ = ["ZeroRedundancyOptimizer"]


def _dist():
    from ... import distributed
    return distributed


class ZeroRedundancyOptimizer(Optimizer):
    """Wrap ``optimizer_class`` so that each rank keeps the state of its share of ``params``.

    Args:
        params: tensors or parameter groups (dicts), the same on every rank and in the same order.
        optimizer_class: the local optimizer, e.g. ``tb.optim.Adam``.
        process_group: the group that shares the state (default: the whole world).
        parameters_as_bucket_view: keep the parameters as views into one flat buffer with a
            region per owner; the post-step sync is then one all_gather, without packing.
        overlap_with_ddp: not supported: raises ``NotImplementedError``.
        **defaults: keyword arguments of ``optimizer_class`` (``lr=...``).

    Raises:
        RuntimeError: no process group is initialised, or ranks pass different parameters.
        NotImplementedError: ``overlap_with_ddp=True``.

    Example::

        model = DistributedDataParallel(net)
        opt = ZeroRedundancyOptimizer(model.parameters(), tb.optim.Adam, lr=1e-3)
        loss_fn(model(x), y).backward()
        opt.step()
    """

    def __init__(self, params, optimizer_class, process_group=None,
                 parameters_as_bucket_view: bool = False, overlap_with_ddp: bool = False,
                 **defaults):
        if overlap_with_ddp:
            raise NotImplementedError(
                "ZeroRedundancyOptimizer(overlap_with_ddp=True) is not supported yet: run "
                "optimizer.step() after backward (overlap_with_ddp=False)")
        dist = _dist()
        if not dist.is_initialized():
            raise RuntimeError("ZeroRedundancyOptimizer needs a process group: call "
                               "tb.distributed.init_process_group(...) first")
        self._initialized = False
        super().__init__(params, defaults)
        self._dist = dist
        self.process_group = process_group
        self.world_size = dist.get_world_size(process_group)
        self.rank = dist.get_rank(process_group)
        self.global_rank = dist.get_rank()
        self._global_ranks = [dist.get_global_rank(process_group, r) if process_group is not None
                              else r for r in range(self.world_size)]
        self.parameters_as_bucket_view = bool(parameters_as_bucket_view)
        self.overlap_with_ddp = False
        self._optim_constructor = optimizer_class
        self._optim_defaults = defaults
        self._partition_cache: list | None = None
        self._layout: list | None = None
        self._all_state_dicts: list = []
        self._buckets: list = []
        self._verify_same_params()
        self.optim = optimizer_class(self._partition_parameters()[self.rank], **defaults)
        # the local optimizer's own defaults (momentum=0, betas, ...) show up in our groups too
        _sync_param_groups(self.optim.param_groups, self.param_groups)
        self._initialized = True
        if self.parameters_as_bucket_view:
            self._build_param_buckets()

    # ***** partition *****
    def _params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def _partition_parameters(self) -> list:
        """``[rank][group] -> parameter group`` holding the parameters that rank owns."""
        if self._partition_cache is None:
            sizes = [0] * self.world_size
            per_rank: list = [[] for _ in range(self.world_size)]
            for group in self.param_groups:
                owned: list = [[] for _ in range(self.world_size)]
                for p in sorted(group["params"], key=lambda t: t._data.size, reverse=True):
                    r = sizes.index(min(sizes))
                    owned[r].append(p)
                    sizes[r] += p._data.size
                for r in range(self.world_size):
                    local = {k: v for k, v in group.items() if k != "params"}
                    local["params"] = owned[r]
                    per_rank[r].append(local)
            self._partition_cache = per_rank
        return self._partition_cache

    def _verify_same_params(self):
        mine = [[list(p.shape), str(p.dtype)] for p in self._params()]
        everyone = [None] * self.world_size
        self._dist.all_gather_object(everyone, mine, group=self.process_group)
        for r, theirs in enumerate(everyone):
            if theirs != everyone[0]:
                raise RuntimeError(
                    f"ZeroRedundancyOptimizer: rank {r} passed {len(theirs)} parameters "
                    f"{_describe(theirs)} but rank 0 passed {len(everyone[0])} "
                    f"{_describe(everyone[0])}; every rank must pass the same parameters in the "
                    f"same order")

    def add_param_group(self, param_group: dict) -> None:
        """Add a parameter group; its parameters are assigned to ranks as at construction.

        Args:
            param_group: a dict with ``"params"`` and optional hyperparameters, the same on every
                rank (call it on every rank).
        """
        super().add_param_group(param_group)
        if getattr(self, "_initialized", False):
            self._partition_cache = self._layout = None
            self.optim.add_param_group(self._partition_parameters()[self.rank][-1])
            if self.parameters_as_bucket_view:
                self._build_param_buckets()

    # ***** step *****
    def step(self, closure=None):
        """Update this rank's parameters, then send every parameter from its owner to all.

        Args:
            closure: re-evaluates the model and returns the loss (called once, on every rank).

        Returns:
            The closure's loss, or None.
        """
        _sync_param_groups(self.param_groups, self.optim.param_groups)
        loss = self.optim.step(closure)
        self._sync_params()
        _sync_param_groups(self.optim.param_groups, self.param_groups)
        return loss

    def _sync_params(self):
        """Every rank's parameters from their owners: one all_gather per (dtype, device) of a
        flat buffer with a region per rank, padded to the largest region. One collective
        instead of one broadcast per owner: on TCP every rank sends while it receives."""
        if self.world_size == 1:
            return
        with grad_mode.no_grad():
            if self.parameters_as_bucket_view:
                for flat, width, per_rank in self._buckets:  # the parameters are views into flat
                    self._all_gather(flat, flat[self.rank * width:(self.rank + 1) * width].copy())
                    for p in (p for ps in per_rank for p in ps):
                        p._version[0] += 1
                return
            for width, per_rank in self._param_layout():
                first = next(p for ps in per_rank for p in ps)
                xp = _xp.get_array_module(first._data)
                send = xp.empty(width, dtype=first._data.dtype)
                off = 0
                for p in per_rank[self.rank]:
                    send[off:off + p._data.size] = p._data.reshape(-1)
                    off += p._data.size
                flat = xp.empty(width * self.world_size, dtype=first._data.dtype)
                self._all_gather(flat, send)
                for r, ps in enumerate(per_rank):
                    if r == self.rank:
                        continue
                    off = r * width
                    for p in ps:
                        p._data[...] = flat[off:off + p._data.size].reshape(p._data.shape)
                        p._version[0] += 1
                        off += p._data.size

    def _all_gather(self, flat, send):
        self._dist.all_gather_into_tensor(Tensor._wrap(flat), Tensor._wrap(send),
                                          group=self.process_group)

    def _param_layout(self) -> list:
        """``[(width, [rank] -> its parameters)]``, one entry per (dtype, device)."""
        if self._layout is None:
            by_key: dict = {}
            for r, groups in enumerate(self._partition_parameters()):
                for p in (p for g in groups for p in g["params"]):
                    a = p._data
                    key = (a.dtype.str,
                           ("cuda", a.device.id) if _xp.is_cupy_array(a) else ("cpu",))
                    by_key.setdefault(key, [[] for _ in range(self.world_size)])[r].append(p)
            self._layout = [(max(sum(p._data.size for p in ps) for ps in per_rank), per_rank)
                            for per_rank in by_key.values()]
        return self._layout

    def _build_param_buckets(self):
        """Move the parameters into their all_gather buffers: each becomes a view of its region."""
        self._buckets = []
        for width, per_rank in self._param_layout():
            first = next(p for ps in per_rank for p in ps)
            xp = _xp.get_array_module(first._data)
            flat = xp.zeros(width * self.world_size, dtype=first._data.dtype)
            for r, ps in enumerate(per_rank):
                off = r * width
                for p in ps:
                    n = p._data.size
                    view = flat[off:off + n].reshape(p._data.shape)
                    view[...] = p._data
                    p._data = view
                    off += n
            self._buckets.append((flat, width, per_rank))

    # ***** state dict *****
    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every rank's optimizer state on group rank ``to`` (a collective: call on all).

        Args:
            to: the group rank that receives the state; ``state_dict()`` works there afterwards.
        """
        local = self.optim.state_dict()
        gathered: list[Any] | None = [None] * self.world_size if self.rank == to else None
        self._dist.gather_object(local, gathered, group=self.process_group,
                                 dst=self._global_ranks[to])
        self._all_state_dicts = gathered if gathered is not None else []

    def state_dict(self) -> dict:
        """The full optimizer state in ``torch.optim`` layout (global parameter indices).

        Returns:
            ``{"state": {index: {...}}, "param_groups": [...]}``, as the unsharded optimizer's.

        Raises:
            RuntimeError: ``consolidate_state_dict(to=this rank)`` was not called first.
        """
        if not self._all_state_dicts:
            raise RuntimeError(
                "Optimizer state has not been consolidated on this rank. Please call "
                f"`consolidate_state_dict(to={self.rank})` on all ranks beforehand if you meant "
                "to save the global state.")
        sd = Optimizer.state_dict(self)  # param_groups with global indices, no state
        index = {id(p): i for i, p in enumerate(self._params())}
        for r, local in enumerate(self._all_state_dicts):
            owned = self._partition_parameters()[r]
            for lgroup, ggroup in zip(local["param_groups"], owned, strict=True):
                for li, p in zip(lgroup["params"], ggroup["params"], strict=True):
                    st = local["state"].get(li)
                    if st is not None:
                        sd["state"][index[id(p)]] = st
        sd["state"] = dict(sorted(sd["state"].items()))
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a full state dict (from ``state_dict()`` or the unsharded optimizer) on every rank;
        each rank keeps the state of the parameters it owns, whatever the saving world size.

        Args:
            state_dict: ``{"state": ..., "param_groups": ...}`` in ``torch.optim`` layout.

        Raises:
            ValueError: the groups or their sizes differ from this optimizer's.
        """
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(saved_groups)} parameter groups, this "
                             f"optimizer has {len(self.param_groups)}")
        for i, (mine, saved) in enumerate(zip(self.param_groups, saved_groups, strict=True)):
            if len(mine["params"]) != len(saved["params"]):
                raise ValueError(f"loaded state dict's parameter group {i} has "
                                 f"{len(saved['params'])} parameters, this optimizer's has "
                                 f"{len(mine['params'])}")
        saved_index = {}  # our parameter -> its index in the saved dict
        for mine, saved in zip(self.param_groups, saved_groups, strict=True):
            for p, idx in zip(mine["params"], saved["params"], strict=True):
                saved_index[id(p)] = int(idx)
        local_state, local_groups, li = {}, [], 0
        for gi, group in enumerate(self._partition_parameters()[self.rank]):
            packed = {k: v for k, v in saved_groups[gi].items() if k != "params"}
            packed["params"] = list(range(li, li + len(group["params"])))
            for p in group["params"]:
                st = state_dict["state"].get(saved_index[id(p)],
                                             state_dict["state"].get(str(saved_index[id(p)])))
                if st is not None:
                    local_state[li] = st
                li += 1
            local_groups.append(packed)
        self.optim.load_state_dict({"state": local_state, "param_groups": local_groups})
        _sync_param_groups(self.optim.param_groups, self.param_groups)


def _sync_param_groups(src: list, dst: list) -> None:
    """Copy every hyperparameter (not the parameters) group by group."""
    for s, d in zip(src, dst, strict=True):
        for k, v in s.items():
            if k != "params":
                d[k] = v


def _describe(entries) -> str:
    shown = ", ".join(f"{tuple(s)} {t}" for s, t in entries[:4])
    return f"[{shown}{', ...' if len(entries) > 4 else ''}]"
