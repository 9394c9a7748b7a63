"""``tb.ops`` (``torch.ops``): ``torch.ops.aten.<op>`` handles for the aten operators programs
call directly (tensor-subclass code, flop counters, ``_unsafe_view`` in FSDP-style code), mapped
by :data:`ATEN` to TensorBrain's public functions with aten's argument order. Each is an
:class:`OpOverloadPacket` (``aten.mm``) with overloads (``aten.mm.default``, ``aten.add.Tensor``,
any overload name: one implementation takes every aten overload's arguments), hashable and
identical across lookups, so ``{aten.mm: flops}`` tables work.

Every other ``tb.ops.<ns>`` is a namespace whose attributes are the operators registered in it
with ``tb.library`` (``custom_op``, ``Library.define``); an unregistered name raises
AttributeError naming it, as in torch (so ``hasattr`` checks for optional libraries' operators
fall back). An aten operator not in the table, and an unknown operator of torch's own namespaces
(:data:`TORCH_NAMESPACES`: ``higher_order``, ``symm_mem``, ``prims``...), is a refusal: it exists,
and calling it raises ``NotSupportedError`` naming it. ``load_library`` (compiled operator
libraries) is refused.

>>> import tensorbrain as tb
>>> aten = tb.ops.aten
>>> aten.mm.default(tb.ones(2, 3), tb.ones(3, 1)).tolist()
[[3.0], [3.0]]
>>> aten.add.Tensor(tb.ones(2), tb.ones(2), alpha=2).tolist()
[3.0, 3.0]
>>> aten.mm.default.overloadpacket is aten.mm
True
"""
from __future__ import annotations

import math
from typing import Any

from ._unsupported import NotSupportedError

_WHY = "TensorBrain has no kernel for this torch operator"


def _tb():
    import tensorbrain
    return tensorbrain


def _F():
    from .nn import functional
    return functional


def _slice(x, dim=0, start=None, end=None, step=1):
    index = [slice(None)] * x.dim()
    index[dim] = slice(start, end, step)
    return x[tuple(index)]


def _gelu_backward(grad, x, approximate="none"):
    tb = _tb()
    if approximate == "tanh":
        k = math.sqrt(2.0 / math.pi)
        inner = k * (x + 0.044715 * x ** 3)
        t = tb.tanh(inner)
        return grad * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x))
    cdf = 0.5 * (1 + tb.erf(x / math.sqrt(2.0)))
    return grad * (cdf + x * tb.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))


def _silu_backward(grad, x):
    s = _tb().sigmoid(x)
    return grad * s * (1 + x * (1 - s))


def _to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    return x.to(device=device if device is not None else x.device,
                dtype=dtype if dtype is not None else x.dtype, copy=True)


def _new_empty_strided(x, size, stride=None, dtype=None, layout=None, device=None,
                       pin_memory=None):
    return _tb().empty(tuple(size), dtype=dtype if dtype is not None else x.dtype,
                       device=device if device is not None else x.device)


def _add(a, b, alpha=1):
    return _tb().add(a, b, alpha=alpha)


