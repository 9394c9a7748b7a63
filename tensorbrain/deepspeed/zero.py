"""``deepspeed.zero``: reading and editing ZeRO-3 partitioned parameters whole
(:class:`GatheredParameters`) and building a model with its parameters partitioned
(:class:`Init`), as DeepSpeed's ``deepspeed/runtime/zero/partition_parameters.py``.

A parameter is partitioned in one of two ways here:

- by the engine at ZeRO stage 3 (several processes): FSDP ``FULL_SHARD`` over the original
  parameters; each ``Parameter`` object holds this rank's 1-D piece (``p._ds_owner`` is the FSDP
  wrapper);
- by :class:`Init`: each parameter is cut into ``world_size`` 1-D pieces as ``torch.chunk``
  cuts (``p.ds_tensor`` is this rank's piece, ``p.ds_shape``/``p.ds_numel`` the full shape and
  size, ``p`` itself holds no numbers). ``deepspeed.initialize`` puts the pieces back together
  before it wraps the model.

Below stage 3 (or in one process) parameters are whole on every rank and
:class:`GatheredParameters` does nothing, as DeepSpeed's does for parameters it did not
partition.
"""
from __future__ import annotations

import numpy as np

__all__ = ["GatheredParameters", "Init"]


def _dist():
    from .. import distributed
    return distributed


def _world() -> tuple[int, int]:
    dist = _dist()
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def _as_list(params) -> list:
    if params is None:
        return []
    from ..nn.parameter import Parameter
    if isinstance(params, Parameter) or hasattr(params, "_data"):
        return [params]
    return [p for p in params if p is not None]


