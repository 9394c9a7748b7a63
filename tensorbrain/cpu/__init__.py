"""``tb.cpu``: as ``torch.cpu``; holds ``tb.cpu.amp``."""
from __future__ import annotations

from . import amp  # noqa: F401  (tb.cpu.amp)


def is_available() -> bool:
    """Always True: the CPU is always there."""
    return True


def device_count() -> int:
    """1, as ``torch.cpu.device_count()``."""
    return 1


def synchronize(device=None) -> None:
    """Nothing to wait for: CPU ops finish before they return.

    Args:
        device: ignored (accepted for torch compatibility).
    """
