"""``tb.nn.Module``: the base class of every layer and model, as ``torch.nn.Module``.

A module keeps three ordered registries, filled by plain attribute assignment:
``_parameters`` (``Parameter``), ``_buffers`` (tensors saved with the model but not trained, e.g.
BatchNorm's running statistics) and ``_modules`` (child modules). ``state_dict`` walks them with
PyTorch's dotted key names (``layer1.0.conv1.weight``), so a TensorBrain state dict saved with
safetensors loads into the same torch model and back.

>>> import tensorbrain as tb
>>> class Net(tb.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc = tb.nn.Linear(4, 2)
...     def forward(self, x):
...         return self.fc(x).relu()
>>> net = Net()
>>> list(net.state_dict())
['fc.weight', 'fc.bias']
>>> net(tb.ones(3, 4)).shape
tb.Size([3, 2])
"""
from __future__ import annotations

from collections import OrderedDict

from ...tensor import Tensor
from ..parameter import Buffer, Parameter
from ._module_convert import _ModuleConversion
from ._module_hooks import RemovableHandle, _ModuleHooks  # noqa: F401  (RemovableHandle: re-exported)
from ._module_hooks import (_global_forward_hooks, _global_forward_pre_hooks,  # noqa: F401
                            register_module_forward_hook, register_module_forward_pre_hook)
from ._module_state import _IncompatibleKeys, _ModuleStateDict  # noqa: F401  (re-exported)


