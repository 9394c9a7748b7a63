"""``tb.fx.experimental.symbolic_shapes`` (``torch.fx.experimental.symbolic_shapes``).

TensorBrain has no symbolic sizes (nothing compiles; every shape is a plain int), so the
helpers programs call on sizes answer as torch's do for concrete values: ``guard_or_false(b)``
and ``statically_known_true(b)`` are ``bool(b)``, ``free_symbols(x)`` is empty. The
``ShapeEnv`` machinery is refused by name.

>>> from tensorbrain.fx.experimental.symbolic_shapes import guard_or_false, free_symbols
>>> guard_or_false(4 % 2 == 0), free_symbols(7)
(True, set())
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any

from ..._unsupported import unsupported_class


class DimDynamic(enum.Enum):
    """How a dimension is made symbolic when compiling (torch's values; no effect here)."""

    DYNAMIC = 0
    DUCK = 1
    STATIC = 2
    UNBACKED = 3
    INFER_STRIDE = 4


def guard_or_false(a: Any) -> bool:
    """``bool(a)``: a concrete condition is known (torch: False when it cannot be decided).

    Args:
        a: a bool-like value.
    """
    return bool(a)


def guard_or_true(a: Any) -> bool:
    """``bool(a)``: a concrete condition is known (torch: True when it cannot be decided).

    Args:
        a: a bool-like value.
    """
    return bool(a)


def statically_known_true(x: Any) -> bool:
    """``bool(x)``: every condition on concrete sizes is statically known.

    Args:
        x: a bool-like value.
    """
    return bool(x)


def free_symbols(val: Any) -> set:
    """The free size symbols of ``val``: none, sizes are concrete here.

    Args:
        val: a value, tensor or size.
    """
    return set()


def is_concrete_int(a: Any) -> bool:
    """Whether ``a`` is a plain int (always, for a size here).

    Args:
        a: the value.
    """
    return isinstance(a, int)


@dataclasses.dataclass(frozen=True)
class DivideByKey:
    """A pytree key step meaning ``value // divisor`` (torch's ``DivideByKey``).

    Args:
        divisor: the divisor.
    """

    divisor: int

    def __str__(self) -> str:
        return f".__floordiv__({self.divisor})"

    def get(self, o: int) -> int:
        """``o // divisor``.

        Args:
            o: the value.
        """
        return o // self.divisor


_WHY = "TensorBrain has no symbolic shapes (nothing is compiled; sizes are plain ints)"
ShapeEnv = unsupported_class("torch.fx.experimental.symbolic_shapes.ShapeEnv", _WHY)
StatelessSymbolicContext = unsupported_class(
    "torch.fx.experimental.symbolic_shapes.StatelessSymbolicContext", _WHY)
StrictMinMaxConstraint = unsupported_class(
    "torch.fx.experimental.symbolic_shapes.StrictMinMaxConstraint", _WHY)
RelaxedUnspecConstraint = unsupported_class(
    "torch.fx.experimental.symbolic_shapes.RelaxedUnspecConstraint", _WHY)

__all__ = ["DimDynamic", "DivideByKey", "RelaxedUnspecConstraint", "ShapeEnv",
           "StatelessSymbolicContext", "StrictMinMaxConstraint", "free_symbols",
           "guard_or_false", "guard_or_true", "is_concrete_int", "statically_known_true"]
