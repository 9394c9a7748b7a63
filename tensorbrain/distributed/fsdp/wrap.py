"""Which submodules become their own FSDP units (torch's ``torch.distributed.fsdp.wrap``).

A policy is called as ``policy(module=m, recurse=..., nonwrapped_numel=n)``: with
``recurse=True`` it answers "look inside ``m``?", with ``recurse=False`` "wrap ``m`` itself?",
where ``n`` counts the parameters of ``m`` not already in a wrapped child. The wrapping walks the
tree bottom-up, so the innermost qualifying modules become units first.

>>> import tensorbrain as tb
>>> from functools import partial
>>> from tensorbrain.distributed.fsdp.wrap import size_based_auto_wrap_policy
>>> policy = partial(size_based_auto_wrap_policy, min_num_params=100)
>>> policy(tb.nn.Linear(10, 10), recurse=False, nonwrapped_numel=110)
True
"""
from __future__ import annotations

import contextlib
from typing import Any


__all__ = ["CustomPolicy", "ModuleWrapPolicy", "always_wrap_policy", "enable_wrap",
           "lambda_auto_wrap_policy", "size_based_auto_wrap_policy",
           "transformer_auto_wrap_policy", "wrap"]


def always_wrap_policy(module, recurse, nonwrapped_numel, **kwargs) -> bool:
    """Wrap every module.

    Args:
        module: the module considered.
        recurse: True when asked whether to descend into ``module``'s children, False when
            asked whether to wrap ``module`` itself.
        nonwrapped_numel: parameters of ``module`` not yet wrapped.
        **kwargs: ignored.
    """
    return True


def size_based_auto_wrap_policy(module, recurse, nonwrapped_numel, min_num_params=int(1e8),
                                force_leaf_modules=None, exclude_wrap_modules=None) -> bool:
    """Wrap a module once it holds at least ``min_num_params`` parameters not yet wrapped.

    Args:
        module: the candidate.
        recurse: True to ask whether to look inside ``module``.
        nonwrapped_numel: its parameters not yet in a wrapped child.
        min_num_params: the threshold (torch's default 1e8).
        force_leaf_modules: classes never looked into (default ``MultiheadAttention``).
        exclude_wrap_modules: classes never wrapped themselves (default ModuleList, ModuleDict).

    Returns:
        The decision.
    """
    from ...nn import modules as M
    force = tuple(force_leaf_modules) if force_leaf_modules is not None else tuple(
        c for c in (getattr(M, "MultiheadAttention", None),) if c is not None)
    exclude = tuple(exclude_wrap_modules) if exclude_wrap_modules is not None else tuple(
        c for c in (getattr(M, "ModuleList", None), getattr(M, "ModuleDict", None))
        if c is not None)
    big = nonwrapped_numel >= min_num_params
    if recurse:
        return big and not isinstance(module, force)
    return big and not isinstance(module, exclude)


# torch exposes these two as attributes of the function (ours take their defaults above)
size_based_auto_wrap_policy.__dict__.update(FORCE_LEAF_MODULES=None, EXCLUDE_WRAP_MODULES=None)


def transformer_auto_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls) -> bool:
    """Wrap every instance of the classes in ``transformer_layer_cls`` (a set of classes).

    Args:
        module: the module considered.
        recurse: True when asked whether to descend into ``module``'s children, False when
            asked whether to wrap ``module`` itself.
        nonwrapped_numel: parameters of ``module`` not yet wrapped.
        transformer_layer_cls: a set of module classes to wrap.
    """
    if recurse:
        return True
    return isinstance(module, tuple(transformer_layer_cls))


def lambda_auto_wrap_policy(module, recurse, nonwrapped_numel, lambda_fn) -> bool:
    """Wrap the modules for which ``lambda_fn(module)`` is true.

    Args:
        module: the module considered.
        recurse: True when asked whether to descend into ``module``'s children, False when
            asked whether to wrap ``module`` itself.
        nonwrapped_numel: parameters of ``module`` not yet wrapped.
        lambda_fn: a function from a module to a bool.
    """
    return True if recurse else bool(lambda_fn(module))


