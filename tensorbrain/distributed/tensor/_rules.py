"""What an op on a DTensor returns: the layout rules every op's result goes through.

``_ops/core.py`` holds a hook slot, ``DTENSOR_HOOK``; :func:`install` puts ``(DTensor, _on_op)``
there when ``_api`` defines the class, so neither the core nor this module imports ``_api``
(the class reaches the rules through the slot, and the rules reach the class through
``_DT``).

Ops on a DTensor (every op hands its result to :func:`_on_op`):

* pointwise ops (``neg``, ``exp``, ``** 2``, ``* 2.0``, ``clamp``, ``relu``, ``clone``, dtype
  casts, ...) and binary pointwise ops between DTensors of the same mesh, placements and shape
  return a DTensor of that layout, as in torch. On a ``Partial`` DTensor only ops linear in the
  value are allowed (``neg``, ``clone``, ``* scalar``, ``/ scalar``, ``+``/``-`` of two Partial
  DTensors); ``.data``, ``.detach()`` and ``zeros_like``/``ones_like``/``rand_like``/... keep the
  layout too (``*_like`` turns Partial into Replicate, as torch).
* a pointwise op mixing a sharded or Partial DTensor with a plain Tensor of more than one
  element, or two DTensors of different layouts, raises (redistribute / ``DTensor.from_local``
  first); a fully replicated DTensor with a plain Tensor still gives a plain Tensor (the value is
  right on every rank).
* any other op (matmul, reshape, indexing, ``tb.norm``, ...) on a sharded or Partial DTensor
  raises NotImplementedError naming ``.full_tensor()`` / ``.to_local()``; on a fully replicated
  DTensor it computes on the local copy (the global value) and returns a plain Tensor.
* the reduction methods (``sum``, ``mean``, ``norm``, ``max``, ...) refuse to reduce over a
  sharded dim; over other dims they return a DTensor of the reduced layout.
"""
from __future__ import annotations

import functools
from typing import NoReturn

from ...tensor import Tensor
from ..._ops import core as _core

_DT: list = [None]  # the DTensor class, set by install()

_BYPASS = [0]   # > 0 while DTensor internals call ops whose result they wrap themselves

_UNARY = {"Abs", "Clamp", "Clone", "Cos", "Erf", "Exp", "Expm1", "Gelu", "Log", "Log1P", "Neg",
          "Reciprocal", "Relu", "Rsqrt", "Sigmoid", "Silu", "Sin", "Sqrt", "Tanh", "ToCopy",
          "Elementwise"}
_BINARY = {"Add", "Sub", "Mul", "Div", "Pow", "Maximum", "Minimum", "Where"}
_POINTWISE = {n + "Backward" for n in _UNARY | _BINARY}


def local_ops(fn):
    """Wrap ``fn`` so that ops inside it compute on DTensors' local shards and return plain
    Tensors (no layout rules): for DTensor internals, such as the tensor-parallel styles, which
    run a module's own forward on this rank's weight shard by design.

    Args:
        fn: the function (a forward).

    Returns:
        The wrapped function.
    """
    @functools.wraps(fn)
    def run(*args, **kwargs):
        _BYPASS[0] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _BYPASS[0] -= 1
    return run


def _linear_on_partial(name: str, inputs, dts) -> bool:
    """Whether op ``name`` on these inputs is linear in the Partial values (sum of the op on
    each rank's part = the op on the sum)."""
    op = name[:-len("Backward")]
    if op in ("Neg", "Clone", "ToCopy"):
        return True
    tensors = [x for x in inputs if x is not None]
    if op == "Mul":
        return len(tensors) == 1
    if op == "Div":
        return len(tensors) == 1 and inputs[0] is not None
    if op in ("Add", "Sub"):
        return len(tensors) == 2 and len(dts) == 2
    return False


def _refuse(op: str, dts) -> NoReturn:
    """Raise NotImplementedError: ``op`` would compute on the local shards of ``dts``."""
    layouts = ", ".join(f"{d._spec.placements}" for d in dts)
    raise NotImplementedError(
        f"{op} on a DTensor sharded or Partial across ranks (placements {layouts}) is not "
        f"supported by TensorBrain: it would compute on this rank's local shard only and give a "
        f"wrong result. Call .full_tensor() first (a collective: every rank must call it) for "
        f"the global value, or .to_local() for the shard's own value")


def _check_operands(op: str, dts, plain) -> None:
    """Raise ValueError when a pointwise op mixes a sharded/Partial DTensor with a plain Tensor
    of more than one element (``plain``), or DTensors of different layouts."""
    spec = dts[0]._spec
    layouts = ", ".join(f"{d._spec.placements}" for d in dts)
    if plain and any(d._sharded_dims() or d._is_partial() for d in dts):
        raise ValueError(
            f"{op}: got a mixed plain Tensor and DTensor (placements {layouts}); as in torch, "
            f"convert the Tensor to a DTensor first (distribute_tensor or DTensor.from_local), "
            f"or use .to_local() / .full_tensor() on the DTensor")
    if any(d._spec != spec for d in dts):
        raise ValueError(
            f"{op}: DTensors with different layouts ({layouts}, global shapes "
            f"{[d._spec.shape for d in dts]}); redistribute one to the other's placements first")


