"""``tb.version`` (``torch.version``): the versions a program checks before it picks a code
path. ``__version__`` is TensorBrain's; ``cuda`` is the CUDA runtime CuPy was built for (None
without CuPy, as torch's CPU build says), ``hip``, ``rocm`` and ``xpu`` are None.

>>> import tensorbrain as tb
>>> tb.version.hip is None and isinstance(tb.version.__version__, str)
True
"""
from __future__ import annotations

from . import __version__, _xp  # noqa: F401  (torch.version.__version__)

debug = False
git_version = "unknown"
hip = None
rocm = None
xpu = None


def _cuda_version():
    if _xp._cupy is None:
        return None
    try:
        v = int(_xp._cupy.cuda.runtime.runtimeGetVersion())   # e.g. 12040
    except Exception:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


#: The CUDA runtime version CuPy was built for, as ``"12.4"``, or None.
cuda = _cuda_version()
