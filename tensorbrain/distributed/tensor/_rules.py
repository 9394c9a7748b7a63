"""What an op on a DTensor returns: the layout rules every op's result goes through.

``DTensor.__tb_dispatch__`` (``_api.py``) hands every op result with a DTensor input to
:func:`on_op`, as torch's ``__torch_dispatch__``: ``_ops/core.make`` finds the handler on the
input's class. Neither the core nor this module imports ``_api``: a DTensor is recognised by
that attribute (:func:`is_dtensor`) and builds its results itself (``DTensor._result``).

Ops on a DTensor (every op hands its result to :func:`on_op`):

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

import contextlib
import functools
from typing import NoReturn

from ...tensor import Tensor

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
        with bypassed():
            return fn(*args, **kwargs)
    return run


@contextlib.contextmanager
def bypassed():
    """Ops inside the block compute on DTensors' local shards and return plain Tensors (the
    DTensor methods that wrap a result themselves, :func:`local_ops`)."""
    _BYPASS[0] += 1
    try:
        yield
    finally:
        _BYPASS[0] -= 1


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


def is_dtensor(x) -> bool:
    """Whether ``x`` is a DTensor (its class dispatches ops: ``__tb_dispatch__``)."""
    return isinstance(x, Tensor) and type(x).__tb_dispatch__ is not None


def on_op(t: Tensor, inputs, name: str, along=None) -> Tensor:
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
    dts = [x for x in inputs if is_dtensor(x)]
    plain = [x for x in inputs if x is not None and not is_dtensor(x) and x._data.size > 1]
    spec = dts[0]._spec
    split = any(d._sharded_dims() for d in dts)
    partial = any(d._is_partial() for d in dts)
    op = name[:-len("Backward")] if name.endswith("Backward") else name
    if not split and not partial:
        if (name in _POINTWISE or along is not None and len(dts) == 1) and not plain \
                and all(d._spec == spec for d in dts):
            return dts[0]._result(t._data, spec, t)
        return t   # replicated everywhere: the local value is the global one
    layouts = ", ".join(f"{d._spec.placements}" for d in dts)
    if along is not None and len(dts) == 1 and not partial and not plain:
        n = len(spec.shape)
        if not {int(d) % max(n, 1) for d in along} & dts[0]._sharded_dims():
            return dts[0]._result(t._data, spec, t)
    if name not in _POINTWISE:
        _refuse(op.lower(), dts)
    _check_operands(op.lower(), dts, plain)
    if partial and not _linear_on_partial(name, inputs, dts):
        raise NotImplementedError(
            f"{op.lower()} on a Partial DTensor (placements {layouts}) is not linear in the "
            f"pending sum; call .redistribute(placements=[Replicate()...]) or .full_tensor() "
            f"first")
    return dts[0]._result(t._data, spec, t)


def guard(name: str):
    """A DTensor method for a Tensor method whose op builds its result without ``make``
    (comparisons, ``sign``, ``round``, ...): same treatment as :func:`on_op`."""
    base = getattr(Tensor, name)

    def method(self, *args, **kwargs):
        out = base(self, *args, **kwargs)
        if is_dtensor(out) or not isinstance(out, Tensor):
            return out
        others = tuple(a if isinstance(a, Tensor) else None for a in args)
        return on_op(out, (self,) + others, "ElementwiseBackward")
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"As Tensor.{name}, keeping or refusing the DTensor layout as other ops do."
    return method


def checked(name: str):
    """A DTensor arithmetic operator that checks the other operand's layout before computing
    (the local shapes of mismatched layouts would otherwise fail with a broadcast error, or
    worse, broadcast)."""
    base = getattr(Tensor, name)

    def method(self, other, *args, **kwargs):
        if isinstance(other, Tensor):
            dt = is_dtensor(other)
            _check_operands(name.strip("_"), [self] + ([other] if dt else []),
                            [] if dt or other._data.size <= 1 else [other])
        return base(self, other, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"As Tensor.{name}; the other operand must have this DTensor's layout."
    return method
