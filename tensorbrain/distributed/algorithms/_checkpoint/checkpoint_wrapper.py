"""Activation-checkpointing wrappers (torch's
``torch.distributed.algorithms._checkpoint.checkpoint_wrapper``), the way FSDP programs apply
``torch.utils.checkpoint`` to every transformer block.

``checkpoint_wrapper(block)`` returns a module whose forward runs ``block`` under
:func:`tensorbrain.utils.checkpoint.checkpoint`: its activations are freed after the forward and
recomputed in backward. ``apply_activation_checkpointing(model, check_fn=...)`` replaces, in
place, every submodule for which ``check_fn`` is true with such a wrapper. As in torch, the
wrapper is invisible in names: ``state_dict()`` and ``named_parameters()`` give the keys of the
unwrapped model, ``load_state_dict`` takes them, and FSDP's state dicts strip it too.

>>> import tensorbrain as tb
>>> from tensorbrain.distributed.algorithms._checkpoint.checkpoint_wrapper import (
...     apply_activation_checkpointing, CheckpointWrapper)
>>> model = tb.nn.Sequential(tb.nn.Linear(4, 4), tb.nn.ReLU(), tb.nn.Linear(4, 2))
>>> apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, tb.nn.Linear))
>>> type(model[0]).__name__, list(model.state_dict())
('CheckpointWrapper', ['0.weight', '0.bias', '2.weight', '2.bias'])
>>> model(tb.randn(3, 4)).sum().backward(); tuple(model[0].weight.grad.shape)
(4, 4)
"""
from __future__ import annotations

import enum
import functools

from ....nn.modules.module import Module
from ....utils.checkpoint import checkpoint as _checkpoint

__all__ = ["ActivationWrapper", "CheckpointImpl", "CheckpointWrapper",
           "apply_activation_checkpointing", "checkpoint_wrapper"]

_CHECKPOINT_WRAPPED_MODULE = "_checkpoint_wrapped_module"
_CHECKPOINT_PREFIX = _CHECKPOINT_WRAPPED_MODULE + "."


class CheckpointImpl(enum.Enum):
    """torch's choice of checkpoint implementation; both take the same path here."""
    REENTRANT = enum.auto()
    NO_REENTRANT = enum.auto()


