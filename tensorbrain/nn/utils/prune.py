"""``tb.nn.utils.prune`` (``torch.nn.utils.prune``): masks that zero parts of a parameter.

As torch's: pruning ``module.weight`` moves the parameter to ``weight_orig``, adds a buffer
``weight_mask`` and computes ``weight = weight_orig * weight_mask`` before each forward (a
forward pre-hook); pruning again multiplies the new mask in; ``remove`` makes the pruned weight
a plain parameter again. ``l1_unstructured`` zeroes the smallest-magnitude entries,
``random_unstructured`` random ones, ``ln_structured`` whole slices by their ``n``-norm,
``global_unstructured`` the smallest entries across several parameters.

>>> import tensorbrain as tb
>>> m = tb.nn.Linear(4, 2)
>>> _ = tb.nn.utils.prune.l1_unstructured(m, "weight", amount=0.5)
>>> int((m.weight == 0).sum()), sorted(n for n, _ in m.named_buffers())
(4, ['weight_mask'])
"""
from __future__ import annotations

import numbers

import numpy as np

from ... import _random, _xp
from ..._ops import elementwise as E
from ...autograd import grad_mode
from ...tensor import Tensor
from ..parameter import Parameter


def _count(amount, n):
    if isinstance(amount, numbers.Integral) and not isinstance(amount, bool):
        if amount > n:
            raise ValueError(f"amount={amount} should be smaller than the number of parameters "
                             f"to prune={n}")
        return int(amount)
    if not 0.0 <= amount <= 1.0:
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a "
                         f"non-negative integer")
    return int(round(amount * n))


class _PruningHook:
    def __init__(self, name):
        self.name = name

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, E.mul(getattr(module, self.name + "_orig"),
                                                    getattr(module, self.name + "_mask")))


def _apply_mask(module, name, mask):
    """Combine ``mask`` (a host bool array of the parameter's shape) into the module's mask."""
    if is_pruned_param(module, name):
        old = module._buffers[name + "_mask"]
        old._data[...] = old._data * _xp.get_array_module(old._data).asarray(mask,
                                                                            dtype=old.dtype)
    else:
        param = module._parameters.pop(name)
        module.register_parameter(name + "_orig", param)
        data = param._data
        xp = _xp.get_array_module(data)
        module.register_buffer(name + "_mask", Tensor._wrap(xp.asarray(mask, dtype=data.dtype)))
        module.register_forward_pre_hook(_PruningHook(name))
    _PruningHook(name)(module, ())
    return module


def is_pruned_param(module, name) -> bool:
    """Whether ``module.<name>`` is pruned.

    Args:
        module: the module.
        name: the parameter's name.
    """
    return name + "_mask" in module._buffers and name + "_orig" in module._parameters


def _current(module, name):
    t = module._parameters.get(name + "_orig", module._parameters.get(name))
    mask = module._buffers.get(name + "_mask")
    data = _xp.to_numpy(t._data)
    return data, (np.ones(data.shape, bool) if mask is None else _xp.to_numpy(mask._data) != 0)


def identity(module, name):
    """Prune nothing (a mask of ones), as torch's ``prune.identity``.

    Args:
        module: the module.
        name: the parameter's name.
    """
    data, keep = _current(module, name)
    return _apply_mask(module, name, np.ones(data.shape, bool))


def custom_from_mask(module, name, mask):
    """Prune with a given mask (1 keeps, 0 prunes).

    Args:
        module: the module.
        name: the parameter's name.
        mask: a tensor of the parameter's shape.
    """
    m = mask._data if isinstance(mask, Tensor) else np.asarray(mask)
    return _apply_mask(module, name, _xp.to_numpy(m) != 0)


def l1_unstructured(module, name, amount, importance_scores=None):
    """Zero the ``amount`` entries of smallest magnitude (among those still kept).

    Args:
        module: the module.
        name: the parameter's name.
        amount: a fraction in [0, 1] or a count.
        importance_scores: scores to rank by instead of the magnitudes.
    """
    data, keep = _current(module, name)
    scores = data if importance_scores is None else _xp.to_numpy(importance_scores._data)
    return _apply_mask(module, name, _l1_mask(scores, keep, amount))


def _l1_mask(scores, keep, amount):
    scores = np.abs(scores)
    k = _count(amount, int(keep.sum()))
    mask = keep.copy()
    if k:
        flat = np.where(keep, scores, np.inf).reshape(-1)
        mask.reshape(-1)[np.argsort(flat, kind="stable")[:k]] = False
    return mask


