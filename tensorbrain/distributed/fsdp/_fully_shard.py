"""FSDP2's front door: ``fully_shard(module, mesh=...)`` (torch's
``torch.distributed.fsdp.fully_shard``), on the same machinery as ``FullyShardedDataParallel``.

``fully_shard`` changes ``module`` in place: each of its parameters (those not already managed by
a ``fully_shard``-ed submodule) becomes a DTensor ``Shard(0)`` parameter (``(Replicate(),
Shard(0))`` on a 2-D mesh: HSDP), the module's class becomes ``FSDP<Class>`` (also an
:class:`FSDPModule`), and forward hooks gather the parameters before its forward and free them
after. Call it on the submodules (transformer blocks) first, then on the root.

>>> import tensorbrain as tb, tensorbrain.distributed as dist
>>> from tensorbrain.distributed.fsdp import fully_shard
>>> dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
>>> model = fully_shard(tb.nn.Linear(4, 2))
>>> type(model).__name__, type(model.weight).__name__, model.weight.placements
('FSDPLinear', 'DTensorParameter', (Shard(dim=0),))
>>> dist.destroy_process_group()
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import distributed_c10d as c10d
from . import _runtime, _tp
from ._flat_param import FlatParamHandle

if TYPE_CHECKING:
    from ...nn import Module

__all__ = ["CPUOffloadPolicy", "FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy",
           "UnshardHandle", "fully_shard", "register_fsdp_forward_method"]


@dataclass(frozen=True)
class MixedPrecisionPolicy:
    """FSDP2's mixed precision: ``param_dtype`` for the unsharded parameters (compute),
    ``reduce_dtype`` for gradient reduction, ``output_dtype`` to cast forward outputs to, and
    ``cast_forward_inputs`` to cast floating inputs to ``param_dtype``."""
    param_dtype: object = None
    reduce_dtype: object = None
    output_dtype: object = None
    cast_forward_inputs: bool = True


@dataclass
class OffloadPolicy:
    """No offloading (the default)."""


@dataclass
class CPUOffloadPolicy(OffloadPolicy):
    """Keep the sharded parameters and gradients in host memory (the optimizer steps there)."""
    pin_memory: bool = True


class UnshardHandle:
    """Returned by ``FSDPModule.unshard(async_op=True)``: ``wait()`` finishes the all-gather."""

    def __init__(self, state):
        self._state = state

    def wait(self):
        """Finish the all-gather and install the full parameters on the module."""
        if self._state.handle is not None:
            self._state.handle.wait_unshard()
            self._state.install()


class FSDPModule:
    """Mixed into the class of every module passed to :func:`fully_shard`.

    Requires of the class it is mixed into: ``nn.Module`` (``modules()``, ``__dict__``).
    """

    if TYPE_CHECKING:
        def modules(self) -> Iterator[Module]: ...

    def unshard(self, async_op: bool = False):
        """All-gather this module's parameters now (``async_op``: return a handle to wait)."""
        st = self._fsdp2_root_state()
        if st.handle is not None:
            st.handle.unshard(async_op=async_op)
            if not async_op:
                st.install()
        return UnshardHandle(st) if async_op else None

    def reshard(self):
        """Free this module's unsharded parameters."""
        st = self.__dict__["_fsdp_state"]
        if st.handle is not None:
            st.handle.reshard()
            st.uninstall()

    def set_requires_gradient_sync(self, requires_gradient_sync: bool, *, recurse=True):
        """With False, backward keeps gradients unsharded and unreduced (gradient accumulation,
        torch's replacement for ``no_sync``); the next backward with True reduces the sum."""
        mods = self.modules() if recurse else [self]
        for m in mods:
            st = m.__dict__.get("_fsdp_state")
            if st is not None:
                st.requires_grad_sync = bool(requires_gradient_sync)

    def set_reshard_after_forward(self, reshard_after_forward: bool, recurse=True):
        """Change ``reshard_after_forward`` (the root never reshards after forward)."""
        mods = self.modules() if recurse else [self]
        for m in mods:
            st = m.__dict__.get("_fsdp_state")
            if st is not None:
                st.reshard_after_forward = bool(reshard_after_forward)

    def set_reshard_after_backward(self, reshard_after_backward: bool, *, recurse=True):
        """Accepted for torch compatibility; has no effect here: parameters are always
        resharded after backward (the results are the same; torch with False would skip the
        next forward's all-gather during gradient accumulation, at the cost of memory).

        Args:
            reshard_after_backward: torch's flag (ignored).
            recurse: also for the FSDP submodules (ignored).
        """
        for st in _states(self, recurse):
            st.reshard_after_backward = bool(reshard_after_backward)

    def set_is_last_backward(self, is_last_backward: bool):
        """Accepted for torch compatibility; has no effect here: every backward waits for its
        gradient reductions at its end, which torch does only on the last one.

        Args:
            is_last_backward: torch's flag (ignored).
        """
        self.__dict__["_fsdp_state"].is_last_backward = bool(is_last_backward)

    def set_requires_all_reduce(self, requires_all_reduce: bool, *, recurse=True):
        """HSDP (2-D mesh) gradient accumulation: with False, backward reduce-scatters within
        the shard group but does not all-reduce across replicas; the partial gradients are
        kept and summed, and the next backward with True all-reduces the sum and writes
        ``.grad``. No effect on a 1-D mesh.

        Args:
            requires_all_reduce: whether the next backward all-reduces across replicas.
            recurse: also for the FSDP submodules.
        """
        for st in _states(self, recurse):
            st.requires_all_reduce = bool(requires_all_reduce)

    def set_gradient_divide_factor(self, factor: float):
        """Divide the summed gradients by ``factor`` instead of the number of data-parallel
        ranks (``torch``'s ``set_gradient_divide_factor``).

        Args:
            factor: the divisor (1.0 gives the sum over ranks).

        Raises:
            ValueError: ``factor`` is not positive.
        """
        if not factor > 0:
            raise ValueError(f"set_gradient_divide_factor: factor must be > 0, got {factor!r}")
        for st in _states(self, True):
            st.divide_factor = float(factor)

    def set_reduce_scatter_divide_factor(self, factor: float):
        """The older name of :meth:`set_gradient_divide_factor`.

        Args:
            factor: the divisor.
        """
        self.set_gradient_divide_factor(factor)

    def set_modules_to_forward_prefetch(self, modules):
        """Explicit forward prefetching: when this module's forward starts, start the
        all-gathers of ``modules`` (``fully_shard``-ed modules, usually the next blocks), in
        that order. Every rank must pass the same list.

        Args:
            modules: a list of FSDP modules.

        Raises:
            ValueError: an element is not a ``fully_shard``-ed module.
        """
        self.__dict__["_fsdp_state"].forward_prefetch_states = \
            [_state_of(m, "set_modules_to_forward_prefetch") for m in modules]

    def set_modules_to_backward_prefetch(self, modules):
        """Explicit backward prefetching: when this module's backward starts, start the
        all-gathers of ``modules`` (usually the previous blocks) instead of the default one
        unit ahead. Every rank must pass the same list.

        Args:
            modules: a list of FSDP modules.

        Raises:
            ValueError: an element is not a ``fully_shard``-ed module.
        """
        self.__dict__["_fsdp_state"].backward_prefetch_states = \
            [_state_of(m, "set_modules_to_backward_prefetch") for m in modules]

    def _fsdp2_root_state(self):
        st = self.__dict__["_fsdp_state"]
        if st.root is None:
            _lazy_root(self)
        return st


