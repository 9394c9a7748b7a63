"""The NCCL binding and backend, as far as a machine without a GPU can take them.

CI has no GPU and does not install nvidia-nccl-cu12 (it is huge), so:
* the binding must build and import everywhere (tensorbrain._C.nccl), and say clearly when the
  library is not loaded;
* with the wheel present (``pip install nvidia-nccl-cu12``), NCCL loads without CUDA: version and
  unique ids are real, and communicator creation fails with NCCL's own error instead of hanging;
* without a GPU the backend reports why it is unavailable and refuses to start.

Checks that load NCCL run in a fresh interpreter: the library is loaded once per process, and
``TB_NCCL_LIBRARY`` is read at that moment. The collective suite on a real GPU is at the end,
marked ``gpu``.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tensorbrain as tb
from tensorbrain import _native
from tensorbrain.distributed import _nccl_lib

ROOT = Path(__file__).resolve().parents[2]

needs_native = pytest.mark.skipif(not _native.is_available(),
                                  reason=f"no native module: {_native.why_unavailable()}")
_WHEEL = [p for p, where in _nccl_lib.candidates(env={}) if where == "nvidia-nccl-cu12 wheel"]
needs_wheel = pytest.mark.skipif(not _WHEEL, reason="nvidia-nccl-cu12 is not installed "
                                 "(pip install nvidia-nccl-cu12 to run this test)")
no_gpu = pytest.mark.skipif(tb.cuda.is_available(), reason="checks the no-GPU behaviour")


def _run(code: str, **env) -> str:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    for key, value in env.items():
        if value is None:
            del full_env[key]
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd="/", env=full_env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


# ***** the binding builds and imports without CUDA or NCCL *****
@needs_native
def test_binding_imports_and_declares_ncclh_constants():
    nccl = _nccl_lib.binding()
    assert nccl.UNIQUE_ID_BYTES == 128
    # nccl.h (2.32.3): ncclInt8=0 ... ncclFloat16=6, ncclFloat32=7, ncclFloat64=8, ncclBfloat16=9
    assert nccl.DTYPES["float16"] == 6 and nccl.DTYPES["float32"] == 7
    assert nccl.DTYPES["int64"] == 4 and nccl.DTYPES["bfloat16"] == 9
    assert nccl.RED_OPS == {"sum": 0, "product": 1, "max": 2, "min": 3, "avg": 4}
    assert issubclass(nccl.NcclError, RuntimeError)


@needs_native
def test_calls_before_loading_say_how_to_load():
    out = _run("""
        from tensorbrain.distributed import _nccl_lib
        nccl = _nccl_lib.binding()
        print(nccl.is_loaded())
        try:
            nccl.get_unique_id()
        except nccl.NcclError as e:
            print(e)
    """)
    loaded, message = out.splitlines()
    assert loaded == "False"
    assert "not loaded" in message and "is_nccl_available" in message


@needs_native
def test_bad_library_path_names_the_path_and_the_variable():
    out = _run("""
        from tensorbrain.distributed import _nccl_lib
        print(_nccl_lib.why_unavailable())
    """, TB_NCCL_LIBRARY="/nonexistent/libnccl.so.2")
    assert "TB_NCCL_LIBRARY" in out and "/nonexistent/libnccl.so.2" in out
    assert "pip install tensorbrain[nccl]" in out


def test_candidate_order_explicit_then_wheel_then_system(tmp_path):
    assert _nccl_lib.candidates(env={"TB_NCCL_LIBRARY": "/x/libnccl.so.2"}) == [
        ("/x/libnccl.so.2", "TB_NCCL_LIBRARY")]
    found = _nccl_lib.candidates(env={})
    assert [p for p, _ in found[-2:]] == ["libnccl.so.2", "libnccl.so"]
    # A wheel layout on sys.path (a namespace package has no __init__.py) is found.
    lib = tmp_path / "nvidia" / "nccl" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnccl.so.2").write_bytes(b"")
    sys.path.insert(0, str(tmp_path))
    try:
        paths = [p for p, where in _nccl_lib.candidates(env={}) if where == "nvidia-nccl-cu12 wheel"]
    finally:
        sys.path.remove(str(tmp_path))
    assert str(lib / "libnccl.so.2") in paths


def test_tb_nccl_library_is_documented():
    table = (ROOT / "docs" / "environment.md").read_text()
    assert "`TB_NCCL_LIBRARY`" in table and "`TB_MPI_ABORT_ON_ERROR`" in table


# ***** with the nvidia-nccl-cu12 wheel: real NCCL, no GPU needed *****
@needs_native
@needs_wheel
def test_version_and_unique_ids_from_the_wheel():
    out = _run("""
        from tensorbrain.distributed import _nccl_lib
        path = _nccl_lib.load()
        nccl = _nccl_lib.binding()
        a, b = nccl.get_unique_id(), nccl.get_unique_id()
        print(path); print(nccl.get_version()); print(_nccl_lib.version())
        print(type(a).__name__, len(a), len(b), a != b)
        try:
            nccl.load("/somewhere/else/libnccl.so.2")
        except nccl.NcclError as e:
            print(e)
    """, TB_NCCL_LIBRARY=None)
    path, code, version, ids, again = out.splitlines()
    assert path == _WHEEL[0]
    major, minor, patch = eval(version)  # noqa: S307 - our own tuple repr
    assert int(code) == major * 10000 + minor * 100 + patch and (major, minor) >= (2, 10)
    assert ids == "bytes 128 128 True"
    assert "already loaded" in again and path in again


@needs_native
@needs_wheel
@no_gpu
def test_communicator_without_a_gpu_fails_with_ncclsown_error():
    out = _run("""
        from tensorbrain.distributed import _nccl_lib
        _nccl_lib.load()
        nccl = _nccl_lib.binding()
        uid = nccl.get_unique_id()
        for args in [(2, b"short", 0), (2, uid, 2)]:
            try:
                nccl.Communicator(*args)
            except ValueError as e:
                print(e)
        try:
            nccl.Communicator(1, uid, 0)
        except nccl.NcclError as e:
            print(e)
    """)
    short, out_of_range, init = out.splitlines()
    assert "128 bytes, got 5" in short
    assert "rank 2 is out of range for 2 ranks" in out_of_range
    assert init.startswith("ncclCommInitRank failed:") and "ncclResult_t" in init


# ***** without a GPU the backend says why and refuses to start *****
@no_gpu
def test_backend_unavailable_without_a_gpu_says_why():
    from tensorbrain.distributed import backends
    from tensorbrain.distributed.backends import nccl as nccl_backend
    assert not backends.is_backend_available("nccl")
    reason = nccl_backend.why_unavailable()
    assert reason and ("CUDA" in reason or "NCCL" in reason or "tensorbrain._C" in reason)
    with pytest.raises(RuntimeError, match="nccl backend cannot be used here") as info:
        nccl_backend.NCCLBackend(None, 0, 1, 10.0, "default")
    assert reason in str(info.value) and "backend='tcp'" in str(info.value)