class ActivationWrapper(Module):
    """Base of the wrappers: holds the module as ``_checkpoint_wrapped_module`` and hides
    that name from state dicts and parameter names.

    Args:
        mod: the module to wrap.
    """

    def __init__(self, mod):
        super().__init__()
        self._checkpoint_wrapped_module = mod

    def forward(self, *args, **kwargs):
        """Run the wrapped module (subclasses add the checkpointing)."""
        raise NotImplementedError("ActivationWrapper is a base class: use CheckpointWrapper")

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._checkpoint_wrapped_module, name)

    def __getitem__(self, key):
        return self._checkpoint_wrapped_module.__getitem__(key)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """The wrapped module's parameters under their unwrapped names (torch strips the
        ``_checkpoint_wrapped_module.`` part too).

        Args:
            prefix: prepended to every name.
            recurse: include submodules' parameters.
            remove_duplicate: yield a shared parameter once.

        Yields:
            ``(name, parameter)`` pairs.
        """
        for name, p in super().named_parameters(prefix, recurse, remove_duplicate):
            yield name.replace(_CHECKPOINT_PREFIX, ""), p

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """The wrapped module's state dict, under the keys it has without the wrapper.

        Args:
            *args: torch's deprecated positional ``destination, prefix, keep_vars``.
            destination: a dict to fill; None for a new ordered dict.
            prefix: prepended to every key.
            keep_vars: keep the parameters themselves (not detached tensors).

        Returns:
            dict: the state dict.
        """
        out = self._checkpoint_wrapped_module.state_dict(*args, destination=destination,
                                                         prefix=prefix, keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            hook(self, out, prefix, {})
        return out

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # keys come without the wrapper's name; the loader descends into
        # "_checkpoint_wrapped_module", so add it (torch's pre-load hook does the same). The
        # mapping is load_state_dict's own copy, never the caller's.
        for key in [k for k in state_dict if k.startswith(prefix) and
                    not k.startswith(prefix + _CHECKPOINT_PREFIX)]:
            state_dict[prefix + _CHECKPOINT_PREFIX + key[len(prefix):]] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class CheckpointWrapper(ActivationWrapper):
    """Runs the wrapped module under activation checkpointing.

    Args:
        mod: the module to wrap.
        checkpoint_impl: :class:`CheckpointImpl` (both values behave the same here).
        checkpoint_fn: the checkpoint function (default :func:`tensorbrain.utils.checkpoint.
            checkpoint`).
        **checkpoint_fn_kwargs: keyword arguments for it (``preserve_rng_state``, ...).
    """

    def __init__(self, mod, checkpoint_impl=CheckpointImpl.NO_REENTRANT, checkpoint_fn=None,
                 **checkpoint_fn_kwargs):
        super().__init__(mod)
        self.checkpoint_impl = checkpoint_impl
        if checkpoint_fn is None:
            checkpoint_fn = functools.partial(
                _checkpoint, use_reentrant=checkpoint_impl == CheckpointImpl.REENTRANT,
                **checkpoint_fn_kwargs)
        elif checkpoint_fn_kwargs:
            checkpoint_fn = functools.partial(checkpoint_fn, **checkpoint_fn_kwargs)
        self.checkpoint_fn = checkpoint_fn

    def forward(self, *args, **kwargs):
        """``checkpoint_fn(wrapped_module, *args, **kwargs)``."""
        return self.checkpoint_fn(self._checkpoint_wrapped_module, *args, **kwargs)


def checkpoint_wrapper(module, checkpoint_impl=CheckpointImpl.NO_REENTRANT, checkpoint_fn=None,
                       **checkpoint_fn_kwargs):
    """Wrap ``module`` so that its forward runs under activation checkpointing.

    Args:
        module: the module to wrap.
        checkpoint_impl: :class:`CheckpointImpl` (both behave the same here).
        checkpoint_fn: a checkpoint function other than ``tb.utils.checkpoint.checkpoint``.
        **checkpoint_fn_kwargs: keyword arguments for the checkpoint function.

    Returns:
        A :class:`CheckpointWrapper`.
    """
    return CheckpointWrapper(module, checkpoint_impl, checkpoint_fn, **checkpoint_fn_kwargs)


def apply_activation_checkpointing(model, checkpoint_wrapper_fn=checkpoint_wrapper,
                                   check_fn=lambda _: True, auto_wrap_policy=None):
    """Replace, in place, each submodule of ``model`` for which ``check_fn`` (or
    ``auto_wrap_policy``) says so with ``checkpoint_wrapper_fn(submodule)``; inner modules first,
    the root never (torch's order).

    Args:
        model: the model (changed in place).
        checkpoint_wrapper_fn: builds the wrapper (default :func:`checkpoint_wrapper`; a
            ``functools.partial`` of it with options is common).
        check_fn: ``check_fn(module) -> bool``.
        auto_wrap_policy: instead of ``check_fn``, an FSDP auto-wrap policy (a
            ``ModuleWrapPolicy`` or a policy callable).

    Returns:
        None.
    """
    if auto_wrap_policy is not None:
        from ...fsdp.wrap import _as_policy
        policy = _as_policy(auto_wrap_policy)

        def check_fn(m, policy=policy):
            n = sum(p.numel() for p in m.parameters())
            return bool(policy(module=m, recurse=False, nonwrapped_numel=n))

    def visit(module):
        for name, child in list(module._modules.items()):
            if child is None or isinstance(child, ActivationWrapper):
                continue
            visit(child)
            if check_fn(child):
                setattr(module, name, checkpoint_wrapper_fn(child))
    visit(model)