def _states(module, recurse):
    mods = module.modules() if recurse else [module]
    return [m.__dict__["_fsdp_state"] for m in mods if "_fsdp_state" in m.__dict__]


def _state_of(module, what):
    st = getattr(module, "__dict__", {}).get("_fsdp_state")
    if st is None or st.kind != "fully_shard":
        raise ValueError(f"{what}: expected modules passed to fully_shard, got "
                         f"{type(module).__name__}")
    return st


def register_fsdp_forward_method(module, method_name: str) -> None:
    """Make ``module.<method_name>()`` gather and free the parameters as ``forward`` does
    (torch's ``register_fsdp_forward_method``, for methods such as ``generate`` called
    instead of ``forward``).

    Args:
        module: a module passed to :func:`fully_shard`.
        method_name: the name of the method to wrap.

    Raises:
        ValueError: ``module`` is not a ``fully_shard``-ed module.
        AttributeError: it has no such method.
    """
    if not isinstance(module, FSDPModule):
        raise ValueError(f"register_fsdp_forward_method: expects a module passed to "
                         f"fully_shard, got {type(module).__name__}")
    method = getattr(type(module), method_name, None)
    if not callable(method):
        raise AttributeError(f"register_fsdp_forward_method: {type(module).__name__} has no "
                             f"method {method_name!r}")

    def wrapped(*args, **kwargs):
        args, kwargs = _pre_forward(module, args, kwargs)
        return _post_forward(module, args, method(module, *args, **kwargs))
    object.__setattr__(module, method_name, wrapped)