#: aten operator name -> the TensorBrain function taking aten's arguments (aten's order: the
#: tensor first, then the schema's arguments; keyword-only ones as keywords).
ATEN = {
    "_local_scalar_dense": lambda x: x.item(),
    "_to_copy": _to_copy,
    "_unsafe_view": lambda x, size: x.reshape(tuple(size)),
    "abs": lambda x: _tb().abs(x),
    "add": _add,
    "add_": lambda a, b, alpha=1: a.add_(b, alpha=alpha),
    "addmm": lambda s, m1, m2, beta=1, alpha=1: _tb().addmm(s, m1, m2, beta=beta, alpha=alpha),
    "alias": lambda x: x.view(x.shape),
    "bmm": lambda a, b: _tb().bmm(a, b),
    "cat": lambda tensors, dim=0: _tb().cat(list(tensors), dim),
    "clone": lambda x, memory_format=None: x.clone(),
    "copy_": lambda s, src, non_blocking=False: s.copy_(src),
    "detach": lambda x: x.detach(),
    "detach_": lambda x: x.detach_(),
    "div": lambda a, b, rounding_mode=None: _tb().div(a, b, rounding_mode=rounding_mode),
    "embedding": lambda w, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False:
        _F().embedding(idx, w),
    "empty_like": lambda x, dtype=None, layout=None, device=None, pin_memory=None,
        memory_format=None: _tb().empty_like(x, dtype=dtype, device=device),
    "exp": lambda x: _tb().exp(x),
    "expand": lambda x, size, implicit=False: x.expand(*size),
    "gelu": lambda x, approximate="none": _F().gelu(x, approximate=approximate),
    "gelu_backward": _gelu_backward,
    "is_same_size": lambda a, b: tuple(a.shape) == tuple(b.shape),
    "lift_fresh": lambda x: x,
    "linear": lambda x, w, b=None: _F().linear(x, w, b),
    "log": lambda x: _tb().log(x),
    "matmul": lambda a, b: _tb().matmul(a, b),
    "max": lambda x, *dim_keepdim, **kw: _tb().max(x, *dim_keepdim, **kw),
    "mean": lambda x, *a, **kw: _tb().mean(x, *a, **kw),
    "mm": lambda a, b: _tb().mm(a, b),
    "mul": lambda a, b: _tb().mul(a, b),
    "mul_": lambda a, b: a.mul_(b),
    "neg": lambda x: _tb().neg(x),
    "new_empty_strided": _new_empty_strided,
    "ones_like": lambda x, dtype=None, layout=None, device=None, pin_memory=None,
        memory_format=None: _tb().ones_like(x, dtype=dtype, device=device),
    "permute": lambda x, dims: x.permute(*dims),
    "relu": lambda x: _tb().relu(x),
    "reshape": lambda x, shape: x.reshape(tuple(shape)),
    "rsqrt": lambda x: _tb().rsqrt(x),
    "select": lambda x, dim, index: x.select(dim, index),
    "sigmoid": lambda x: _tb().sigmoid(x),
    "silu": lambda x: _F().silu(x),
    "silu_backward": _silu_backward,
    "slice": _slice,
    "softmax": lambda x, dim, half_to_float=False: _tb().softmax(x, dim),
    "split": lambda x, split_size, dim=0: _tb().split(x, split_size, dim),
    "split_with_sizes": lambda x, split_sizes, dim=0: _tb().split(x, list(split_sizes), dim),
    "sub": lambda a, b, alpha=1: _tb().sub(a, b, alpha=alpha),
    "sum": lambda x, *a, **kw: _tb().sum(x, *a, **kw),
    "sym_size": lambda x, dim=None: x.size() if dim is None else x.size(dim),
    "t": lambda x: x.t(),
    "tanh": lambda x: _tb().tanh(x),
    "threshold_backward": lambda grad, x, threshold: grad * (x > threshold).to(grad.dtype),
    "topk": lambda x, k, dim=-1, largest=True, sorted=True: _tb().topk(x, k, dim, largest,
                                                                        sorted),
    "transpose": lambda x, dim0, dim1: x.transpose(dim0, dim1),
    "unsqueeze": lambda x, dim: x.unsqueeze(dim),
    "view": lambda x, size: x.view(*size) if isinstance(size, (list, tuple)) else x.view(size),
    "zeros_like": lambda x, dtype=None, layout=None, device=None, pin_memory=None,
        memory_format=None: _tb().zeros_like(x, dtype=dtype, device=device),
}


class OpOverload:
    """One overload of an operator (``torch.ops.aten.mm.default``): callable, hashable.

    Args:
        packet: its :class:`OpOverloadPacket`.
        overload: the overload's name (``"default"``, ``"Tensor"``, ``"dim"``...).
        fn: what a call runs (default: the packet's function).
        schema: the overload's schema, where known (``tb.library``'s operators).
    """

    def __init__(self, packet: OpOverloadPacket, overload: str, fn=None, schema=None):
        self.overloadpacket = self._overloadpacket = packet
        self._overloadname = overload
        self._fn = fn if fn is not None else packet
        self._schema = schema
        self.__name__ = f"{packet.__name__}.{overload}"

    def name(self) -> str:
        """``aten::mm`` (or ``aten::add.Tensor``), torch's spelling."""
        base = self.overloadpacket._qualified_op_name
        return base if self._overloadname == "default" else f"{base}.{self._overloadname}"

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __repr__(self):
        return f"{self.overloadpacket._ns}.{self.__name__}"


class OpOverloadPacket:
    """An operator (``torch.ops.aten.mm``): calling it runs its function (:data:`ATEN`'s for
    aten); any attribute is an overload of it (cached, so identical across lookups).

    Args:
        name: the operator's name (a key of :data:`ATEN` for aten).
        fn: what a call runs (default ``ATEN[name]``).
        ns: the namespace.
    """

    def __init__(self, name: str, fn=None, ns: str = "aten"):
        self.__name__ = name
        self._ns = ns
        self._qualified_op_name = f"{ns}::{name}"
        self._fn = fn if fn is not None else ATEN[name]
        self._overloads: dict[str, OpOverload] = {}

    def overloads(self) -> list[str]:
        """The overload names looked up so far (``default`` is always there)."""
        return sorted({"default", *self._overloads})

    def __getattr__(self, overload: str) -> OpOverload:
        if overload.startswith("_"):
            raise AttributeError(overload)
        if overload not in self._overloads:
            self._overloads[overload] = OpOverload(self, overload)
        return self._overloads[overload]

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __repr__(self):
        return f"{self._ns}.{self.__name__}"


#: ``tb.library``'s operators: ``"ns::name"`` -> {overload name: the operator (callable, with
#: its ``schema``)}; ``tensorbrain/library.py`` writes it, :class:`_OpNamespace` reads it.
REGISTERED: dict[str, dict[str, Any]] = {}
_packets: dict[str, _Packet] = {}


