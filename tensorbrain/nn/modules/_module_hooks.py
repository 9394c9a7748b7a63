"""Module hooks: forward (pre-)hooks, full backward (pre-)hooks, state-dict hooks.

``_ModuleHooks`` is a part of :class:`~tensorbrain.nn.Module` (its only user), kept apart
because the hook machinery is its own job; ``Module.__call__`` enters it only when a hook is
registered. :class:`RemovableHandle`'s public home is ``tensorbrain.nn.modules.module``.
"""
from __future__ import annotations

import itertools

from ..._ops.core import make
from ...autograd import grad_mode
from ...tensor import Tensor


class RemovableHandle:
    """Returned by ``register_*_hook``: ``remove()`` unregisters; usable as a context manager.

    Args:
        *dicts: the hook dicts (keyed by handle id) and id sets the hook is removed from.
    """

    _ids = itertools.count()

    def __init__(self, *dicts):
        self.id = next(RemovableHandle._ids)
        self._dicts = dicts

    def remove(self):
        """Unregister the hook (a second call does nothing)."""
        for d in self._dicts:
            if isinstance(d, set):
                d.discard(self.id)
            else:
                d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


# hooks every module runs (torch.nn.modules.module.register_module_forward_(pre_)hook), before
# its own; Module.__call__ looks at these two dicts to leave its fast path.
_global_forward_pre_hooks: dict = {}
_global_forward_hooks: dict = {}
_global_forward_hooks_with_kwargs: set = set()
_global_forward_hooks_always_called: set = set()


def register_module_forward_pre_hook(hook):
    """``hook(module, args) -> None | new_args`` runs before the ``forward`` of every module
    (before the module's own pre-hooks), as torch's global hook.

    Returns:
        RemovableHandle: its ``remove()`` unregisters the hook.
    """
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook, *, with_kwargs: bool = False, always_call: bool = False):
    """``hook(module, args, output) -> None | new_output`` runs after the ``forward`` of every
    module (before the module's own forward hooks), as torch's global hook.

    Args:
        hook: the callable.
        with_kwargs: call ``hook(module, args, kwargs, output)``.
        always_call: also call it (with output None) when ``forward`` raises.

    Returns:
        RemovableHandle: its ``remove()`` unregisters the hook.
    """
    handle = RemovableHandle(_global_forward_hooks, _global_forward_hooks_with_kwargs,
                             _global_forward_hooks_always_called)
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs.add(handle.id)
    if always_call:
        _global_forward_hooks_always_called.add(handle.id)
    return handle


