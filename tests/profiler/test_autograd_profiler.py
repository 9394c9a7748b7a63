"""torch.autograd.profiler's API on TensorBrain: the same program profiled under real torch and
under TensorBrain records the same user blocks and call counts (op names differ: torch's are
``aten::``), and the legacy options behave as torch's do on a CPU-only machine."""
import pytest

import tensorbrain as tb
from tensorbrain.autograd import profiler as tbp


def _program(lib, prof_mod):
    a = lib.ones(8, 8)
    with prof_mod.profile(record_shapes=True) as prof:
        for _ in range(3):
            with prof_mod.record_function("step"):
                (a @ a).sum()
    return prof


def test_same_blocks_and_counts_as_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = _program(tb, tbp), _program(torch, torch.autograd.profiler)
    ours_counts = {e.key: e.count for e in ours.key_averages()}
    theirs_counts = {e.key: e.count for e in theirs.key_averages()}
    assert ours_counts["step"] == theirs_counts["step"] == 3
    assert ours_counts["matmul"] == theirs_counts["aten::matmul"] == 3
    assert ours_counts["sum"] == theirs_counts["aten::sum"] == 3
    assert sum(1 for e in ours.function_events if e.name == "step") == \
        sum(1 for e in theirs.function_events if e.name == "step")
    assert ours.self_cpu_time_total > 0 and theirs.self_cpu_time_total > 0
    assert "step" in ours.table(sort_by="self_cpu_time_total", row_limit=5)
    assert isinstance(ours.function_events, tbp.EventList)


def test_disabled_records_nothing_and_emit_nvtx_like_torch_cpu():
    torch = pytest.importorskip("torch")
    with tbp.profile(enabled=False) as prof:
        tb.ones(2) + 1
    assert list(prof.function_events) == []
    with tbp.emit_nvtx(enabled=False):
        tb.ones(2) + 1
    errors = []
    for mod in (tbp, torch.autograd.profiler):
        try:
            with mod.emit_nvtx():
                pass
        except Exception as exc:   # noqa: BLE001 - the type is what is compared
            errors.append(type(exc))
    assert errors == [AssertionError, AssertionError]


def test_bad_arguments_name_themselves():
    with pytest.raises(NotImplementedError, match="profile_memory"):
        tbp.profile(profile_memory=True)
    with pytest.raises(TypeError, match="use_device"):
        tbp.profile(use_device=3)
    with pytest.raises(NotImplementedError, match="use_cpu=False"):
        tbp.profile(use_cpu=False)
    assert tb.autograd.profiler is tbp