def _lazy_root(module):
    units = [m for m in module.modules() if "_fsdp_state" in m.__dict__]
    names = {id(m): n for n, m in module.named_modules()}
    states = []
    for m in units:
        st = m.__dict__["_fsdp_state"]
        if st.root is not None:
            raise RuntimeError("fully_shard: a submodule already ran as the root; call the "
                               "outermost fully_shard-ed module")
        st.name = names[id(m)]
        states.append(st)
    root = _runtime.RootState(module.__dict__["_fsdp_state"], states)
    # compare the wrapping over the world when the mesh spans it; over the shard group when it
    # is a sub-mesh (mesh["dp"] of pp x dp or tp x dp: the other ranks run other stages, or hold
    # other tensor-parallel shards of uneven sizes, and do not take part)
    h = next((u.handle for u in states if u.handle is not None), None)
    sub_mesh = h is not None and h.W * h.R != c10d.get_world_size()
    root.fingerprint_check(h.shard_group if h is not None and sub_mesh else None)
    return root


def _pre_forward(module, args, kwargs):
    st = module.__dict__["_fsdp_state"]
    if st.root is None:
        _lazy_root(module)
    return st.pre_forward(args, kwargs)


def _post_forward(module, args, output):
    return module.__dict__["_fsdp_state"].post_forward(output)


_CLASSES: dict = {}


def _np_dtype(d):
    import numpy as np
    return None if d is None else np.dtype(d)


def _data_parallel_mesh(mesh, dims):
    """The sub-mesh ``DataParallelMeshDims`` names: ``(replicate, shard)`` or ``(shard,)``."""
    if mesh is None:
        raise ValueError("fully_shard(dp_mesh_dims=...) needs mesh=, the whole SPMD mesh")
    shard, replicate = dims.shard_names, dims.replicate_names
    if len(shard) > 1 or len(replicate) > 1:
        raise NotImplementedError(f"fully_shard(dp_mesh_dims={dims}): flattening several mesh "
                                  f"dimensions into one is not supported; name one per role")
    if not shard:
        raise NotImplementedError(f"fully_shard(dp_mesh_dims={dims}): replicate-only (DDP) "
                                  f"dimensions are not supported; name a shard dimension")
    names = replicate + shard
    return mesh[names if len(names) > 1 else names[0]]