class _ModuleHooks:
    """The hook half of :class:`~tensorbrain.nn.Module`: registration and the calls that run
    the hooks (the registries themselves are made in ``Module.__init__``)."""

    def _call_with_hooks(self, args, kwargs):
        if (self._backward_hooks or self._backward_pre_hooks) and grad_mode.is_grad_enabled():
            return _BackwardHookCall(self).run(args, kwargs)
        return self._call_forward_hooks(args, kwargs)

    def _call_forward_hooks(self, args, kwargs):
        pre_hooks = list(self._forward_pre_hooks.items())
        hooks = list(self._forward_hooks.items())
        with_kwargs, always = self._forward_hooks_with_kwargs, self._forward_hooks_always_called
        if _global_forward_pre_hooks or _global_forward_hooks:
            pre_hooks = list(_global_forward_pre_hooks.items()) + pre_hooks
            hooks = list(_global_forward_hooks.items()) + hooks
            with_kwargs = with_kwargs | _global_forward_hooks_with_kwargs
            always = always | _global_forward_hooks_always_called
        for hid, hook in pre_hooks:
            if hid in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError(f"forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {res!r}")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        try:
            out = self.forward(*args, **kwargs)
        except BaseException:
            for hid, hook in hooks:
                if hid in always:
                    try:
                        (hook(self, args, kwargs, None) if hid in with_kwargs
                         else hook(self, args, None))
                    except Exception:
                        pass  # the forward's own error is the one to report
            raise
        for hid, hook in hooks:
            res = (hook(self, args, kwargs, out) if hid in with_kwargs
                   else hook(self, args, out))
            if res is not None:
                out = res
        return out

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args) -> None | new_args`` runs before ``forward``
        (``hook(module, args, kwargs) -> None | (args, kwargs)`` with ``with_kwargs=True``).

        Args:
            hook: the callable.
            prepend: run this hook before the ones already registered.
            with_kwargs: pass (and let the hook return) the keyword arguments too.

        Returns:
            RemovableHandle: its ``remove()`` unregisters the hook.
        """
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """``hook(module, args, output) -> None | new_output`` runs after ``forward``.

        Args:
            hook: the callable.
            prepend: run this hook before the ones already registered.
            with_kwargs: call ``hook(module, args, kwargs, output)``.
            always_call: accepted for torch compatibility.

        Returns:
            RemovableHandle: its ``remove()`` unregisters the hook.
        """
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if always_call:
            self._forward_hooks_always_called.add(handle.id)
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output) -> None | new grad_output`` runs when the gradient of
        this module's output has been computed, before it flows into the module.

        Args:
            hook: the callable.
            prepend: run this hook before the ones already registered.

        Returns:
            RemovableHandle: its ``remove()`` unregisters the hook.
        """
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output) -> None | new grad_input`` runs once the
        gradients with respect to the module's tensor inputs are computed (``grad_input`` has
        one entry per positional argument, None where no gradient flows).

        Supported for modules with one tensor output and at most one positional input that
        requires grad (every built-in layer); PyTorch's multi-input case raises a clear error.

        Args:
            hook: the callable.
            prepend: run this hook before the ones already registered.

        Returns:
            RemovableHandle: its ``remove()`` unregisters the hook.
        """
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_post_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata)`` runs after this module's entries
        are written by ``state_dict``.

        Args:
            hook: the callable.

        Returns:
            RemovableHandle: its ``remove()`` unregisters the hook.
        """
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def register_load_state_dict_post_hook(self, hook):
        """``hook(module, incompatible_keys)`` runs at the end of ``load_state_dict``; it may
        edit the missing/unexpected key lists in place.

        Args:
            hook: the callable.

        Returns:
            RemovableHandle: its ``remove()`` unregisters the hook.
        """
        handle = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle


class _BackwardHookCall:
    """One forward call with backward hooks: identity nodes on the input and the output catch
    ``grad_input`` and ``grad_output`` (PyTorch's BackwardHook, for one input and one output)."""

    def __init__(self, module):
        self.module = module
        self.grad_output = None
        self.input_index = None

    def run(self, args, kwargs):
        wanted = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if len(wanted) > 1:
            raise NotImplementedError(
                f"{type(self.module).__name__}: full backward hooks support one positional input "
                f"that requires grad, got {len(wanted)}; register hooks on the tensors instead "
                f"(tensor.register_hook)")
        self.n_args = len(args)
        if wanted:
            i = self.input_index = wanted[0]
            x = args[i]
            args = args[:i] + (make(x._data, (x,), lambda g: (self._on_input(g),),
                                    "BackwardHookFunctionBackward"),) + args[i + 1:]
        out = self.module._call_forward_hooks(args, kwargs)
        if not isinstance(out, Tensor):
            raise NotImplementedError(f"{type(self.module).__name__}: full backward hooks need "
                                      f"a single tensor output, got {type(out).__name__}")
        if not out.requires_grad:
            return out
        return make(out._data, (out,), lambda g: (self._on_output(g),),
                    "BackwardHookFunctionBackward")

    def _on_output(self, g):
        for hook in list(self.module._backward_pre_hooks.values()):
            res = hook(self.module, (Tensor._wrap(g),))
            if res is not None:
                g = (res[0] if isinstance(res, (tuple, list)) else res)._data
        self.grad_output = (Tensor._wrap(g),)
        if self.input_index is None:  # nothing flows into the inputs: call the hooks now
            self._call_hooks(None)
        return g

    def _on_input(self, g):
        return self._call_hooks(g)

    def _call_hooks(self, g):
        grad_input = [None] * self.n_args
        if g is not None:
            grad_input[self.input_index] = Tensor._wrap(g)
        for hook in list(self.module._backward_hooks.values()):
            res = hook(self.module, tuple(grad_input), self.grad_output)
            if res is not None:
                grad_input = list(res)
        if g is None:
            return None
        new = grad_input[self.input_index]
        if new is None:
            return g * 0
        if tuple(new.shape) != tuple(g.shape):
            raise RuntimeError(f"backward hook of {type(self.module).__name__} returned a "
                               f"grad_input of shape {tuple(new.shape)} for an input of shape "
                               f"{tuple(g.shape)}")
        return new._data
