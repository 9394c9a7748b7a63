"""tensorbrain._native: the compiled module loads where tests and workers import it, and the
TB_NATIVE run-time switch and the missing-module case answer honestly.

Each check runs in a fresh interpreter (subprocess), as distributed workers do, with the repo root
on PYTHONPATH and the working directory elsewhere, so what is tested is the real import path.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tensorbrain import _native

ROOT = Path(__file__).resolve().parents[1]
needs_native = pytest.mark.skipif(not _native.is_available(), reason=f"no native module: {_native.why_unavailable()}")


def _run(code: str, **env) -> str:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    for key, value in env.items():
        if value is None:
            del full_env[key]
    proc = subprocess.run([sys.executable, "-c", code], cwd="/", env=full_env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_import_tensorbrain_does_not_load_the_native_module():
    out = _run("import sys, tensorbrain; print('tensorbrain._C' in sys.modules)", TB_NATIVE=None)
    assert out == "False"


@needs_native
def test_native_module_loads_in_a_worker_with_repo_root_on_pythonpath():
    # Workers and spawned test processes put the repo root first on sys.path; the package must
    # still be this checkout and tensorbrain._C must still resolve (editable redirect finder).
    out = _run("import tensorbrain, tensorbrain._native as n; print(tensorbrain.__file__); "
               "print(n.is_available()); print(n.module().reduce_into.__doc__ is not None)", TB_NATIVE=None)
    file, available, has_kernel = out.splitlines()
    assert Path(file).resolve() == ROOT / "tensorbrain" / "__init__.py"
    assert (available, has_kernel) == ("True", "True")


@pytest.mark.parametrize("value", ["0", "off", "skip"])
def test_tb_native_off_at_run_time_ignores_the_module(value):
    out = _run("import tensorbrain._native as n\n"
               "print(n.is_available()); print(n.why_unavailable())\n"
               "try:\n    n.module()\nexcept RuntimeError as e:\n    print('raised', e)", TB_NATIVE=value)
    available, reason, raised = out.splitlines()
    assert available == "False"
    assert f"TB_NATIVE={value}" in reason
    assert raised.startswith("raised tensorbrain native module unavailable") and f"TB_NATIVE={value}" in raised


def test_missing_module_says_why_and_how_to_fix():
    # sys.modules[name] = None makes the import fail exactly as an install without _C does.
    out = _run("import sys; sys.modules['tensorbrain._C'] = None\n"
               "import tensorbrain._native as n; print(n.is_available()); print(n.why_unavailable())",
               TB_NATIVE=None)
    available, reason = out.splitlines()
    assert available == "False"
    assert "tensorbrain._C is not installed" in reason and "TB_NATIVE=require pip install -e ." in reason


def test_invalid_tb_native_value_is_an_error(monkeypatch):
    monkeypatch.setenv("TB_NATIVE", "maybe")
    _native._reset()
    try:
        with pytest.raises(ValueError, match="TB_NATIVE='maybe' is invalid"):
            _native.is_available()
    finally:
        monkeypatch.delenv("TB_NATIVE")
        _native._reset()



def _import_warnings(**env) -> str:
    """stderr of `import tensorbrain` in a fresh interpreter where tensorbrain._C cannot be
    found (sys.modules[name] = None: what an install without it looks like to find_spec)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for key in ("TB_NATIVE", "RANK", "TB_RUN_ID"):
        full_env.pop(key, None)
    full_env.update(env)
    proc = subprocess.run([sys.executable, "-c", "import sys; sys.modules['tensorbrain._C'] = None\n"
                           "import tensorbrain"], cwd="/", env=full_env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_a_missing_native_module_is_said_once_at_import():
    # CXX=/bin/false pip install -e . printed "Successfully installed" and import said nothing
    err = _import_warnings()
    assert err.count("UserWarning: tensorbrain: the native module tensorbrain._C") == 1, err
    assert "pip install -v -e ." in err and "TB_NATIVE=0" in err


@pytest.mark.parametrize("env", [{"TB_NATIVE": "0"}, {"TB_NATIVE": "off"}, {"RANK": "1"},
                                 {"TB_RUN_ID": "x"}])
def test_no_native_message_when_numpy_was_asked_for_or_not_rank_0(env):
    assert "tensorbrain._C" not in _import_warnings(**env)


def test_import_does_not_warn_when_the_module_is_there():
    if not _native.is_available():
        pytest.skip(f"no native module here: {_native.why_unavailable()}")
    out = subprocess.run([sys.executable, "-c", "import tensorbrain"], cwd="/", text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                         timeout=60)
    assert "tensorbrain._C" not in out.stderr