class ModuleWrapPolicy:
    """Wrap every instance of the given module classes (torch's ``ModuleWrapPolicy``).

    Args:
        module_classes: an iterable of ``nn.Module`` subclasses.
    """

    def __init__(self, module_classes):
        self._module_classes = tuple(module_classes)

    def __call__(self, module, recurse, nonwrapped_numel, **kwargs) -> bool:
        return True if recurse else isinstance(module, self._module_classes)

    def __repr__(self) -> str:
        return f"ModuleWrapPolicy({[c.__name__ for c in self._module_classes]})"


class CustomPolicy:
    """Wrap the modules for which ``lambda_fn(module)`` is truthy (kwargs dicts are accepted
    and ignored: per-unit overrides are not supported).

    Args:
        lambda_fn: a function from a module to a bool or to a dict of FSDP keyword overrides.
    """

    def __init__(self, lambda_fn):
        self._fn = lambda_fn

    def __call__(self, module, recurse, nonwrapped_numel, **kwargs) -> bool:
        return True if recurse else bool(self._fn(module))


def _numel(module) -> int:
    return sum(p.numel() for p in module.parameters())


def _recursive_wrap(module, policy, wrapper, ignored, is_wrapped, only_wrap_children=False):
    """torch's ``_recursive_wrap``: returns ``(module or its wrapper, numel wrapped)``;
    ``ignored`` holds the ids of modules never wrapped."""
    if is_wrapped(module) or id(module) in ignored:
        return module, 0
    nonwrapped = _numel(module)
    if not policy(module=module, recurse=True, nonwrapped_numel=nonwrapped):
        return module, 0
    total = 0
    for name, child in list(module.named_children()):
        if child is None:
            continue
        new, n = _recursive_wrap(child, policy, wrapper, ignored, is_wrapped)
        if new is not child:
            setattr(module, name, new)
        total += n
    remainder = nonwrapped - total
    if not only_wrap_children and policy(module=module, recurse=False,
                                         nonwrapped_numel=remainder):
        return wrapper(module), nonwrapped
    return module, total


_WRAP_CONTEXT: list[tuple[Any, dict[str, Any]]] = []


@contextlib.contextmanager
def enable_wrap(*, wrapper_cls, **wrapper_kwargs):
    """Inside this context, :func:`wrap` wraps modules with ``wrapper_cls(**wrapper_kwargs)``.

    Args:
        wrapper_cls: the wrapper class (e.g. ``FullyShardedDataParallel``).
        **wrapper_kwargs: keyword arguments for every wrapper.

    Example:
        >>> with enable_wrap(wrapper_cls=FSDP, sharding_strategy=...):   # doctest: +SKIP
        ...     model = nn.Sequential(wrap(nn.Linear(8, 8)), nn.ReLU())
    """
    _WRAP_CONTEXT.append((wrapper_cls, dict(wrapper_kwargs)))
    try:
        yield
    finally:
        _WRAP_CONTEXT.pop()


def wrap(module, **wrap_overrides):
    """Wrap ``module`` with the wrapper of the innermost :func:`enable_wrap` (its kwargs updated
    by ``wrap_overrides``); outside any ``enable_wrap`` return ``module`` unchanged.

    Args:
        module: the module to wrap.
        **wrap_overrides: keyword arguments that override the context's.
    """
    if not _WRAP_CONTEXT:
        return module
    cls, kwargs = _WRAP_CONTEXT[-1]
    return cls(module, **{**kwargs, **wrap_overrides})


def _as_policy(policy):
    """A callable policy from a function, ``functools.partial`` or a policy object."""
    if policy is None or callable(policy):
        return policy
    raise TypeError(f"auto_wrap_policy must be a callable policy (size_based_auto_wrap_policy, "
                    f"ModuleWrapPolicy(...), functools.partial(...)), got {policy!r}")



