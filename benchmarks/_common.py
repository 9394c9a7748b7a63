"""What the benchmarks print about the machine: the CPU model and NumPy's BLAS.

Imports nothing heavy at module level: ``ops.py`` sets the BLAS thread variables before NumPy
loads, so NumPy is imported only when ``blas()`` is called.
"""
from __future__ import annotations

import platform


def cpu_model(default: str | None = None) -> str:
    """The ``model name`` line of /proc/cpuinfo; else ``default`` (by default
    ``platform.processor()``, or "unknown cpu" when that is empty)."""
    if default is None:
        default = platform.processor() or "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return default


def blas() -> dict:
    """NumPy's BLAS as its build config states it (keys such as ``name``, ``version``); ``{}``
    where this NumPy does not say."""
    import numpy as np
    try:
        return dict(np.show_config(mode="dicts")["Build Dependencies"]["blas"])
    except Exception:
        return {}


def parse_size(text: str) -> int:
    """A size argument in bytes: ``8``, ``1K``, ``64KB``, ``32M``, ``1.5G`` (powers of 1024)."""
    text = text.strip().upper().rstrip("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(float(text[:-1] if text[-1:] in "KMG" else text) * mult)
