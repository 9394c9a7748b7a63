"""Access to the optional compiled module ``tensorbrain._C``.

``pip install -e .`` builds ``tensorbrain._C`` when a C++ compiler is there and falls back to pure
Python when it is not (see docs/install.md). Code that has a native fast path asks
:func:`is_available` and keeps a NumPy twin for the other case; :func:`why_unavailable` says what
happened, and ``TB_NATIVE=0`` (or ``off``/``skip``) at run time ignores an installed module, which
is how to compare the two paths or to rule the native code out when debugging.

>>> from tensorbrain import _native
>>> _native.is_available() in (True, False)
True
>>> isinstance(_native.why_unavailable(), str)
True
"""
from __future__ import annotations

import importlib

from . import _config

# Run-time values of TB_NATIVE that mean "do not use tensorbrain._C" (the build-time values
# auto/require/skip share the variable; skip means the same thing at run time).
_OFF = ("0", "off", "false", "no", "skip")
_ON = ("", "1", "on", "true", "yes", "auto", "require")

_state: tuple[object | None, str] | None = None  # (module or None, reason) once probed


def _probe() -> tuple[object | None, str]:
    global _state
    if _state is None:
        setting = _config.get("TB_NATIVE")  # checked there: one of _OFF + _ON
        if setting in _OFF:
            _state = (None, f"disabled at run time by TB_NATIVE={setting}")
        else:
            try:
                mod = importlib.import_module("tensorbrain._C")
            except ImportError as exc:
                _state = (None, f"tensorbrain._C is not installed or failed to load ({exc}); "
                                "the pure-Python fallback is in use. Reinstall with a C++ compiler "
                                "and CMake: TB_NATIVE=require pip install -e . (see docs/install.md)")
            else:
                _state = (mod, "")
    return _state


def note_at_import() -> None:
    """``import tensorbrain``'s one line about a missing ``tensorbrain._C`` (a ``UserWarning``),
    unless NumPy was asked for: ``TB_NATIVE=0`` at run time or ``TB_NATIVE=skip`` at install.
    The module is only looked for here (``find_spec``), not loaded: ``import tensorbrain`` stays
    as fast as before. What the install did is in ``tensorbrain/_build_info.py``, which
    scikit-build-core writes (pyproject.toml); pip shows the build's own messages only with -v."""
    if _config.get("TB_NATIVE") in _OFF or not _config.says_for_the_job():
        return
    import importlib.util
    try:
        if importlib.util.find_spec("tensorbrain._C") is not None:
            return
    except (ImportError, ValueError):
        pass
    try:
        build = importlib.import_module("tensorbrain._build_info").NATIVE
    except ImportError:  # a source tree run without pip install
        build = "not installed"
    if build == "skip":
        return
    what = {"failed": "failed to build when TensorBrain was installed",
            "built": "was built at install but is missing now"}.get(
        build, "is not installed (this tree was not installed with pip install -e .)")
    import warnings
    warnings.warn(f"tensorbrain: the native module tensorbrain._C {what}; the NumPy kernels are "
                  f"in use (same results, slower reductions). See the compiler's error with "
                  f"`pip install -v -e .`, or make the install fail on it with "
                  f"`TB_NATIVE=require pip install -e .`; TB_NATIVE=0 uses NumPy without this "
                  f"message", UserWarning, stacklevel=3)


def is_available() -> bool:
    """True when ``tensorbrain._C`` loaded and is not disabled by ``TB_NATIVE=0``."""
    return _probe()[0] is not None


def why_unavailable() -> str:
    """Why the native module is not in use ('' when it is)."""
    return _probe()[1]


def module():
    """The ``tensorbrain._C`` module; raises RuntimeError with the reason when unavailable."""
    mod, reason = _probe()
    if mod is None:
        raise RuntimeError(f"tensorbrain native module unavailable: {reason}")
    return mod


def loaded():
    """The module, or None when unavailable: the cheap check for hot paths (one global read)."""
    state = _state
    return (state if state is not None else _probe())[0]


def _reset() -> None:
    """Forget the probe (tests that change TB_NATIVE in-process)."""
    global _state
    _state = None
