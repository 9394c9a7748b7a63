"""``tb.utils.flop_counter`` (``torch.utils.flop_counter``): torch's FLOP formulas, and
``FlopCounterMode`` refused where it would count.

The formulas (``mm_flop``, ``bmm_flop``, ``addmm_flop``, ``baddbmm_flop``, ``conv_flop_count``,
``sdpa_flop_count``) work on shapes and give torch's figures. Counting the FLOPs of a running
model needs torch's dispatcher (every aten call passes through a ``TorchDispatchMode``), which
TensorBrain does not have: ``FlopCounterMode`` can be made, and ``get_total_flops()`` of one never
entered is 0 (Lightning makes one in every model summary), but entering it raises
:class:`~tensorbrain._unsupported.NotSupportedError`.

>>> from tensorbrain.utils.flop_counter import mm_flop, conv_flop_count
>>> mm_flop((64, 128), (128, 32))
524288
>>> conv_flop_count([8, 3, 32, 32], [16, 3, 3, 3], [8, 16, 30, 30])
6220800
"""
from __future__ import annotations

from math import prod

from .._unsupported import NotSupportedError, _message

#: formulas registered with :func:`register_flop_formula`, by target (torch's registry).
flop_registry: dict = {}

suffixes = ["", "K", "M", "B", "T"]

_WHY = ("counting the FLOPs of running code needs torch's dispatcher (TorchDispatchMode), which "
        "TensorBrain does not have")
_USE = ("the formulas of this module on your layer shapes (mm_flop, conv_flop_count, "
        "sdpa_flop_count)")


def register_flop_formula(targets, get_raw: bool = False):
    """Decorator registering a FLOP formula for ``targets`` in :data:`flop_registry`.

    Args:
        targets: an op or a list of ops (torch's ``OpOverloadPacket``; any hashable here).
        get_raw: torch's flag (formula gets the raw arguments); kept, nothing reads it.

    Returns:
        The decorator; it returns the formula unchanged.

    Raises:
        RuntimeError: a target already has a formula.
    """
    def register_fun(formula):
        for target in (targets if isinstance(targets, (list, tuple)) else [targets]):
            if target in flop_registry:
                raise RuntimeError(f"duplicate registrations for {target}")
            flop_registry[target] = formula
        return formula
    return register_fun


def mm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """FLOPs of ``a @ b`` for 2-D shapes ``(m, k)`` and ``(k, n)``: ``2 * m * n * k``.

    Raises:
        AssertionError: the inner dimensions differ (torch's error).
    """
    m, k = a_shape
    k2, n = b_shape
    if k != k2:
        raise AssertionError(f"matmul: inner dimensions must match (k == k2), got {k} and {k2}")
    return m * n * 2 * k


def bmm_flop(a_shape, b_shape, out_shape=None, **kwargs) -> int:
    """FLOPs of a batched matmul of ``(b, m, k)`` by ``(b, k, n)``.

    Raises:
        AssertionError: batch or inner dimensions differ.
    """
    b, m, k = a_shape
    b2, k2, n = b_shape
    if b != b2:
        raise AssertionError(f"bmm: batch dimensions must match (b == b2), got {b} and {b2}")
    if k != k2:
        raise AssertionError(f"bmm: inner dimensions must match (k == k2), got {k} and {k2}")
    return b * m * n * 2 * k


def addmm_flop(self_shape, a_shape, b_shape, out_shape=None, **kwargs) -> int:
    """FLOPs of ``addmm`` (the matmul's; the addition is not counted)."""
    return mm_flop(a_shape, b_shape)


def baddbmm_flop(self_shape, a_shape, b_shape, out_shape=None, **kwargs) -> int:
    """FLOPs of ``baddbmm`` (the batched matmul's)."""
    return bmm_flop(a_shape, b_shape)


def conv_flop_count(x_shape, w_shape, out_shape, transposed: bool = False) -> int:
    """FLOPs of a convolution, multiplications and additions of the products (bias not
    counted), torch's formula.

    Args:
        x_shape: input shape ``(N, C_in, ...)``.
        w_shape: weight shape ``(C_out, C_in / groups, *kernel)``.
        out_shape: output shape.
        transposed: a transposed convolution (counted over the input's positions).

    Returns:
        The FLOP count.
    """
    batch_size = x_shape[0]
    conv_shape = (x_shape if transposed else out_shape)[2:]
    c_out, c_in, *filter_size = w_shape
    return prod(conv_shape) * prod(filter_size) * batch_size * c_out * c_in * 2


def sdpa_flop_count(query_shape, key_shape, value_shape) -> int:
    """FLOPs of scaled dot-product attention (the two batched matmuls), grouped-query heads
    allowed.

    Raises:
        AssertionError: the shapes do not fit together.
    """
    b, h_q, s_q, d_q = query_shape
    b2, h_kv, s_k, d2 = key_shape
    b3, h3, s3, d_v = value_shape
    if not (b == b2 == b3 and h_kv == h3 and d_q == d2 and s_k == s3):
        raise AssertionError(f"sdpa_flop_count: query/key/value shapes are incompatible: "
                             f"q={query_shape}, k={key_shape}, v={value_shape}")
    if h_q < h_kv or h_q % h_kv != 0:
        raise AssertionError(f"sdpa_flop_count: query heads ({h_q}) must be a multiple of "
                             f"key/value heads ({h_kv})")
    return (bmm_flop((b * h_q, s_q, d_q), (b * h_q, d_q, s_k))
            + bmm_flop((b * h_q, s_q, s_k), (b * h_q, s_k, d_v)))


def get_suffix_str(number) -> str:
    """The unit suffix torch prints for ``number`` ("", "K", "M", "B", "T")."""
    return suffixes[max(0, min(len(suffixes) - 1, (len(str(number)) - 2) // 3))]


def convert_num_with_suffix(number, suffix: str) -> str:
    """``number`` in the unit ``suffix``, three decimals (``"1.500M"``)."""
    return f"{number / 1000 ** suffixes.index(suffix):.3f}" + suffix


class FlopCounterMode:
    """``torch.utils.flop_counter.FlopCounterMode``: made as torch's, refused when entered.

    Args:
        mods: torch's (ignored; deprecated there too).
        depth: module depth of the per-module table.
        display: print the table on exit.
        custom_mapping: extra formulas by op.

    ``get_total_flops()`` is 0 and ``get_flop_counts()`` empty until something is counted, which
    never happens here: ``with FlopCounterMode():`` raises ``NotSupportedError``.
    """

    __tb_refuses__ = _message("torch.utils.flop_counter.FlopCounterMode", _WHY, _USE)

    def __init__(self, mods=None, depth: int = 2, display: bool = True,
                 custom_mapping=None) -> None:
        self.depth = depth
        self.display = display
        self.flop_counts: dict = {}
        self.flop_registry = {**flop_registry, **(custom_mapping or {})}

    def get_total_flops(self) -> int:
        """FLOPs counted (0: nothing is counted in TensorBrain)."""
        return sum(self.flop_counts.get("Global", {}).values())

    def get_flop_counts(self) -> dict:
        """FLOPs per module and op (empty here)."""
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def get_table(self, depth=None) -> str:
        """The per-module table (empty here)."""
        return ""

    def __enter__(self):
        raise NotSupportedError(self.__tb_refuses__)

    def __exit__(self, *exc) -> None:
        return None


__all__ = ["FlopCounterMode", "addmm_flop", "baddbmm_flop", "bmm_flop", "conv_flop_count",
           "convert_num_with_suffix", "flop_registry", "get_suffix_str", "mm_flop",
           "register_flop_formula", "sdpa_flop_count", "suffixes"]
