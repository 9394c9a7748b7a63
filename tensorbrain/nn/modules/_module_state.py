"""``state_dict`` and ``load_state_dict``: a Module's parameters and buffers by dotted name.

``_ModuleStateDict`` is a part of :class:`~tensorbrain.nn.Module` (its only user), kept apart
because saving and loading are their own job. The keys are PyTorch's (``layer1.0.conv1.weight``),
so a TensorBrain state dict loads into the same torch model and back.
"""
from __future__ import annotations

from collections import OrderedDict, namedtuple
from typing import TYPE_CHECKING, Any
from collections.abc import Iterator

from ... import _interop
from ._module_convert import _convert


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns: the keys it could not fill and the keys it did not use."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class _ModuleStateDict:
    """The state-dict half of :class:`~tensorbrain.nn.Module`."""

    if TYPE_CHECKING:   # Module's, for type checkers
        def modules(self) -> Iterator[Any]: ...

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
        # a shallow copy, as torch makes: modules may rename keys while loading (an activation
        # checkpoint wrapper does), never in the caller's dict
        state_dict = OrderedDict(state_dict)
        missing: list[str] = []
        unexpected: list[str] = []
        errors: list[str] = []

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