def random_unstructured(module, name, amount):
    """Zero ``amount`` entries chosen at random (TensorBrain's generator).

    Args:
        module: the module.
        name: the parameter's name.
        amount: a fraction or a count.
    """
    data, keep = _current(module, name)
    return _apply_mask(module, name, _random_mask(keep, amount))


def _random_mask(keep, amount):
    k = _count(amount, int(keep.sum()))
    mask = keep.copy()
    if k:
        flat = np.where(keep.reshape(-1), _random._rng(None).random(keep.size), np.inf)
        mask.reshape(-1)[np.argsort(flat)[:k]] = False
    return mask


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Zero the ``amount`` slices along ``dim`` of smallest ``n``-norm. On a parameter pruned
    before, as torch: the norms are of the pruned parameter, and only slices that still keep an
    entry are candidates (``amount`` a fraction or count of those).

    Args:
        module: the module.
        name: the parameter's name.
        amount: a fraction or a count of slices.
        n: the norm's order.
        dim: the dimension whose slices are pruned.
        importance_scores: scores instead of the parameter.
    """
    data, keep = _current(module, name)
    # as torch: the norms of the parameter as pruned so far (module.<name>), unless scores are given
    scores = data * keep if importance_scores is None else _xp.to_numpy(importance_scores._data)
    return _apply_mask(module, name, _ln_mask(scores, keep, amount, n, dim, live_only=True))


def _live_slices(keep, dim, live_only):
    """Indices along ``dim`` of the candidate slices: with ``live_only``, those that still keep an
    entry (when a module's parameter is pruned again, torch's PruningContainer lets a structured
    method choose among these only, ``amount`` counting them alone), else all."""
    if not live_only:
        return np.arange(keep.shape[dim])
    return np.flatnonzero(np.moveaxis(keep, dim, 0).reshape(keep.shape[dim], -1).any(axis=1))


def _ln_mask(scores, keep, amount, n, dim, live_only=False):
    live = _live_slices(keep, dim, live_only)
    moved = np.moveaxis(scores, dim, 0).reshape(scores.shape[dim], -1)[live]
    norms = np.linalg.norm(moved, ord=n, axis=1)
    k = _count(amount, len(live))
    mask = keep.copy()
    for i in live[np.argsort(norms, kind="stable")[:k]]:
        np.moveaxis(mask, dim, 0)[i] = False
    return mask


def random_structured(module, name, amount, dim):
    """Zero ``amount`` slices along ``dim`` chosen at random (TensorBrain's generator), as
    torch's ``prune.random_structured``: on a parameter pruned before, among the slices that
    still keep an entry.

    Args:
        module: the module.
        name: the parameter's name.
        amount: a fraction or a count of slices.
        dim: the dimension whose slices are pruned.
    """
    data, keep = _current(module, name)
    return _apply_mask(module, name, _random_structured_mask(keep, amount, dim, live_only=True))


def _random_structured_mask(keep, amount, dim, live_only=False):
    live = _live_slices(keep, dim, live_only)
    k = _count(amount, len(live))
    mask = keep.copy()
    for i in live[np.argsort(_random._rng(None).random(len(live)))[:k]]:
        np.moveaxis(mask, dim, 0)[i] = False
    return mask


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the ``amount`` smallest entries across all ``(module, name)`` pairs together.

    Args:
        parameters: ``(module, name)`` pairs.
        pruning_method: ``prune.L1Unstructured`` (or ``RandomUnstructured``).
        importance_scores: accepted as None only.
        **kwargs: ``amount``.
    """
    pairs = list(parameters)
    datas = [_current(m, n) for m, n in pairs]
    scores = np.concatenate([np.where(k, np.abs(d), np.inf).reshape(-1) for d, k in datas])
    keep_total = int(sum(int(k.sum()) for _, k in datas))
    k = _count(kwargs["amount"], keep_total)
    if pruning_method is RandomUnstructured:
        scores = np.where(np.isinf(scores), np.inf, _random._rng(None).random(scores.size))
    drop = np.zeros(scores.size, bool)
    drop[np.argsort(scores, kind="stable")[:k]] = True
    start = 0
    for (module, name), (d, keep) in zip(pairs, datas):
        part = drop[start:start + d.size].reshape(d.shape)
        start += d.size
        _apply_mask(module, name, keep & ~part)


class BasePruningMethod:
    """The base of pruning methods, as torch's ``prune.BasePruningMethod``: a subclass defines
    ``compute_mask(t, default_mask)`` (a mask of ``t``'s shape: 1 keeps, 0 prunes, combining
    ``default_mask``, the mask so far) and ``PRUNING_TYPE``; ``Method.apply(module, name,
    *args)`` prunes ``module.<name>`` with it as the built-in functions do.
    """

    PRUNING_TYPE: str | None = None

    def compute_mask(self, t, default_mask):
        """The new mask for ``t`` given the mask so far (a subclass's rule).

        Raises:
            NotImplementedError: a subclass did not define it.
        """
        raise NotImplementedError(f"{type(self).__name__} must define compute_mask")

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)``.

        Args:
            module: the module.
            name: the parameter's name.
            *args: the method's arguments (``amount``...).
            importance_scores: scores to rank by instead of the parameter.
            **kwargs: the method's keyword arguments.

        Returns:
            The method object.
        """
        method = cls(*args, **kwargs)
        data, keep = _current(module, name)
        scores = Tensor._wrap(data if importance_scores is None
                              else _xp.to_numpy(importance_scores._data))
        mask = method.compute_mask(scores, default_mask=Tensor._wrap(keep.astype(data.dtype)))
        m = mask._data if isinstance(mask, Tensor) else np.asarray(mask)
        _apply_mask(module, name, _xp.to_numpy(m) != 0)
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` times the mask this method computes for it (``t`` is not changed).

        Args:
            t: a tensor.
            default_mask: the mask so far (default: ones).
            importance_scores: scores to rank by instead of ``t``.
        """
        scores = t if importance_scores is None else importance_scores
        if default_mask is None:
            default_mask = Tensor._wrap(np.ones(tuple(t.shape), _xp.to_numpy(t._data).dtype))
        return E.mul(t, self.compute_mask(scores, default_mask=default_mask))