class _Packet(OpOverloadPacket):
    """``tb.ops.<ns>.<name>`` for an operator registered with ``tb.library``: its overloads.

    Args:
        qualname: ``"ns::name"`` (a key of :data:`REGISTERED`).
    """

    def __init__(self, qualname: str):
        ns, _, name = qualname.partition("::")
        super().__init__(name, fn=self._call, ns=ns)
        self._table = REGISTERED[qualname]

    def _call(self, *args, **kwargs):
        if len(self._table) == 1:
            return next(iter(self._table.values()))(*args, **kwargs)
        errors = []
        for op in self._table.values():
            try:
                op.schema.bind(args, kwargs)
            except RuntimeError as e:
                errors.append(str(e))
                continue
            return op(*args, **kwargs)
        raise RuntimeError(f"no overload of {self._qualified_op_name} takes these arguments:\n"
                           + "\n".join(errors))

    def overloads(self) -> list[str]:
        """The overload names (``["default"]``)."""
        return sorted(self._table)

    def __getattr__(self, overload: str) -> OpOverload:
        if overload.startswith("_") or overload not in self._table:
            raise AttributeError(f"The underlying op of '{self._ns}.{self.__name__}' has no "
                                 f"overload name '{overload}'")
        if overload not in self._overloads:
            op = self._table[overload]
            self._overloads[overload] = OpOverload(self, overload, fn=op, schema=op.schema)
        return self._overloads[overload]


def packet(ns: str, name: str) -> _Packet | None:
    """``tb.ops.<ns>.<name>`` when that operator is registered with ``tb.library``, else None.

    Args:
        ns: the namespace.
        name: the operator's name (without overload).
    """
    qualname = f"{ns}::{name}"
    if qualname not in REGISTERED:
        return None
    if qualname not in _packets:
        _packets[qualname] = _Packet(qualname)
    return _packets[qualname]


class _RefusedOp:
    """``tb.ops.<namespace>.<op>`` with no TensorBrain implementation: every attribute is a
    further refused handle; calling one raises ``NotSupportedError`` naming it."""

    __tb_refuses__ = _WHY

    def __init__(self, path: str):
        self._path = path

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _RefusedOp(f"{self._path}.{name}")

    def __call__(self, *args, **kwargs):
        raise NotSupportedError(f"{self._path} is not supported by TensorBrain: {_WHY}. Use "
                                f"the public function (tb.*, tb.nn.functional.*) instead")

    def __repr__(self):
        return f"<refused {self._path}>"


#: torch's own operator namespaces: an operator of theirs TensorBrain lacks is refused by name
#: (``torch.ops.higher_order.flex_attention``); in any other namespace an operator nobody
#: registered raises AttributeError, as in torch, so ``hasattr(torch.ops.xformers, "op")``
#: checks fall back.
TORCH_NAMESPACES = frozenset("prims higher_order symm_mem profiler quantized _quantized c10d "
                             "_c10d_functional _c10d_functional_autograd c10d_functional "
                             "onednn mkldnn mkl inductor rngprims sparse quantization _dtensor "
                             "static_runtime".split())


class _OpNamespace:
    """``tb.ops.<ns>`` (torch's ``_OpNamespace``): every name makes one; its attributes are
    the operators registered with ``tb.library`` in ``ns``.

    Args:
        name: the namespace.
    """

    def __init__(self, name: str):
        self.name = name

    def __getattr__(self, op: str):
        if op.startswith("__"):
            raise AttributeError(op)
        found = packet(self.name, op)
        if found is not None:
            return found
        if self.name in TORCH_NAMESPACES:
            return _RefusedOp(f"torch.ops.{self.name}.{op}")
        raise AttributeError(f"'_OpNamespace' '{self.name}' object has no attribute '{op}' "
                             f"(no operator {self.name}::{op} is registered: define it with "
                             f"tb.library.custom_op or Library.define)")

    def __repr__(self):
        return f"<module 'torch.ops.{self.name}' from 'torch.ops'>"


class _Aten(_OpNamespace):
    """``tb.ops.aten``: :data:`ATEN`'s operators, refusals for the rest."""

    def __init__(self):
        super().__init__("aten")
        self._packets: dict[str, OpOverloadPacket] = {}

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in ATEN:
            if name not in self._packets:
                self._packets[name] = OpOverloadPacket(name)
            return self._packets[name]
        return _RefusedOp(f"torch.ops.aten.{name}")

    def __dir__(self):
        return sorted(ATEN)


aten = _Aten()
_namespaces: dict[str, _OpNamespace] = {"aten": aten}


def load_library(path: str) -> None:
    """Not supported: raises ``NotSupportedError`` (TensorBrain loads no C++ operator libraries).

    Args:
        path: the shared library.
    """
    raise NotSupportedError(f"torch.ops.load_library({path!r}) is not supported by TensorBrain: "
                            f"{_WHY}; it loads no compiled operator libraries (TORCH_LIBRARY "
                            f"registrations). Register Python kernels with tb.library.custom_op")


load_library.__tb_refuses__ = _WHY  # type: ignore[attr-defined]


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    if name not in _namespaces:
        _namespaces[name] = _OpNamespace(name)
    return _namespaces[name]