def _addindent(text, spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class Module(_ModuleHooks, _ModuleStateDict, _ModuleConversion):
    """Base class for all neural network modules; subclasses define ``forward``.

    Args:
        *args: no positional arguments are taken (an error names them otherwise).
        **kwargs: no keyword arguments are taken either.

    Example:
        >>> import tensorbrain as tb
        >>> class Net(tb.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.fc = tb.nn.Linear(4, 2)
        ...     def forward(self, x):
        ...         return self.fc(x).relu()
        >>> Net()(tb.randn(3, 4)).shape
        tb.Size([3, 2])
    """

    training: bool
    _version = 1  # state dict format version (PyTorch records one per module; kept for parity)

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments; did a "
                            f"subclass forget to consume them before calling super().__init__()?")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = set()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = set()
        d["_forward_hooks_always_called"] = set()
        d["_backward_pre_hooks"] = OrderedDict()
        d["_backward_hooks"] = OrderedDict()
        d["_state_dict_hooks"] = OrderedDict()
        d["_load_state_dict_post_hooks"] = OrderedDict()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  f'"forward" function')

    # ***** calling *****
    def __call__(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or
                self._backward_pre_hooks or _global_forward_hooks or _global_forward_pre_hooks):
            return self.forward(*args, **kwargs)  # the common case: no hook bookkeeping at all
        return self._call_with_hooks(args, kwargs)

    # ***** registration *****
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a None placeholder, e.g. ``bias=False``) under ``name``.

        Args:
            name: the attribute name (no dots).
            param: a :class:`Parameter`, or None.

        Raises:
            KeyError: the name is taken by another attribute, empty or dotted.
            TypeError: ``param`` is not a Parameter.
        """
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            f"(tb.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: saved in ``state_dict`` when ``persistent``, moved by ``to``, not trained.

        Args:
            name: the attribute name (no dots).
            tensor: a tensor, or None.
            persistent: include it in ``state_dict``.

        Raises:
            KeyError: the name is taken by another attribute, empty or dotted.
            TypeError: ``tensor`` is not a Tensor.
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            f"(tb.Tensor or None required)")
        if isinstance(tensor, (Buffer, Parameter)):
            plain = Tensor._wrap(tensor._data)
            plain._version = tensor._version
            tensor = plain
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under ``name`` (``self.name = module`` does the same).

        Args:
            name: the attribute name (no dots).
            module: a Module, or None.

        Raises:
            KeyError: the name is taken by another attribute, empty or dotted.
            TypeError: ``module`` is not a Module.
        """
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    @staticmethod
    def _check_name(name, what):
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string, got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{what} name can\'t contain ".", got {name!r}')
        if name == "":
            raise KeyError(f'{what} name can\'t be empty string ""')

    def get_submodule(self, target: str) -> Module:
        """The module at dotted path ``target`` (``"layer1.0.conv1"``); ``""`` is self.

        Args:
            target: the dotted path.

        Raises:
            AttributeError: no submodule has that path; the message names the missing part.
        """
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if item not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no submodule `{item}` "
                                     f"(looking up {target!r})")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target`` (``"layer1.0.weight"``).

        Args:
            target: the dotted path.

        Raises:
            AttributeError: no parameter or submodule has that path.
        """
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target`` (``"bn.running_mean"``).

        Args:
            target: the dotted path.

        Raises:
            AttributeError: no buffer or submodule has that path.
        """
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer `{name}`")
        return mod._buffers[name]

    # ***** attribute protocol *****
    def __getattr__(self, name):
        # Only called when normal lookup fails: parameters, buffers and children live in dicts.
        d = self.__dict__
        if "_parameters" in d:
            if name in d["_parameters"]:
                return d["_parameters"][name]
            if name in d["_buffers"]:
                return d["_buffers"][name]
            if name in d["_modules"]:
                return d["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, d, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                f"(tb.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, d, keep="_modules")
            d["_modules"][name] = value
        elif params is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                f"(tb.nn.Module or None expected)")
            d["_modules"][name] = None
        elif isinstance(value, Buffer):
            if params is None:
                raise AttributeError("cannot assign buffers before Module.__init__() call")
            self._remove_from(name, d, keep="_buffers")
            self.register_buffer(name, value, value.persistent)
        elif params is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                f"(tb.Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def _remove_from(self, name, d, keep):
        d.pop(name, None)
        for reg in ("_parameters", "_buffers", "_modules"):
            if reg != keep:
                d[reg].pop(name, None)
        if keep != "_buffers":
            d["_non_persistent_buffers_set"].discard(name)

    def __delattr__(self, name):
        for reg in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(reg, ()):
                del self.__dict__[reg][name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = set(super().__dir__())
        for reg in ("_parameters", "_buffers", "_modules"):
            keys.update(self.__dict__.get(reg, ()))
        return sorted(keys)

    # ***** traversal *****
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """``(dotted name, module)`` for this module and every descendant, depth first.

        Args:
            memo: modules already listed (used by the recursion).
            prefix: prepended to every name.
            remove_duplicate: list a module reached twice only once.
        """
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, mod in self._modules.items():
            if mod is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from mod.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        """This module and every descendant, depth first (each once)."""
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        """``(name, module)`` for the direct children (each once)."""
        seen = set()
        for name, mod in self._modules.items():
            if mod is not None and id(mod) not in seen:
                seen.add(id(mod))
                yield name, mod

    def children(self):
        """The direct children (each once)."""
        for _, m in self.named_children():
            yield m

    def _named_members(self, registry, prefix, recurse, remove_duplicate):
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        seen = set()
        for mod_prefix, mod in mods:
            for name, value in getattr(mod, registry).items():
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """``(dotted name, Parameter)`` pairs; a shared parameter is listed once.

        Args:
            prefix: prepended to every name.
            recurse: include the parameters of descendants.
            remove_duplicate: list a shared parameter once.
        """
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        """The parameters of this module (and its descendants), each once.

        Args:
            recurse: include the parameters of descendants.

        Example:
            >>> import tensorbrain as tb
            >>> sum(p.numel() for p in tb.nn.Linear(4, 2).parameters())
            10
        """
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """``(dotted name, buffer)`` pairs; a shared buffer is listed once.

        Args:
            prefix: prepended to every name.
            recurse: include the buffers of descendants.
            remove_duplicate: list a shared buffer once.
        """
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        """The buffers of this module (and its descendants), each once.

        Args:
            recurse: include the buffers of descendants.
        """
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ***** modes and gradients *****
    def train(self, mode: bool = True):
        """Set training mode (Dropout drops, BatchNorm uses batch statistics) recursively.

        Args:
            mode: True for training, False for evaluation.

        Returns:
            Module: self (the module is changed in place).

        Raises:
            ValueError: ``mode`` is not a bool.
        """
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self):
        """Set evaluation mode recursively (``train(False)``); returns self."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        """Set ``requires_grad`` on every parameter (e.g. False to freeze the module).

        Args:
            requires_grad: the new flag.

        Returns:
            Module: self.
        """
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset parameter gradients: drop them (default, as in PyTorch 2) or fill with zeros.

        Args:
            set_to_none: set ``.grad`` to None instead of filling it with zeros.
        """
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.grad_fn = None
                p.grad.requires_grad = False
                p.grad._data.fill(0)

    def apply(self, fn):
        """Call ``fn(module)`` on every child (recursively) and then on self, e.g. to initialise.

        Args:
            fn: a callable taking a module.

        Returns:
            Module: self (the module is changed in place).
        """
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ***** printing *****
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr`` (override in subclasses)."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, mod in self._modules.items():
            lines.append(f"({name}): " + _addindent(repr(mod), 2))
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"