def _mask_tensor(mask, like):
    xp = _xp.get_array_module(like._data)
    return Tensor._wrap(xp.asarray(mask, dtype=like._data.dtype))


class L1Unstructured(BasePruningMethod):
    """Magnitude pruning of ``amount`` entries (``prune.L1Unstructured``; also the method
    object ``global_unstructured`` takes)."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        self.amount = amount

    def compute_mask(self, t, default_mask):
        """Prune the smallest magnitudes among the entries ``default_mask`` keeps."""
        keep = _xp.to_numpy(default_mask._data) != 0
        return _mask_tensor(_l1_mask(_xp.to_numpy(t._data), keep, self.amount), default_mask)


class RandomUnstructured(BasePruningMethod):
    """Random pruning of ``amount`` entries (``prune.RandomUnstructured``)."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        self.amount = amount

    def compute_mask(self, t, default_mask):
        """Prune random entries among those ``default_mask`` keeps."""
        keep = _xp.to_numpy(default_mask._data) != 0
        return _mask_tensor(_random_mask(keep, self.amount), default_mask)


class LnStructured(BasePruningMethod):
    """Pruning of the ``amount`` slices along ``dim`` of smallest ``n``-norm
    (``prune.LnStructured``)."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask(self, t, default_mask):
        """Prune whole slices along ``dim`` by their norm."""
        keep = _xp.to_numpy(default_mask._data) != 0
        return _mask_tensor(_ln_mask(_xp.to_numpy(t._data), keep, self.amount, self.n,
                                     self.dim), default_mask)


class RandomStructured(BasePruningMethod):
    """Pruning of ``amount`` random slices along ``dim`` (``prune.RandomStructured``)."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        self.amount, self.dim = amount, dim

    def compute_mask(self, t, default_mask):
        """Prune random whole slices along ``dim``."""
        keep = _xp.to_numpy(default_mask._data) != 0
        return _mask_tensor(_random_structured_mask(keep, self.amount, self.dim), default_mask)


def is_pruned(module) -> bool:
    """Whether any submodule of ``module`` has a pruned parameter.

    Args:
        module: the module.
    """
    return any(isinstance(h, _PruningHook) for m in module.modules()
               for h in m._forward_pre_hooks.values())


def remove(module, name):
    """Make the pruned ``name`` a plain parameter (``orig * mask``), as torch's
    ``prune.remove``.

    Args:
        module: the module.
        name: the parameter's name.

    Raises:
        ValueError: ``name`` is not pruned.
    """
    if not is_pruned_param(module, name):
        raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before "
                         f"pruning can be removed")
    with grad_mode.no_grad():
        w = E.mul(module._parameters[name + "_orig"], module._buffers[name + "_mask"])
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _PruningHook) and hook.name == name:
            del module._forward_pre_hooks[key]
    del module._parameters[name + "_orig"]
    del module._buffers[name + "_mask"]
    module.__dict__.pop(name, None)
    module.register_parameter(name, Parameter(w.detach()))
    return module
