"""``tb.nn.utils.parametrize`` (``torch.nn.utils.parametrize``): a parameter computed from
others on every access, as torch's.

``register_parametrization(module, "weight", P())`` moves ``weight`` to
``module.parametrizations.weight.original`` and makes ``module.weight`` return
``P()(original)`` (chained, for several), exactly as torch does: the module's class is swapped
for a subclass with a property ``weight``, so ``state_dict`` keys read
``parametrizations.weight.original``. A parametrization with ``right_inverse`` lets
``module.weight = value`` set ``original``; one whose ``right_inverse`` returns several tensors
gets ``original0``, ``original1``, ... ``with cached():`` computes each parametrized tensor once
for the block.

>>> import tensorbrain as tb
>>> class Symmetric(tb.nn.Module):
...     def forward(self, x):
...         return x.triu() + x.triu(1).mT
>>> m = tb.nn.Linear(3, 3)
>>> _ = tb.nn.utils.parametrize.register_parametrization(m, "weight", Symmetric())
>>> bool((m.weight == m.weight.T).all()), sorted(m.state_dict())[1]
(True, 'parametrizations.weight.original')
"""
from __future__ import annotations

import contextlib

from ...autograd import grad_mode
from ...tensor import Tensor
from ..modules.container import ModuleDict, ModuleList
from ..parameter import Parameter

_cache_enabled = [0]
_cache: dict = {}


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, and the ``original`` tensor(s) they start from.

    Args:
        modules: the parametrization modules, applied in order.
        original: the tensor being parametrized.
        unsafe: skip the shape and dtype checks.
    """

    def __init__(self, modules, original, unsafe: bool = False):
        super().__init__(modules)
        self.unsafe = unsafe
        first = modules[0]
        new = original
        if hasattr(first, "right_inverse"):
            with grad_mode.no_grad():
                new = first.right_inverse(original)
        if isinstance(new, Tensor):
            self.is_tensor, self.ntensors = True, 1
            self._store("original", new, original)
        else:
            self.is_tensor, self.ntensors = False, len(new)
            for i, t in enumerate(new):
                self._store(f"original{i}", t, original)

    def _store(self, name, value, like):
        value = value.detach()
        if isinstance(like, Parameter):
            self.register_parameter(name, Parameter(value, like.requires_grad))
        else:
            self.register_buffer(name, value)

    def right_inverse(self, value) -> None:
        """Set the original tensor(s) so the chain gives ``value`` (each parametrization's
        ``right_inverse``, last first).

        Args:
            value: the new value of the parametrized tensor.

        Raises:
            RuntimeError: a parametrization has no ``right_inverse``.
        """
        with grad_mode.no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       f"implement right_inverse")
                value = module.right_inverse(value)
            if self.is_tensor:
                self.original.copy_(value)
            else:
                for i, t in enumerate(value):
                    getattr(self, f"original{i}").copy_(t)

    def forward(self):
        x = self[0](self.original) if self.is_tensor else \
            self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            x = module(x)
        return x


def _property(name):
    def get(self):
        plist = self.parametrizations[name]
        if _cache_enabled[0]:
            key = (id(self), name)
            if key not in _cache:
                _cache[key] = plist()
            return _cache[key]
        return plist()

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)
    return property(get, set_)


def register_parametrization(module, tensor_name: str, parametrization, *,
                             unsafe: bool = False):
    """Make ``module.<tensor_name>`` the output of ``parametrization`` on the original tensor,
    as ``torch.nn.utils.parametrize.register_parametrization`` (a second call chains).

    Args:
        module: the module.
        tensor_name: the parameter or buffer to parametrize.
        parametrization: an ``nn.Module`` mapping the original tensor(s) to the new one.
        unsafe: skip the check that the output keeps the shape and dtype.

    Returns:
        The module.

    Raises:
        ValueError: ``tensor_name`` is neither a parameter nor a buffer of ``module``.
        RuntimeError: the output changes shape or dtype (without ``unsafe``).
    """
    if is_parametrized(module, tensor_name):
        module.parametrizations[tensor_name].append(parametrization)
        return module
    if tensor_name in module._parameters:
        original = module._parameters[tensor_name]
    elif tensor_name in module._buffers:
        original = module._buffers[tensor_name]
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    plist = ParametrizationList([parametrization], original, unsafe)
    if not unsafe:
        with grad_mode.no_grad():
            out = plist()
        if tuple(out.shape) != tuple(original.shape) or out.dtype != original.dtype:
            raise RuntimeError(f"Registering a parametrization may not change the shape or "
                               f"dtype of the tensor ({tuple(original.shape)} {original.dtype} "
                               f"became {tuple(out.shape)} {out.dtype}); pass unsafe=True")
    delattr(module, tensor_name)
    if not is_parametrized(module):
        cls = type(module)
        module.__class__ = type(f"Parametrized{cls.__name__}", (cls,),
                                {"_tb_orig_class": cls})
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = plist
    setattr(type(module), tensor_name, _property(tensor_name))
    return module


def is_parametrized(module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` (or its ``tensor_name``) has a parametrization.

    Args:
        module: the module.
        tensor_name: a tensor's name, or None for any.
    """
    plists = module.__dict__.get("_modules", {}).get("parametrizations")
    if plists is None:
        return False
    return tensor_name is None or tensor_name in plists._modules


def remove_parametrizations(module, tensor_name: str, leave_parametrized: bool = True):
    """Remove the parametrizations of ``tensor_name``, leaving either the parametrized value
    or the original as a plain tensor, as torch's.

    Args:
        module: the module.
        tensor_name: the tensor's name.
        leave_parametrized: keep the current (parametrized) value.

    Returns:
        The module.

    Raises:
        ValueError: ``tensor_name`` is not parametrized.
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    with grad_mode.no_grad():
        value = plist() if leave_parametrized else plist.original
    was_param = plist.is_tensor and isinstance(plist.original, Parameter)
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    if was_param or not plist.is_tensor:
        module.register_parameter(tensor_name, Parameter(value.detach()))
    else:
        module.register_buffer(tensor_name, value.detach())
    if not module.parametrizations._modules:
        del module._modules["parametrizations"]
        module.__class__ = module._tb_orig_class
    return module


def type_before_parametrizations(module) -> type:
    """The module's class before any parametrization.

    Args:
        module: the module.
    """
    return getattr(type(module), "_tb_orig_class", type(module))


@contextlib.contextmanager
def cached():
    """Compute each parametrized tensor once inside the block (torch's ``cached``)."""
    _cache_enabled[0] += 1
    try:
        yield
    finally:
        _cache_enabled[0] -= 1
        if not _cache_enabled[0]:
            _cache.clear()


__all__ = ["ParametrizationList", "cached", "is_parametrized", "register_parametrization",
           "remove_parametrizations", "type_before_parametrizations"]