def fully_shard(module, *, mesh=None, reshard_after_forward=None, shard_placement_fn=None,
                mp_policy=None, offload_policy=None,
                ignored_params=None, dp_mesh_dims=None):
    """Shard ``module``'s parameters over ``mesh`` (FSDP2).

    Args:
        module (Module): the module (changed in place and returned).
        mesh (DeviceMesh | None): a 1-D DeviceMesh (shard) or 2-D (replicate, shard); default:
            all ranks, 1-D.
        reshard_after_forward (bool | None): free the unsharded parameters after forward (True,
            as FULL_SHARD) or keep them until after backward (False, as SHARD_GRAD_OP); None
            (torch's default) is True, and the root keeps its parameters either way. An int
            (reshard to a smaller group) is not supported.
        shard_placement_fn (Callable | None): not supported (parameters always shard on dim 0).
        mp_policy (MixedPrecisionPolicy | None): :class:`MixedPrecisionPolicy` (default: none).
        offload_policy (OffloadPolicy | None): :class:`OffloadPolicy` (default) or
            :class:`CPUOffloadPolicy`.
        ignored_params (set[Parameter] | None): parameters left alone.
        dp_mesh_dims (DataParallelMeshDims | None): with ``mesh`` the whole SPMD mesh (the
            parameters already DTensors on its other dimensions, as tensor parallelism makes
            them), the named dimensions FSDP shards over (and replicates over): the same as
            passing ``mesh[names]``. One name per role (flattening several is not supported).

    Returns:
        Module: ``module``, now an instance of ``FSDP<Class>`` and :class:`FSDPModule`.

    Raises:
        NotImplementedError: ``shard_placement_fn`` or an int ``reshard_after_forward``.
        ValueError: a mesh of more than 2 dimensions; parameters of mixed dtypes.
    """
    if dp_mesh_dims is not None:
        mesh = _data_parallel_mesh(mesh, dp_mesh_dims)
    if shard_placement_fn is not None:
        raise NotImplementedError("fully_shard(shard_placement_fn=...) is not supported: "
                                  "parameters are sharded on dim 0")
    if reshard_after_forward is None:
        reshard_after_forward = True     # torch: True except for the root, which never reshards
    if not isinstance(reshard_after_forward, bool):
        raise NotImplementedError(f"fully_shard(reshard_after_forward={reshard_after_forward!r})"
                                  f": only True or False is supported")
    from ..device_mesh import init_device_mesh
    from ..tensor import DTensor, Replicate, Shard
    from ..tensor._dtensor_spec import DTensorSpec
    from .fully_sharded_data_parallel import _collect
    mp_policy = mp_policy if mp_policy is not None else MixedPrecisionPolicy()
    if mesh is None:
        mesh = init_device_mesh("cpu", (c10d.get_world_size(),))
    placements: tuple
    if mesh.ndim == 1:
        shard_group, replicate_group, placements = mesh.get_group(0), None, (Shard(0),)
    elif mesh.ndim == 2:
        shard_group, replicate_group = mesh.get_group(1), mesh.get_group(0)
        placements = (Replicate(), Shard(0))
    else:
        raise ValueError(f"fully_shard: mesh must be 1-D or 2-D (replicate, shard), got "
                         f"{mesh.ndim}-D")
    ignored = {id(p) for p in (ignored_params or ())}
    entries, shared = _collect(module, lambda m: "_fsdp_state" in m.__dict__, ignored,
                               "fully_shard")
    handle = None
    if entries:
        handle = FlatParamHandle(type(module).__name__, entries, shard_group, replicate_group,
                                 "dim0", _np_dtype(mp_policy.param_dtype),
                                 _np_dtype(mp_policy.reduce_dtype),
                                 isinstance(offload_policy, CPUOffloadPolicy), mesh)
        if handle.entries and any(e.tp_spec is not None for e in handle.entries) and \
                mesh.ndim != 1:
            raise NotImplementedError(
                f"fully_shard: tensor-parallel (DTensor) parameters with a {mesh.ndim}-D FSDP "
                f"mesh (HSDP) would need a 3-D mesh, which is not supported yet; pass "
                f"mesh=mesh['dp'] (1-D)")
        _tp.attach(handle, "fully_shard")
    state = _runtime.UnitState("", handle, kind="fully_shard",
                               reshard_after_forward=reshard_after_forward, orig_params=True,
                               cast_inputs=mp_policy.cast_forward_inputs,
                               output_dtype=_np_dtype(mp_policy.output_dtype), shared=shared)
    if handle is not None:
        specs = {}
        for e in handle.entries:
            lo, hi = handle.local_slice(e)
            local = handle.shard[lo:hi].reshape((e.local_rows,) + e.shape[1:])
            spec = handle.tp_specs.get(id(e))
            if spec is None:
                pl = placements if e.shape else tuple(Replicate() for _ in placements)
                spec = DTensorSpec(mesh, pl, e.shape)
            dt = DTensor._make(local, spec)
            p = DTensor._as_parameter(dt, requires_grad=e.requires_grad)
            e.module.__dict__["_parameters"][e.attr] = p
            e.orig = p
            specs[id(e)] = spec
        for mod, attr, e in shared:
            mod.__dict__["_parameters"][attr] = e.orig

        def wrap_grad(entry, array, specs=specs):
            return DTensor._make(array, specs[id(entry)])
        state.wrap_grad = wrap_grad
    module.__dict__["_fsdp_state"] = state
    module.register_forward_pre_hook(_pre_forward, with_kwargs=True)
    module.register_forward_hook(_post_forward)
    cls = type(module)
    if not issubclass(cls, FSDPModule):
        if cls not in _CLASSES:
            _CLASSES[cls] = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {})
        module.__class__ = _CLASSES[cls]
    return module
