"""``tb.nn.attention`` (``torch.nn.attention``): choosing a scaled-dot-product-attention
backend. TensorBrain has one implementation of ``F.scaled_dot_product_attention`` (the math
one, on NumPy/CuPy), so ``sdpa_kernel(...)`` accepts torch's backends and runs the block as it
is; :class:`SDPBackend` names them. ``flex_attention`` is in ``tb.nn.attention.flex_attention``.

>>> import tensorbrain as tb
>>> from tensorbrain.nn.attention import SDPBackend, sdpa_kernel
>>> with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
...     out = tb.nn.functional.scaled_dot_product_attention(tb.ones(1, 2, 4), tb.ones(1, 2, 4),
...                                                          tb.ones(1, 2, 4))
>>> out.shape
tb.Size([1, 2, 4])
"""
from __future__ import annotations

import contextlib
import enum


class SDPBackend(enum.IntEnum):
    """torch's scaled-dot-product-attention backends (the values are torch's)."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_current: list = [list(SDPBackend)]


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Run the block with ``backends`` allowed, as ``torch.nn.attention.sdpa_kernel``:
    TensorBrain's one (math) implementation runs whichever is named.

    Args:
        backends: an :class:`SDPBackend` or a list of them.
        set_priority: accepted.

    Raises:
        TypeError: something that is not an SDPBackend.
    """
    chosen = [backends] if isinstance(backends, SDPBackend) else list(backends)
    if not all(isinstance(b, SDPBackend) for b in chosen):
        raise TypeError(f"sdpa_kernel: backends must be SDPBackend values, got {backends!r}")
    old = _current[0]
    _current[0] = chosen
    try:
        yield
    finally:
        _current[0] = old


def current_flash_attention_impl():
    """None: no flash-attention implementation is installed (TensorBrain's is the math one)."""
    return None


def activate_flash_attention_impl(impl) -> None:
    """Refused: there are no flash-attention implementations to choose from.

    Args:
        impl: the implementation's name.

    Raises:
        NotImplementedError: always.
    """
    raise NotImplementedError("torch.nn.attention.activate_flash_attention_impl is not "
                              "supported by TensorBrain: it has one attention implementation")


__all__ = ["SDPBackend", "activate_flash_attention_impl", "current_flash_attention_impl",
           "sdpa_kernel"]
