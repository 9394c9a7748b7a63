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

import itertools
from collections import OrderedDict, namedtuple

import numpy as np

from ... import _dtype, _interop, _xp
from ..._device import as_device, device
from ...autograd import grad_mode
from ...tensor import Tensor
from ..parameter import Buffer, Parameter


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns: the keys it could not fill and the keys it did not use."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class RemovableHandle:
    """Returned by ``register_*_hook``: ``remove()`` unregisters; usable as a context manager.

    Args:
        *dicts: the hook dicts (keyed by handle id) the hook is removed from.
    """

    _ids = itertools.count()

    def __init__(self, *dicts):
        self.id = next(RemovableHandle._ids)
        self._dicts = dicts

    def remove(self):
        """Unregister the hook (a second call does nothing)."""
        for d in self._dicts:
            d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _addindent(text, spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class Module:
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
                self._backward_pre_hooks):
            return self.forward(*args, **kwargs)  # the common case: no hook bookkeeping at all
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        if (self._backward_hooks or self._backward_pre_hooks) and grad_mode.is_grad_enabled():
            return _BackwardHookCall(self).run(args, kwargs)
        return self._call_forward_hooks(args, kwargs)

    def _call_forward_hooks(self, args, kwargs):
        for hid, hook in list(self._forward_pre_hooks.items()):
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
            for hid, hook in list(self._forward_hooks.items()):
                if hid in self._forward_hooks_always_called:
                    try:
                        (hook(self, args, kwargs, None) if hid in self._forward_hooks_with_kwargs
                         else hook(self, args, None))
                    except Exception:
                        pass  # the forward's own error is the one to report
            raise
        for hid, hook in list(self._forward_hooks.items()):
            res = (hook(self, args, kwargs, out) if hid in self._forward_hooks_with_kwargs
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

    # ***** device and dtype *****
    def _apply(self, convert):
        """Replace every parameter's and buffer's array by ``convert(array)`` in place.

        Parameters keep their identity (``p._data`` is swapped), so an optimizer built before
        ``model.to(...)`` still updates the model, as in PyTorch.
        """
        for m in self.modules():
            for p in m._parameters.values():
                if p is None:
                    continue
                new = convert(p._data)
                if new is not p._data:
                    p._data = new
                    p._version[0] += 1
                if p.grad is not None:
                    g = convert(p.grad._data)
                    if g is not p.grad._data:
                        p.grad._data = g
            for name, b in m._buffers.items():
                if b is not None:
                    new = convert(b._data)
                    if new is not b._data:
                        b._data = new
                        b._version[0] += 1
        return self

    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``: in place.

        A dtype applies to floating point parameters and buffers only (BatchNorm's integer
        ``num_batches_tracked`` stays int64), as in PyTorch.

        Args:
            *args: a device, a dtype, both, or a tensor whose device and dtype are used.
            **kwargs: ``device=``, ``dtype=``, ``non_blocking=`` (ignored); ``memory_format=``
                only as contiguous.

        Returns:
            Module: self (the module is changed in place).

        Raises:
            TypeError: a non-floating dtype, or an unknown keyword argument.
        """
        dev, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        if kwargs.pop("memory_format", None) not in (None, "contiguous_format"):
            raise NotImplementedError("Module.to(memory_format=...): only contiguous (NCHW) "
                                      "tensors exist in TensorBrain")
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dev, dtype = a.device, a.dtype
            elif isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda") or \
                    isinstance(a, device) or isinstance(a, int) and not isinstance(a, bool):
                dev = a
            else:
                dtype = a
        if dtype is not None:
            dtype = _dtype.as_dtype(dtype)
            if not _dtype.is_float_or_complex(dtype):
                raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, "
                                f"but got desired dtype={dtype}")
        dev = as_device(dev) if dev is not None else None
        return self._apply(lambda a: _convert(a, dev, dtype))

    def cuda(self, device=None):
        """Move every parameter and buffer to a CUDA device, in place.

        Args:
            device: a device index, ``"cuda:N"`` or :class:`device`; None for the current device.

        Returns:
            Module: self.
        """
        return self.to(as_device("cuda" if device is None else
                                 (f"cuda:{device}" if isinstance(device, int) else device)))

    def cpu(self):
        """Move every parameter and buffer to host memory, in place; returns self."""
        return self.to("cpu")

    def half(self):
        """Cast floating parameters and buffers to float16, in place; returns self."""
        return self.to(_dtype.float16)

    def bfloat16(self):
        """Cast floating parameters and buffers to bfloat16 (``torch.nn.Module.bfloat16``)."""
        return self.to(_dtype.bfloat16)

    def float(self):
        """Cast floating parameters and buffers to float32, in place; returns self."""
        return self.to(_dtype.float32)

    def double(self):
        """Cast floating parameters and buffers to float64, in place; returns self."""
        return self.to(_dtype.float64)

    def type(self, dst_type):
        """Cast floating parameters and buffers to ``dst_type``, in place.

        Args:
            dst_type: a floating dtype.

        Returns:
            Module: self.
        """
        return self.to(dst_type)

    def share_memory(self):
        """Move every parameter, gradient and buffer into shared memory (``Tensor.share_memory_``),
        so child processes of ``tensorbrain.multiprocessing`` train the same weights (hogwild)."""
        for t in [*self.parameters(), *(p.grad for p in self.parameters() if p.grad is not None),
                  *self.buffers()]:
            t.share_memory_()
        return self

    # ***** state dict *****
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An ordered dict ``{dotted name: tensor}`` of parameters and persistent buffers.

        The tensors share memory with the module (detached), as in PyTorch; copy them (or save
        them) before training further if you need a snapshot.

        Args:
            *args: torch's deprecated positional ``destination, prefix, keep_vars``.
            destination: a dict to fill; None for a new ordered dict.
            prefix: prepended to every key.
            keep_vars: keep the parameters themselves (not detached tensors).

        Returns:
            dict: the state dict.
        """
        if args:  # torch's deprecated positional form state_dict(destination, prefix, keep_vars)
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, mod in self._modules.items():
            if mod is not None:
                mod.state_dict(destination=destination, prefix=prefix + name + ".",
                               keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            hook(self, destination, prefix, {})
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Copy this module's own entries from ``state_dict``; subclasses may override to
        translate old key names (PyTorch's hook of the same name)."""
        local = [(n, p) for n, p in self._parameters.items() if p is not None]
        local += [(n, b) for n, b in self._buffers.items()
                  if b is not None and n not in self._non_persistent_buffers_set]
        for name, target in local:
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            try:  # Tensors, NumPy/CuPy arrays, torch tensors, numbers (tensorbrain/_interop.py)
                arr = _interop.to_array(state_dict[key], f"state_dict[{key!r}]")
            except TypeError as exc:
                error_msgs.append(str(exc))
                continue
            if tuple(arr.shape) != tuple(target._data.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{tuple(arr.shape)} from checkpoint, the shape in current "
                                  f"model is {tuple(target._data.shape)}.")
                continue
            try:
                target._data[...] = _convert(arr, target.device, target._data.dtype)
            except Exception as exc:
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions '
                                  f'in the model are {tuple(target._data.shape)} and whose '
                                  f'dimensions in the checkpoint are {tuple(arr.shape)}, an '
                                  f'exception occurred : {exc}.')
                continue
            target._version[0] += 1
        if strict:
            own = {n for n, _ in local} | set(self._modules)
            for key in state_dict:
                if key.startswith(prefix):
                    first = key[len(prefix):].split(".", 1)[0]
                    if first not in own:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy values from ``state_dict`` into this module's parameters and buffers in place.

        Values may be Tensors, NumPy arrays (e.g. from ``safetensors.numpy.load_file``) or torch
        tensors (``torch_model.state_dict()``; bfloat16 values load as float32). Another type is
        reported as an error naming the key.
        With ``strict=True`` missing or unexpected keys raise; with ``strict=False`` they are
        returned as ``(missing_keys, unexpected_keys)``. Shape mismatches always raise.

        Args:
            state_dict: a mapping from dotted names to values.
            strict: raise on missing or unexpected keys.
            assign: accepted for torch compatibility.

        Returns:
            tuple: ``(missing_keys, unexpected_keys)``.

        Raises:
            TypeError: ``state_dict`` is not a mapping, or a value has an unsupported type.
            RuntimeError: a shape mismatch, or missing/unexpected keys with ``strict=True``.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []

        def load(module, prefix):
            module._load_from_state_dict(state_dict, prefix, {}, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        load(self, "")
        result = _IncompatibleKeys(missing, unexpected)
        for m in self.modules():
            for hook in m._load_state_dict_post_hooks.values():
                hook(m, result)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return result

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


class _BackwardHookCall:
    """One forward call with backward hooks: identity nodes on the input and the output catch
    ``grad_input`` and ``grad_output`` (PyTorch's BackwardHook, for one input and one output)."""

    def __init__(self, module):
        self.module = module
        self.grad_output = None
        self.input_index = None

    def run(self, args, kwargs):
        from ..._ops.core import make
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


def _convert(array, dev, dtype):
    """``array`` on device ``dev`` with dtype ``dtype`` (float arrays only for dtype); may be
    the same object when nothing changes."""
    out = array
    if dtype is not None and out.dtype != dtype and _dtype.is_float_or_complex(out.dtype):
        out = out.astype(dtype)
    if dev is not None:
        if dev.type == "cpu":
            if _xp.is_cupy_array(out):
                out = _xp.to_numpy(out)
            elif not isinstance(out, np.ndarray):
                out = np.asarray(out)
        else:
            cp = _xp.cupy()
            idx = dev.index if dev.index is not None else cp.cuda.runtime.getDevice()
            if not (_xp.is_cupy_array(out) and out.device.id == idx):
                with cp.cuda.Device(idx):
                    out = cp.asarray(out)
    return out