# ***** Init: partitioned at construction *****
def _partition(p, rank: int, world: int) -> None:
    """Keep this rank's 1-D piece of ``p`` (``torch.chunk``'s split) in ``p.ds_tensor``."""
    from ..tensor import Tensor
    flat = p._data.reshape(-1)
    per = -(-flat.size // world)
    piece = flat[min(rank * per, flat.size):min((rank + 1) * per, flat.size)].copy()
    p.ds_shape, p.ds_numel = tuple(p._data.shape), int(flat.size)
    p.ds_tensor = Tensor._wrap(piece)
    p.ds_status = "NOT_AVAILABLE"
    p._data = flat[:0].copy()


def _gather(p) -> np.ndarray:
    """The whole of an Init-partitioned parameter (a collective)."""
    from ..tensor import Tensor
    dist = _dist()
    _, world = _world()
    xp_piece = p.ds_tensor._data
    per = -(-p.ds_numel // world)
    padded = np.zeros(per, dtype=xp_piece.dtype)
    padded[:xp_piece.size] = np.asarray(xp_piece)
    out = Tensor._wrap(np.zeros(per * world, dtype=xp_piece.dtype))
    dist.all_gather_into_tensor(out, Tensor._wrap(padded))
    return out._data[:p.ds_numel].reshape(p.ds_shape)


def gather_init_partitioned(module) -> None:
    """Give every Init-partitioned parameter of ``module`` its whole value back (a collective;
    ``deepspeed.initialize`` calls it before wrapping).

    Args:
        module: the model.
    """
    for p in module.parameters():
        if getattr(p, "ds_status", None) == "NOT_AVAILABLE":
            p._data = _gather(p)
            for attr in ("ds_tensor", "ds_shape", "ds_numel", "ds_status"):
                delattr(p, attr)


class Init:
    """Build a model with its parameters partitioned across the ranks (DeepSpeed's
    ``deepspeed.zero.Init``).

    Modules constructed in the ``with`` block get their parameters broadcast from rank 0 (so
    every rank starts from the same values, as DeepSpeed does) and then partitioned when the
    block ends: each keeps only this rank's 1-D piece (``p.ds_tensor``; ``p.ds_shape``,
    ``p.ds_numel``; ``p.numel()`` is 0). Unlike DeepSpeed, which partitions each module as its
    ``__init__`` returns, the whole model exists once, at construction, before the block ends.
    Read or edit partitioned parameters with :class:`GatheredParameters`;
    ``deepspeed.initialize`` reassembles them. With one process or ``enabled=False`` nothing is
    partitioned.

    Args:
        module: accepted (DeepSpeed partitions an already built module with it); must be None.
        data_parallel_group: must be None (the default group).
        config_dict_or_path: accepted (the engine's config).
        config: accepted.
        enabled: False makes the block do nothing.
        remote_device: ``None``, ``"cpu"`` or ``"none"`` (CPU is where the pieces live here).
        pin_memory: accepted.
        mpu: must be None.
        dtype: accepted.
        **kwargs: DeepSpeed's other keywords, accepted.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.deepspeed as deepspeed
        >>> with deepspeed.zero.Init():
        ...     layer = tb.nn.Linear(3, 2)        # one process: nothing to partition
        >>> tuple(layer.weight.shape)
        (2, 3)
    """

    def __init__(self, module=None, data_parallel_group=None, config_dict_or_path=None,
                 config=None, enabled: bool = True, remote_device=None, pin_memory=False,
                 mpu=None, dtype=None, **kwargs):
        if module is not None or data_parallel_group is not None or mpu is not None:
            raise NotImplementedError(
                "deepspeed.zero.Init(module=/data_parallel_group=/mpu=) is not supported by "
                "tensorbrain.deepspeed: use it as a with-block around the model's construction, "
                "over the default group")
        if str(remote_device or "cpu").lower() not in ("cpu", "none"):
            raise NotImplementedError(f"deepspeed.zero.Init(remote_device={remote_device!r}): "
                                      f"only 'cpu' is supported (NVMe offload is not)")
        self.enabled = bool(enabled)
        self._made: list = []

    def __enter__(self):
        from ..nn.modules.module import Module
        if not self.enabled:
            return self
        made, original = self._made, Module.__init__

        def init(module, *args, **kwargs):
            original(module, *args, **kwargs)
            made.append(module)
        self._original = original
        Module.__init__ = init
        return self

    def __exit__(self, *exc):
        from ..nn.modules.module import Module
        if not self.enabled:
            return False
        Module.__init__ = self._original
        if exc[0] is not None:
            return False
        rank, world = _world()
        if world == 1:
            return False
        inside = {id(c) for m in self._made for c in list(m.children())}
        from .. import no_grad
        with no_grad():
            for root in (m for m in self._made if id(m) not in inside):
                for p in root.parameters():
                    if getattr(p, "ds_status", None) is None:
                        _dist().broadcast(p, src=0)
                        _partition(p, rank, world)
        return False


# ***** GatheredParameters *****
class GatheredParameters:
    """Gather partitioned parameters for the ``with`` block (DeepSpeed's
    ``deepspeed.zero.GatheredParameters``): inside it each given parameter holds its whole value
    on every rank. With ``modifier_rank=r``, rank ``r``'s edits (made in place, under
    ``no_grad``) are broadcast at exit and partitioned again on every rank; with None the block
    is read-only (edits are dropped). A collective: every rank enters it with the same
    parameters.

    Args:
        params: a parameter or an iterable of them.
        modifier_rank: the rank whose edits are kept, or None.
        fwd_module: accepted (DeepSpeed registers external parameters with it).
        enabled: False makes the block do nothing.

    Raises:
        ValueError: the ranks passed different parameter lists (the message names each rank's
            count and shapes).

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.deepspeed as deepspeed
        >>> layer = tb.nn.Linear(3, 2)
        >>> with deepspeed.zero.GatheredParameters(layer.weight, modifier_rank=0):
        ...     _ = layer.weight.data.fill_(1.0)     # not partitioned: edited as it is
        >>> float(layer.weight.sum())
        6.0
    """

    def __init__(self, params, modifier_rank=None, fwd_module=None, enabled: bool = True):
        self.params = _as_list(params)
        self.modifier_rank = modifier_rank
        self.enabled = bool(enabled)
        self._stack: list = []

    def _partitioned(self) -> bool:
        return any(getattr(p, "_ds_owner", None) is not None or
                   getattr(p, "ds_status", None) == "NOT_AVAILABLE" for p in self.params)

    def __enter__(self):
        self.active = self.enabled and _world()[1] > 1 and self._check()
        if not self.active:
            return self
        owners = []
        for p in self.params:
            o = getattr(p, "_ds_owner", None)
            if o is not None and all(o is not q for q in owners):
                owners.append(o)
        for owner in owners:
            self._stack.append(("fsdp", self._enter_fsdp(owner, self.modifier_rank is not None)))
        for p in self.params:
            if getattr(p, "ds_status", None) == "NOT_AVAILABLE":
                p._data = _gather(p)
                p.ds_status = "AVAILABLE"
                self._stack.append(("init", p))
        return self

    def _check(self) -> bool:
        """Every rank passed the same parameters (count and shapes), and some are partitioned."""
        rank, world = _world()
        mine = (self._partitioned(), [tuple(getattr(p, "ds_shape", None) or
                                            _full_shape(p)) for p in self.params])
        every: list = [None] * world
        _dist().all_gather_object(every, mine)
        if any(e != every[0] for e in every):
            told = "; ".join(f"rank {r}: {len(e[1])} parameters {e[1]}" for r, e in
                             enumerate(every))
            raise ValueError(f"deepspeed.zero.GatheredParameters: the ranks passed different "
                             f"parameter lists ({told}); every rank must gather the same "
                             f"parameters in the same order")
        return bool(every[0][0])

    @staticmethod
    def _enter_fsdp(owner, writeback: bool):
        from ..distributed.fsdp import FullyShardedDataParallel, _state_dict
        units = [m for m in owner.modules() if isinstance(m, FullyShardedDataParallel)]
        units[0]._lazy_init()
        ctx = _state_dict.full_params(units, writeback=writeback)
        ctx.__enter__()
        swapped = []
        for u in units:
            h = u._fsdp_state.handle
            for e in (h.entries if h is not None else []):
                if e.orig is not None:
                    swapped.append((e.orig, e.orig._data))
                    e.orig._data = e.view._data     # the Parameter object is whole now
        return ctx, swapped

    def __exit__(self, *exc):
        if not self.active:
            return False
        from .. import no_grad
        dist = _dist()
        rank, world = _world()
        keep = self.modifier_rank is not None
        with no_grad():
            if keep:
                for p in self.params:
                    dist.broadcast(p, src=int(self.modifier_rank))
            for kind, item in reversed(self._stack):
                if kind == "init":
                    if not keep:        # read-only: the pieces stay as they were
                        item._data = item._data.reshape(-1)[:0].copy()
                        item.ds_status = "NOT_AVAILABLE"
                        continue
                    _partition(item, rank, world)
                    continue
                ctx, swapped = item
                for p, shard in swapped:
                    p._data = shard
                ctx.__exit__(None, None, None)   # writes the whole values back when `keep`
        self._stack.clear()
        return False


def _full_shape(p) -> tuple:
    owner = getattr(p, "_ds_owner", None)
    if owner is None:
        return tuple(p.shape)
    from ..distributed.fsdp import FullyShardedDataParallel
    for m in owner.modules():
        if isinstance(m, FullyShardedDataParallel) and m._fsdp_state.handle is not None:
            for e in m._fsdp_state.handle.entries:
                if e.orig is p:
                    return tuple(e.shape)
    return tuple(p.shape)

