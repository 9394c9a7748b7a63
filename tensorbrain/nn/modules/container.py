"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``, ``ParameterDict``.

Children are registered under their index or key, which gives PyTorch's state dict names
(``0.weight``, ``layers.3.bias``).
"""
from __future__ import annotations

import operator
from collections import OrderedDict

from ..parameter import Parameter
from .module import Module


class Sequential(Module):
    """Runs its children in order, feeding each one's output to the next.

    >>> import tensorbrain as tb
    >>> net = tb.nn.Sequential(tb.nn.Linear(4, 8), tb.nn.ReLU(), tb.nn.Linear(8, 2))
    >>> net(tb.ones(3, 4)).shape, list(net.state_dict())[:2]
    (tb.Size([3, 2]), ['0.weight', '0.bias'])
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (dict, OrderedDict)):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input

    def _index(self, idx):
        n = len(self._modules)
        idx = operator.index(idx)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for a Sequential of length {n}")
        return idx % n

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[self._index(idx)]

    def __setitem__(self, idx, module):
        key = list(self._modules.keys())[self._index(idx)]
        self.add_module(key, module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                del self._modules[key]
        else:
            del self._modules[list(self._modules.keys())[self._index(idx)]]
        # renumber so the keys stay 0..n-1, as PyTorch does
        self.__dict__["_modules"] = {str(i): m for i, m in enumerate(self._modules.values())}

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        """Add ``module`` at the end.

        Args:
            module: the module.

        Returns:
            self.
        """
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        """Add every module of ``modules`` at the end, in order.

        Args:
            modules: an iterable of modules.

        Returns:
            self.
        """
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        """Insert ``module`` before position ``index``.

        Args:
            index: the position (negative counts from the end).
            module: the module.
        """
        mods = list(self._modules.values())
        mods.insert(index if index >= 0 else index + len(mods) + 1, module)
        self.__dict__["_modules"] = {}
        for i, m in enumerate(mods):
            self.add_module(str(i), m)
        return self


class ModuleList(Module):
    """A list of modules, registered so their parameters are seen (``layers.0.weight``)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _index(self, idx):
        n = len(self._modules)
        idx = operator.index(idx)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for a ModuleList of length {n}")
        return str(idx % n)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[self._index(idx)]

    def __setitem__(self, idx, module):
        self.add_module(self._index(idx), module)

    def __delitem__(self, idx):
        mods = list(self._modules.values())
        del mods[idx]
        self.__dict__["_modules"] = {str(i): m for i, m in enumerate(mods)}

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def append(self, module):
        """Add ``module`` at the end.

        Args:
            module: the module.

        Returns:
            self.
        """
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        """Add every module of ``modules`` at the end, in order.

        Args:
            modules: an iterable of modules.

        Returns:
            self.
        """
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        """Insert ``module`` before position ``index``.

        Args:
            index: the position (negative counts from the end).
            module: the module.
        """
        mods = list(self._modules.values())
        mods.insert(index, module)
        self.__dict__["_modules"] = {}
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward; iterate over it in your module's "
                                  "forward instead")


class _RegistryDict:
    """The mapping protocol over one of Module's registries, the one named by ``_registry``:
    ModuleDict and ParameterDict differ only in that registry and in how ``__setitem__``
    registers a value."""
    _registry: str

    def _store(self) -> dict:
        return self.__dict__[self._registry]

    def __getitem__(self, key):
        return self._store()[key]

    def __delitem__(self, key):
        del self._store()[key]

    def __len__(self):
        return len(self._store())

    def __iter__(self):
        return iter(self._store())

    def __contains__(self, key):
        return key in self._store()

    def keys(self):
        return self._store().keys()

    def items(self):
        return self._store().items()

    def values(self):
        return self._store().values()


class ModuleDict(_RegistryDict, Module):
    """A dict of modules (insertion ordered), registered under their keys."""
    _registry = "_modules"

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def pop(self, key):
        """Remove the module under ``key`` and return it.

        Args:
            key: the name.

        Returns:
            The removed module.

        Raises:
            KeyError: no module under ``key``.
        """
        return self._modules.pop(key)

    def clear(self):
        """Remove every module."""
        self._modules.clear()

    def update(self, modules):
        """Add or replace modules from a mapping or an iterable of (name, module) pairs.

        Args:
            modules: a mapping or an iterable of pairs.
        """
        items = modules.items() if hasattr(modules, "items") else modules
        for key, module in items:
            self[key] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward; index it in your module's forward")


class ParameterList(Module):
    """A list of parameters registered as ``0``, ``1``, ..."""

    def __init__(self, values=None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def __getitem__(self, idx):
        n = len(self._parameters)
        return self._parameters[str(operator.index(idx) % n)] if n else [][idx]

    def __setitem__(self, idx, value):
        self.register_parameter(str(operator.index(idx) % len(self)), _as_param(value))

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def append(self, value):
        """Add a parameter at the end (a plain tensor is wrapped in ``Parameter``).

        Args:
            value: the parameter or tensor.

        Returns:
            self.
        """
        self.register_parameter(str(len(self)), _as_param(value))
        return self

    def extend(self, values):
        """Add every parameter of ``values`` at the end, in order.

        Args:
            values: an iterable of parameters or tensors.

        Returns:
            self.
        """
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return _parameters_repr(self)


class ParameterDict(_RegistryDict, Module):
    """A dict of parameters registered under their keys."""
    _registry = "_parameters"

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key, value):
        self.register_parameter(key, _as_param(value))

    def update(self, parameters):
        """Add or replace parameters from a mapping or an iterable of (name, parameter) pairs.

        Args:
            parameters: a mapping or an iterable of pairs.
        """
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for k, v in items:
            self[k] = v

    def extra_repr(self):
        return _parameters_repr(self)


def _parameters_repr(module) -> str:
    return "\n".join(f"({k}): Parameter containing: [{p.dtype} of size {tuple(p.shape)}]"
                     for k, p in module._parameters.items())


def _as_param(value):
    return value if isinstance(value, Parameter) else Parameter(value)


__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]
