"""The Optimizer base: param groups, per-parameter state, state_dict in PyTorch's layout.

Updates run on ``p._data`` in place with one preallocated scratch buffer (``_scratch``), so a
step allocates nothing after the first one (the arrays may be views into DDP buckets or shared memory).

``optimizer.state`` is a ``defaultdict(dict)`` keyed by parameter, as torch's, so code that fills
``self.state[p]`` itself (the A3C ``SharedAdam`` idiom) works. The built-in optimizers keep their
state as raw NumPy/CuPy arrays (a Tensor wrapper per entry would cost each step a dict rebuild);
Tensors a program puts there itself (``state["exp_avg"] = torch.zeros_like(p)``, then
``.share_memory_()``) are used in place: the next ``step()`` swaps each for its array, which
*is* the Tensor's storage, so the updates land in that memory (shared with other processes when
it was shared). Reading an entry back gives that array (``optimizer.state[p]["exp_avg"]`` is a
NumPy array, not a Tensor: the one difference from torch; ``state_dict()`` gives Tensors).
"""
from __future__ import annotations

import collections
import typing

import numpy as np

from .. import _dtype, _xp
from ..tensor import Tensor


#: torch's type of an optimizer's ``params`` argument: tensors, or parameter-group dicts.
ParamsT = typing.Union[typing.Iterable[Tensor], typing.Iterable[dict],  # noqa: UP007
                       typing.Iterable[tuple]]


class _Required:
    def __repr__(self):
        return "<required parameter>"


required = _Required()


class _ParamState(dict):
    """One parameter's state: a dict that notes when a program stores a Tensor in it."""

    _has_tensors = False

    def __setitem__(self, key, value):
        if isinstance(value, Tensor):
            self._has_tensors = True
        dict.__setitem__(self, key, value)

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return dict.__getitem__(self, key)

    def update(self, *args, **kwargs):
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def unwrap(self) -> None:
        """Replace the Tensors stored by the program with their arrays (their storage)."""
        for k, v in list(self.items()):
            if isinstance(v, Tensor):
                dict.__setitem__(self, k, v._data)
        self._has_tensors = False


def _state_dict_type():
    return collections.defaultdict(_ParamState)


def step_count(step) -> float:
    """A state's ``"step"`` as a float: a number, or a one-element array or Tensor (a shared
    step counter that a program put there, such as ``torch.zeros(1)``)."""
    if isinstance(step, (int, float)):
        return float(step)
    return float(_xp.to_numpy(getattr(step, "_data", step)).reshape(-1)[0])


class Optimizer:
    """Base class. Subclasses implement ``_update(p, grad, state, group)`` on raw arrays."""

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self.state: collections.defaultdict = _state_dict_type()
        self.param_groups: list[dict] = []
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        for group in params:
            self.add_param_group(group)

    def _scratch(self, p):
        """A scratch array shaped like ``p``, valid until the next call (use it within one update).

        One buffer per (dtype, device), grown to the largest parameter, serves every parameter in
        turn: the optimizer holds one parameter's worth of scratch, not one per parameter (that
        was 20% of Adam's memory, and FSDP's sharded step held it next to each shard).
        """
        pool = self.__dict__.setdefault("_scratch_pool", {})
        key = (p.dtype, getattr(getattr(p, "device", None), "id", None))   # CuPy: one per GPU
        buf = pool.get(key)
        if buf is None or buf.size < p.size:
            buf = pool[key] = _xp.get_array_module(p).empty(p.size, p.dtype)
        return buf[:p.size].reshape(p.shape)

    def add_param_group(self, param_group: dict) -> None:
        """Add a parameter group (e.g. a layer unfrozen later), with its own options.

        Args:
            param_group: a dict with ``"params"`` (a tensor or an iterable of tensors) and any
                options; missing options take the optimizer's defaults.

        Raises:
            TypeError: a parameter is not a Tensor.
            ValueError: a non-leaf tensor, a parameter already in another group, or a required
                option (such as ``lr``) missing.
        """
        group = dict(param_group)
        ps = group["params"]
        group["params"] = [ps] if isinstance(ps, Tensor) else list(ps)
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient.

        Args:
            set_to_none: set ``.grad`` to None (default, as torch) instead of filling it with zeros.
        """
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad._data.fill(0)

    def step(self, closure=None):
        """One update of every parameter that has a gradient."""
        loss = None
        if closure is not None:
            from ..autograd import enable_grad
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad._data
                if g.shape != p._data.shape:
                    raise RuntimeError(f"gradient of shape {tuple(g.shape)} does not match its "
                                       f"parameter of shape {tuple(p._data.shape)}")
                state = self.state[p]
                if state._has_tensors:
                    state.unwrap()
                self._update(p._data, g, state, group)
                p._version[0] += 1
        return loss

    def _update(self, p, g, state, group):  # pragma: no cover - abstract
        raise NotImplementedError

    # ***** state dict (PyTorch layout: params replaced by their index) *****
    def state_dict(self) -> dict:
        """The optimizer's state in PyTorch's layout (parameters replaced by their index).

        Returns:
            ``{"state": {index: {name: value}}, "param_groups": [options with "params": [indices]]}``.
        """
        index: dict = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            ids = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index[id(p)]] = {k: (Tensor._wrap(v) if hasattr(v, "shape") else v)
                                           for k, v in self.state[p].items() if not k.startswith("_")}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a state from ``state_dict()`` (this optimizer's or a torch one's layout).

        Args:
            state_dict: the dict to load; its groups must match this optimizer's in number and size.

        Raises:
            ValueError: a different number of groups or of parameters in a group.
        """
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(groups)} parameter groups, this "
                             f"optimizer has {len(self.param_groups)}")
        id_map = {}
        for mine, saved in zip(self.param_groups, groups):
            if len(mine["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match "
                                 f"the size of optimizer's group ({len(saved['params'])} vs "
                                 f"{len(mine['params'])} parameters)")
            for idx, p in zip(saved["params"], mine["params"]):
                id_map[int(idx)] = p
        self.state = _state_dict_type()
        for key, st in state_dict["state"].items():
            p = id_map[int(key)]
            new = {}
            for k, v in st.items():
                if isinstance(v, Tensor) or isinstance(v, np.ndarray) or _xp.is_cupy_array(v):
                    arr = v._data if isinstance(v, Tensor) else v
                    xp = _xp.get_array_module(p._data)
                    arr = xp.asarray(_xp.to_numpy(arr) if xp is np else arr)
                    if _dtype.is_floating_point(arr.dtype) and arr.shape == p._data.shape:
                        arr = arr.astype(p._data.dtype, copy=False)
                    new[k] = arr.copy()
                else:
                    new[k] = v
            self.state[p].update(new)
        for mine, saved in zip(self.param_groups, groups):
            for k, v in saved.items():
                if k != "params":
                    mine[k] = tuple(v) if k == "betas" and isinstance(v, list) else v

    def __repr__(self):
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        lines.append(")")
        return "\n".join(lines)
