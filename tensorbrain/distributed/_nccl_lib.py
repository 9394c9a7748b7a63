"""Finding and loading NCCL at run time, and saying why it cannot be used.

The native binding (``csrc/nccl/nccl.cpp``, ``tensorbrain._C.nccl``) is built without CUDA or
NCCL headers and opens the library with ``dlopen`` when first asked. This module decides which
file it opens, in this order:

1. ``TB_NCCL_LIBRARY`` (a path to ``libnccl.so*``), when set: only that file is tried, so a
   typo is reported instead of silently falling back to another NCCL;
2. the ``nvidia-nccl-cu12`` or ``nvidia-nccl-cu13`` wheel (``pip install tensorbrain[nccl-cu12]``
   or ``[nccl-cu13]``; both put the library at ``nvidia/nccl/lib/
   libnccl.so.2`` inside the ``nvidia`` namespace package (it has no ``__init__.py``, so it is
   found through the package's search path, and every ``sys.path`` entry as a fallback);
3. the system library path (``libnccl.so.2``, then ``libnccl.so``), as ``ldconfig`` knows it.

>>> from tensorbrain.distributed import _nccl_lib
>>> [where for _, where in _nccl_lib.candidates(env={"TB_NCCL_LIBRARY": "/opt/nccl.so"})]
['TB_NCCL_LIBRARY']
"""
from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Mapping

from .. import _config

WHEEL_RELATIVE = os.path.join("nccl", "lib", "libnccl.so.2")  # inside the nvidia/ namespace
SYSTEM_NAMES = ("libnccl.so.2", "libnccl.so")
INSTALL_HINT = ("install NCCL with `pip install tensorbrain[nccl-cu12]` (CUDA 12) or "
                "`tensorbrain[nccl-cu13]` (CUDA 13), or point TB_NCCL_LIBRARY at libnccl.so.2")
WHEEL = "nvidia-nccl wheel (cu12 or cu13)"

_lock = threading.Lock()
_loaded_from: str | None = None
_load_error: str | None = None


def _nvidia_dirs() -> list[str]:
    """Folders named ``nvidia`` that may hold the wheel's files (the namespace package first)."""
    dirs: list[str] = []
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        dirs.extend(str(d) for d in spec.submodule_search_locations)
    for entry in sys.path:  # a namespace package may be shadowed; look everywhere it could be
        candidate = os.path.join(entry or os.getcwd(), "nvidia")
        if candidate not in dirs and os.path.isdir(candidate):
            dirs.append(candidate)
    return dirs


def candidates(env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``(path, where it came from)`` in the order they are tried (see the module docstring)."""
    explicit = _config.get("TB_NCCL_LIBRARY", env=env)
    if explicit:
        return [(explicit, "TB_NCCL_LIBRARY")]
    found = [(os.path.join(d, WHEEL_RELATIVE), WHEEL) for d in _nvidia_dirs()]
    found = [(path, where) for path, where in found if os.path.isfile(path)]
    return found + [(name, "system library path") for name in SYSTEM_NAMES]


def binding():
    """``tensorbrain._C.nccl``, or a RuntimeError saying why the native module is unusable."""
    from .. import _native
    native = _native.module()  # RuntimeError with the reason (not built, TB_NATIVE=0)
    if not hasattr(native, "nccl"):
        raise RuntimeError("tensorbrain._C was built without the NCCL binding (csrc/nccl/); "
                           "rebuild with `pip install -e .`")
    return native.nccl


def load() -> str:
    """Load NCCL once per process; return the path it came from or raise RuntimeError with the
    reason for every candidate tried."""
    global _loaded_from, _load_error
    with _lock:
        if _loaded_from is not None:
            return _loaded_from
        if _load_error is not None:
            raise RuntimeError(_load_error)
        try:
            nccl = binding()
        except RuntimeError as exc:
            _load_error = str(exc)
            raise
        failures = []
        for path, where in candidates():
            try:
                nccl.load(path)
            except nccl.NcclError as exc:
                failures.append(f"{where}: {exc}")
                continue
            _loaded_from = path
            return path
        _load_error = "cannot load NCCL (" + "; ".join(failures) + "); " + INSTALL_HINT
        raise RuntimeError(_load_error)


def version() -> tuple[int, int, int]:
    """NCCL's version as ``(major, minor, patch)``, loading the library if needed."""
    load()
    code = binding().get_version()
    # NCCL_VERSION_CODE is major*10000 + minor*100 + patch since 2.9 (major*1000 before).
    if code >= 10000:
        return code // 10000, (code % 10000) // 100, code % 100
    return code // 1000, (code % 1000) // 100, code % 100


def why_unavailable() -> str | None:
    """Why the nccl backend cannot run here (None when it can): no binding, no library, no GPU."""
    try:
        load()
    except RuntimeError as exc:
        return str(exc)
    from .. import _xp
    if not _xp.cuda_available():
        return (f"NCCL {'.'.join(map(str, version()))} is loaded from {_loaded_from} but CUDA is "
                f"not usable: {_xp._CUPY_ERROR}; NCCL needs an NVIDIA GPU and CuPy "
                f"(`pip install tensorbrain[nccl]`)")
    return None


def is_available() -> bool:
    """True when the binding, the NCCL library and a CUDA GPU are all usable."""
    return why_unavailable() is None
