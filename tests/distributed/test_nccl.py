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
_WHEEL = [p for p, where in _nccl_lib.candidates(env={}) if where == _nccl_lib.WHEEL]
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
    assert "pip install tensorbrain[nccl-cu12]" in out and "tensorbrain[nccl-cu13]" in out


def test_without_the_native_module_the_reason_says_so():
    out = _run("""
        from tensorbrain.distributed import _nccl_lib
        import tensorbrain.distributed as dist
        print(dist.is_nccl_available()); print(_nccl_lib.why_unavailable())
    """, TB_NATIVE="0")
    available, reason = out.splitlines()
    assert available == "False" and "TB_NATIVE=0" in reason


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
        paths = [p for p, where in _nccl_lib.candidates(env={}) if where == _nccl_lib.WHEEL]
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


@no_gpu
def test_init_process_group_nccl_without_a_gpu_raises_the_reason():
    import tensorbrain.distributed as dist
    assert not dist.is_nccl_available()
    with pytest.raises(RuntimeError, match="nccl backend cannot be used here"):
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    assert not dist.is_initialized()


# ***** with a GPU: the backend at world size 1 (NCCL refuses two ranks on one GPU) *****
@pytest.fixture
def nccl_world():
    import tensorbrain.distributed as dist
    if not dist.is_nccl_available():
        pytest.skip(f"nccl backend unavailable: {_nccl_lib.why_unavailable()}")
    tb.cuda.set_device(0)
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1, timeout=60)
    yield dist
    dist.destroy_process_group()


def _cuda(array):
    return tb.Tensor._wrap(tb._xp.cupy().asarray(array))


def _host(t):
    return tb._xp.to_numpy(t._data)


@pytest.mark.gpu
def test_nccl_every_collective_at_world_size_one_against_numpy(nccl_world):
    import numpy as np
    dist = nccl_world
    for dtype in ("float16", "float32", "float64", "int32", "int64", "uint8"):
        x = (np.arange(13) % 7).astype(dtype)
        for op in ("sum", "prod", "min", "max") + (("avg",) if dtype.startswith("float") else ()):
            t = _cuda(x)
            dist.all_reduce(t, op=op)
            np.testing.assert_array_equal(_host(t), x, err_msg=f"all_reduce {op} {dtype}")
        t = _cuda(x)
        dist.broadcast(t, src=0)
        dist.reduce(t, dst=0)
        np.testing.assert_array_equal(_host(t), x)
        outs = [_cuda(np.zeros_like(x))]
        dist.all_gather(outs, _cuda(x))
        np.testing.assert_array_equal(_host(outs[0]), x)
        out = _cuda(np.zeros_like(x))
        dist.all_gather_into_tensor(out, _cuda(x))
        dist.reduce_scatter_tensor(out, _cuda(x))
        np.testing.assert_array_equal(_host(out), x)
        outs = [_cuda(np.zeros_like(x))]
        dist.all_to_all(outs, [_cuda(x)])
        np.testing.assert_array_equal(_host(outs[0]), x)
        out = _cuda(np.zeros_like(x))
        dist.all_to_all_single(out, _cuda(x))
        np.testing.assert_array_equal(_host(out), x)
    # non-contiguous view, written back in place
    base = tb._xp.cupy().arange(48, dtype="float32").reshape(6, 8)
    view = tb.Tensor._wrap(base.T)
    dist.all_reduce(view)
    np.testing.assert_array_equal(tb._xp.to_numpy(base), np.arange(48, dtype="float32").reshape(6, 8))
    dist.barrier()
    with pytest.raises(ValueError, match="no bitwise reductions"):
        dist.all_reduce(_cuda(np.ones(3, "int32")), op="band")
    with pytest.raises(ValueError, match="CUDA tensors"):
        dist.all_reduce(tb.ones(3))


@pytest.mark.gpu
def test_nccl_async_work_is_ordered_after_the_compute_stream(nccl_world):
    import numpy as np
    dist, cp = nccl_world, tb._xp.cupy()
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        x = cp.ones(1 << 22, dtype=cp.float32)
        for _ in range(20):  # enough queued work that the collective would overtake it if unordered
            x *= 1.0
        x += 1.0
        t = tb.Tensor._wrap(x)
        work = dist.all_reduce(t, async_op=True)
        work.wait()  # the current stream (this one) waits for the communication stream
        total = float(x.sum())
    assert total == 2.0 * (1 << 22)
    work.wait(timeout=30)
    assert work.is_completed() and work.exception() is None
    np.testing.assert_array_equal(_host(t)[:4], [2.0] * 4)


@no_gpu
def test_gpu_benchmark_says_why_it_cannot_run():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "nccl_allreduce.py")],
                          cwd="/", env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "the nccl backend cannot run here" in proc.stdout


@pytest.mark.gpu
def test_shared_suite_cuda_check_on_nccl(nccl_world):
    # The shared collective suite's CUDA check (all_reduce, broadcast, all_gather on CuPy
    # tensors against NumPy), here on the nccl backend at world size 1.
    from tests.distributed import collective_suite
    assert collective_suite.check_cuda(0, 1, "nccl") == 6


@pytest.mark.gpu
def test_nccl_object_collectives_stage_through_the_gpu(nccl_world):
    """NCCL moves device memory only: object collectives must stage their bytes on the GPU."""
    import numpy as np
    dist = nccl_world
    obj = {"epoch": 3, "names": ["a", "b"], "w": np.arange(4.0)}
    got = [None]
    dist.all_gather_object(got, obj)
    assert got[0]["epoch"] == 3 and got[0]["names"] == ["a", "b"]
    np.testing.assert_array_equal(got[0]["w"], obj["w"])
    lst = [obj, 7]
    dist.broadcast_object_list(lst, src=0)
    assert lst[1] == 7
    gathered = [None]
    dist.gather_object("x", gathered, dst=0)
    assert gathered == ["x"]
    out = [None]
    dist.scatter_object_list(out, ["only"], src=0)
    assert out == ["only"]
