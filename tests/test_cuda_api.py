"""tb.cuda's memory figures, streams, events, device queries and RNG state, and
tb.accelerator: on a machine without a GPU each gives what torch's CPU build gives (compared
with torch when installed); on a GPU (marker gpu) the figures come from CuPy's pool."""
import pytest

import tensorbrain as tb

no_gpu = pytest.mark.skipif(tb.cuda.is_available(), reason="the behaviour without a GPU")

ZERO = ["memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
        "memory_cached"]


@no_gpu
def test_memory_figures_without_a_gpu_are_torchs():
    for name in ZERO:
        assert getattr(tb.cuda, name)() == 0, name
        assert getattr(tb.cuda.memory, name)() == 0
    assert tb.cuda.memory_stats() == {}
    tb.cuda.empty_cache()
    for call in (tb.cuda.mem_get_info, tb.cuda.reset_peak_memory_stats, tb.cuda.memory_summary,
                 tb.cuda.get_device_capability, tb.cuda.get_device_name,
                 tb.cuda.get_device_properties, tb.cuda.get_rng_state, tb.cuda.current_stream,
                 tb.cuda.default_stream, tb.cuda.Stream, tb.cuda.Event, tb.cuda.initial_seed):
        with pytest.raises(RuntimeError, match="CUDA"):
            call()
    assert tb.cuda.is_bf16_supported() is False and tb.cuda.is_initialized() is False
    assert tb.cuda.get_rng_state_all() == [] and tb.cuda.default_generators == ()
    assert tb.cuda.get_arch_list() == [] and tb.cuda.is_current_stream_capturing() is False
    tb.cuda.set_rng_state(tb.get_rng_state())          # nothing to set, as torch
    tb.cuda.set_rng_state_all([])
    with tb.cuda.stream(None), tb.cuda.device(None), tb.cuda.device(-1):
        pass
    with pytest.raises(RuntimeError, match="CUDA"):
        with tb.cuda.device(0):
            pass
    with pytest.raises(RuntimeError, match="NVTX"):
        tb.cuda.nvtx.range_push("step")
    with pytest.raises(NotImplementedError, match="CUDA graphs"):
        tb.cuda.CUDAGraph()
    torch = pytest.importorskip("torch")
    for name in ZERO:
        assert getattr(torch.cuda, name)() == 0
    assert torch.cuda.memory_stats() == {} and torch.cuda.is_bf16_supported() is False
    assert torch.cuda.get_rng_state_all() == [] and torch.cuda.default_generators == ()


@no_gpu
def test_accelerator_without_one_raises_torchs_error():
    assert tb.accelerator.current_accelerator() is None and tb.accelerator.device_count() == 0
    for call in (tb.accelerator.current_device_index, tb.accelerator.synchronize,
                 tb.accelerator.memory_allocated, tb.accelerator.max_memory_allocated,
                 tb.accelerator.reset_peak_memory_stats, tb.accelerator.empty_cache,
                 tb.accelerator.memory_stats, tb.accelerator.get_memory_info,
                 tb.accelerator.current_stream, lambda: tb.accelerator.set_device_index(0)):
        with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is "
                                               "available"):
            call()
    with tb.accelerator.device_index(None):
        pass
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is "
                                           "available"):
        torch.accelerator.memory_allocated()


def test_out_of_memory_error_is_catchable():
    with pytest.raises(tb.cuda.OutOfMemoryError):
        raise tb.cuda.OutOfMemoryError(1, 2) if tb.cuda.is_available() else \
            tb.cuda.OutOfMemoryError("out of memory")


@pytest.mark.gpu
@pytest.mark.skipif(not tb.cuda.is_available(), reason="needs a GPU")
def test_memory_figures_follow_cupys_pool():
    tb.cuda.empty_cache()
    tb.cuda.reset_peak_memory_stats()
    base = tb.cuda.memory_allocated()
    x = tb.zeros(1 << 20, device="cuda")            # 4 MiB
    assert tb.cuda.memory_allocated() - base >= 4 << 20
    peak = tb.cuda.max_memory_allocated()
    del x
    assert tb.cuda.memory_allocated() == base and tb.cuda.max_memory_allocated() == peak
    assert tb.cuda.memory_reserved() >= tb.cuda.memory_allocated()
    stats = tb.cuda.memory_stats()
    assert stats["allocated_bytes.all.peak"] == peak
    free, total = tb.cuda.mem_get_info()
    assert 0 < free <= total == tb.cuda.get_device_properties(0).total_memory
    tb.cuda.reset_peak_memory_stats()
    assert tb.cuda.max_memory_allocated() < peak
    s, start, end = tb.cuda.Stream(), tb.cuda.Event(enable_timing=True), tb.cuda.Event(
        enable_timing=True)
    with tb.cuda.stream(s):
        start.record()
        y = tb.ones(1000, device="cuda") * 2
        end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0 and s.query() and y.sum().item() == 2000
    assert len(tb.cuda.get_device_capability()) == 2 and tb.cuda.get_device_name()


@no_gpu
def test_cudart_without_a_gpu_raises_torchs_error_type():
    torch = pytest.importorskip("torch")
    with pytest.raises(AssertionError, match="CUDA is not available"):
        tb.cuda.cudart()
    if not torch.cuda.is_available():
        with pytest.raises(AssertionError):
            torch.cuda.cudart()


@pytest.mark.skipif(not tb.cuda.is_available(), reason="needs a GPU")
def test_cudart_profiler_and_host_register_on_a_gpu():
    import numpy as np
    rt = tb.cuda.cudart()
    assert rt.cudaProfilerStart() == 0 and rt.cudaProfilerStop() == 0
    buf = np.zeros(1 << 20, dtype=np.uint8)
    ptr = buf.ctypes.data
    assert rt.cudaHostRegister(ptr, buf.nbytes, 0) == 0
    assert rt.cudaHostUnregister(ptr) == 0