def _on_op(t: Tensor, inputs, name: str, along=None) -> Tensor:
    """Decide what op ``name`` with a DTensor among ``inputs`` returns; ``t`` is its result
    computed on the local shards (a plain Tensor).

    Args:
        t: the op's output as ``make`` built it.
        inputs: the op's tensor inputs (None where a Python scalar was given).
        name: the op's autograd node name (``"MulBackward"``, ...).
        along: the dims a shape-keeping op (softmax) mixes values along, if it says.

    Returns:
        A DTensor of the inputs' layout for pointwise ops; ``t`` itself where the local
        computation is the global one (fully replicated DTensors, DTensor internals).

    Raises:
        ValueError: a pointwise op between DTensors of different layouts, or a sharded/Partial
            DTensor with a plain Tensor.
        NotImplementedError: a non-pointwise op (or a non-linear one on a Partial DTensor) that
            would compute on this rank's shard only.
    """
    if _BYPASS[0] or name.startswith("DTensor"):
        return t
    DTensor = _DT[0]
    dts = [x for x in inputs if isinstance(x, DTensor)]
    plain = [x for x in inputs if x is not None and not isinstance(x, DTensor)
             and x._data.size > 1]
    spec = dts[0]._spec
    split = any(d._sharded_dims() for d in dts)
    partial = any(d._is_partial() for d in dts)
    op = name[:-len("Backward")] if name.endswith("Backward") else name
    if not split and not partial:
        if (name in _POINTWISE or along is not None and len(dts) == 1) and not plain \
                and all(d._spec == spec for d in dts):
            return DTensor._make(t._data, spec, like=t)
        return t   # replicated everywhere: the local value is the global one
    layouts = ", ".join(f"{d._spec.placements}" for d in dts)
    if along is not None and len(dts) == 1 and not partial and not plain:
        n = len(spec.shape)
        if not {int(d) % max(n, 1) for d in along} & dts[0]._sharded_dims():
            return DTensor._make(t._data, spec, like=t)
    if name not in _POINTWISE:
        _refuse(op.lower(), dts)
    _check_operands(op.lower(), dts, plain)
    if partial and not _linear_on_partial(name, inputs, dts):
        raise NotImplementedError(
            f"{op.lower()} on a Partial DTensor (placements {layouts}) is not linear in the "
            f"pending sum; call .redistribute(placements=[Replicate()...]) or .full_tensor() "
            f"first")
    return DTensor._make(t._data, spec, like=t)


def _guard(name: str):
    """A DTensor method for a Tensor method whose op builds its result without ``make``
    (comparisons, ``sign``, ``round``, ...): same treatment as :func:`_on_op`."""
    base = getattr(Tensor, name)

    def method(self, *args, **kwargs):
        out = base(self, *args, **kwargs)
        if isinstance(out, _DT[0]) or not isinstance(out, Tensor):
            return out
        others = tuple(a if isinstance(a, Tensor) else None for a in args)
        return _on_op(out, (self,) + others, "ElementwiseBackward")
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"As Tensor.{name}, keeping or refusing the DTensor layout as other ops do."
    return method


def _checked(name: str):
    """A DTensor arithmetic operator that checks the other operand's layout before computing
    (the local shapes of mismatched layouts would otherwise fail with a broadcast error, or
    worse, broadcast)."""
    base = getattr(Tensor, name)

    def method(self, other, *args, **kwargs):
        if isinstance(other, Tensor):
            dt = isinstance(other, _DT[0])
            _check_operands(name.strip("_"), [self] + ([other] if dt else []),
                            [] if dt or other._data.size <= 1 else [other])
        return base(self, other, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"As Tensor.{name}; the other operand must have this DTensor's layout."
    return method


def install(dtensor_cls) -> None:
    """Make ``dtensor_cls`` the DTensor class: ops with a DTensor input hand their result to
    :func:`_on_op`, and the operators and methods below check or keep the layout.

    Args:
        dtensor_cls: ``_api.DTensor`` (called once, when ``_api`` is imported).
    """
    _DT[0] = dtensor_cls
    _core.DTENSOR_HOOK[0] = (dtensor_cls, _on_op)
    for name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
                  "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "add", "sub", "mul", "div",
                  "maximum", "minimum"):
        if hasattr(Tensor, name):
            setattr(dtensor_cls, name, _checked(name))
    for name in ("sign", "round", "floor", "ceil", "trunc", "isnan", "isinf", "isfinite",
                  "logical_not", "lt", "gt", "le", "ge", "eq", "ne", "__lt__", "__gt__", "__le__",
                  "__ge__", "__eq__", "__ne__", "float", "double", "half", "bfloat16", "long",
                  "int", "bool", "to", "type_as", "__invert__", "__and__", "__or__", "__xor__"):
        if hasattr(Tensor, name):
            setattr(dtensor_cls, name, _guard(name))
    dtensor_cls.__hash__ = Tensor.__hash__
