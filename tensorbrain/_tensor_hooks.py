"""``HookMethods``: the autograd hooks of a tensor (``register_hook``,
``register_post_accumulate_grad_hook``, ``retain_grad``), a base class of
``tensorbrain.tensor.Tensor``. The engine (``autograd/engine.py``) runs them.
"""
from __future__ import annotations


class HookMethods:
    """Hooks on a tensor's gradient.

    Requires (``TensorBase``): ``requires_grad``, ``grad``, ``grad_fn`` (its ``pre_hooks``),
    ``_hooks``, ``_post_acc_hooks``, ``_wrap``.
    """

    __slots__ = ()

    def register_hook(self, hook):
        """Register ``hook(grad) -> Tensor | None``, run when this tensor's gradient is
        computed; a returned tensor replaces the gradient.

        Args:
            hook: the callable.

        Returns:
            A handle whose ``remove()`` unregisters the hook.

        Raises:
            RuntimeError: the tensor does not require grad.
        """
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is None:
            if self._hooks is None:
                self._hooks = []
            return _Handle(self._hooks, hook)
        node = self.grad_fn
        if node.pre_hooks is None:
            node.pre_hooks = []

        def array_hook(g, hook=hook):
            new = hook(self._wrap(g))
            return g if new is None else new._data
        return _Handle(node.pre_hooks, array_hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Register ``hook(tensor)``, run right after a leaf's ``.grad`` has been written in backward.

        Args:
            hook: the callable; it receives this tensor.

        Returns:
            A handle whose ``remove()`` unregisters the hook.

        Raises:
            RuntimeError: the tensor is not a leaf.
        """
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._post_acc_hooks is None:
            self._post_acc_hooks = []
        return _Handle(self._post_acc_hooks, hook)

    def retain_grad(self):
        """Keep ``.grad`` for this non-leaf tensor in backward (a no-op on leaves)."""
        if self.grad_fn is None:
            return
        me = self

        def keep(g):
            me.grad = self._wrap(g.copy()) if me.grad is None else self._wrap(me.grad._data + g)
            return g
        if self.grad_fn.pre_hooks is None:
            self.grad_fn.pre_hooks = []
        self.grad_fn.pre_hooks.append(keep)


class _Handle:
    """Returned by hook registrations; ``remove()`` unregisters the hook."""

    def __init__(self, hooks, hook):
        self._hooks, self._hook = hooks, hook
        hooks.append(hook)

    def remove(self):
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)
