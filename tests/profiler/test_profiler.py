"""tb.profiler: what it records against the calls the test made, timings against the wall clock,
nothing left installed afterwards, torch's schedule semantics, the Chrome trace, and (2 real
ranks) collectives and DDP buckets on the same timeline."""
import json
import time

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.nn.functional as F
from tensorbrain.autograd import engine
from tensorbrain.profiler import (ProfilerAction, ProfilerActivity, profile, record_function,
                                  schedule)

HERE = "tests.profiler.test_profiler"


def _counts(prof):
    return {e.key: e.count for e in prof.key_averages()}


def test_ops_backward_and_optimizer_are_recorded_as_called():
    x = tb.randn(8, 4, requires_grad=True)
    w = tb.randn(3, 4, requires_grad=True)
    opt = tb.optim.SGD([w], lr=0.1)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        a = tb.add(x, 1.0)            # tb.* function
        b = a * 2.0                   # an operator
        c = b.exp()                   # a Tensor method
        loss = F.linear(c, w).relu().sum()
        loss.backward()
        opt.step()
    assert _counts(prof) == {"add": 1, "mul": 1, "exp": 1, "linear": 1, "relu": 1, "sum": 1,
                             "SumBackward": 1, "ReluBackward": 1, "AddmmBackward": 1,
                             "ExpBackward": 1, "MulBackward": 1, "AddBackward": 1,
                             "Optimizer.step#SGD.step": 1}


def test_results_are_unchanged_and_nothing_stays_installed():
    originals = (tb.add, tb.Tensor.__add__, tb.Tensor.relu, F.linear, tb.optim.SGD.step)
    x = tb.randn(5, 3, requires_grad=True)
    plain = (F.softmax(x * 3.0, dim=1).sum() + x.mean())
    plain.backward()
    want_value, want_grad = plain.item(), x.grad.numpy().copy()
    x.grad = None
    with profile():
        assert tb.add is not originals[0] and tb.add.__wrapped__ is originals[0]
        assert engine.PROFILE_HOOK[0] is not None
        got = (F.softmax(x * 3.0, dim=1).sum() + x.mean())
        got.backward()
    assert (tb.add, tb.Tensor.__add__, tb.Tensor.relu, F.linear, tb.optim.SGD.step) == originals
    assert engine.PROFILE_HOOK[0] is None
    assert got.item() == want_value
    np.testing.assert_array_equal(x.grad.numpy(), want_grad)


def test_times_against_the_wall_clock_and_self_times_add_up():
    t0 = time.perf_counter()
    with profile() as prof:
        with record_function("outer"):
            time.sleep(0.05)
            with record_function("inner"):
                time.sleep(0.02)
                tb.ones(4) + tb.ones(4)
    wall_us = (time.perf_counter() - t0) * 1e6
    rows = {e.key: e for e in prof.key_averages()}
    outer, inner, add = rows["outer"], rows["inner"], rows["add"]
    assert 70_000 <= outer.cpu_time_total <= wall_us
    assert 20_000 <= inner.cpu_time_total <= outer.cpu_time_total
    assert 50_000 <= outer.self_cpu_time_total <= outer.cpu_time_total - inner.cpu_time_total + 1
    # every span is nested in "outer", so the self times add up to its total
    total_self = sum(e.self_cpu_time_total for e in prof.key_averages())
    assert total_self == pytest.approx(outer.cpu_time_total, rel=1e-9)
    assert add.self_cpu_time_total == add.cpu_time_total > 0


def test_record_function_as_decorator_and_without_a_profile():
    @record_function("work")
    def work():
        return tb.ones(2).sum()
    assert work().item() == 2.0  # no profile: plain call
    with profile() as prof:
        work()
        work()
    assert _counts(prof)["work"] == 2


def test_record_shapes_and_grouping_by_shape():
    with profile(record_shapes=True) as prof:
        tb.ones(2, 3) @ tb.ones(3, 4)
        tb.ones(5, 3) @ tb.ones(3, 4)
        tb.ones(2, 3) @ tb.ones(3, 4)
    rows = {(e.key, str(e.input_shapes)): e.count
            for e in prof.key_averages(group_by_input_shape=True) if e.key == "matmul"}
    assert _counts(prof)["ones"] == 6  # factories are ops too, as torch's aten::ones
    assert rows == {("matmul", "[[2, 3], [3, 4]]"): 2, ("matmul", "[[5, 3], [3, 4]]"): 1}
    table = prof.key_averages(group_by_input_shape=True).table(sort_by="count")
    assert "Input Shapes" in table and "[[2, 3], [3, 4]]" in table


def test_table_columns_and_sort_keys():
    a, v = tb.ones(100, 100), tb.ones(3)
    with profile() as prof:
        for _ in range(3):
            a @ a
        v.sum()
    table = prof.key_averages().table(sort_by="count", row_limit=1)
    lines = table.splitlines()
    assert lines[1].split() == ["Name", "Self", "CPU", "%", "Self", "CPU", "CPU", "total", "%",
                                "CPU", "total", "CPU", "time", "avg", "#", "of", "Calls"]
    assert lines[3].split()[0] == "matmul" and lines[3].split()[-1] == "3"
    assert lines[-1].startswith("Self CPU time total: ")
    with pytest.raises(ValueError, match="did you mean cpu_time_total"):
        prof.key_averages().table(sort_by="cpu_time_totl")


def test_table_header_matches_torchs():
    torch = pytest.importorskip("torch")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as tprof:
        torch.ones(4) + 1
    theirs = tprof.key_averages().table(row_limit=1).splitlines()[1].split()
    with profile() as prof:
        tb.ones(4) + 1
    ours = prof.key_averages().table(row_limit=1).splitlines()[1].split()
    assert ours == theirs


@pytest.mark.parametrize("kw", [dict(wait=1, warmup=1, active=2, repeat=1),
                                dict(wait=0, warmup=0, active=1, repeat=2),
                                dict(wait=2, warmup=1, active=3, repeat=0, skip_first=1)])
def test_schedule_matches_torchs(kw):
    ours = [schedule(**kw)(i).name for i in range(14)]
    torch = pytest.importorskip("torch")
    theirs = [torch.profiler.schedule(**kw)(i).name for i in range(14)]
    assert ours == theirs


def test_schedule_records_only_active_steps_and_hands_each_cycle_over():
    traces = []
    v = tb.ones(2)
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=2),
                 on_trace_ready=lambda p: traces.append(_counts(p))) as prof:
        for step in range(10):
            with record_function(f"step{step}"):
                v + 1
            prof.step()
    # cycle 1: steps 0 wait, 1 warmup, 2-3 active; cycle 2: 4 wait, 5 warmup, 6-7 active
    assert traces == [{"step2": 1, "add": 2, "step3": 1}, {"step6": 1, "add": 2, "step7": 1}]
    assert schedule(wait=1, warmup=1, active=2)(3) == ProfilerAction.RECORD_AND_SAVE


def test_chrome_trace(tmp_path):
    with profile(record_shapes=True) as prof:
        with record_function("block"):
            F.relu(tb.randn(4, 4)).sum()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in spans] == ["block", "randn", "relu", "sum"]
    block = spans[0]
    for e in spans[1:]:  # nested in the block, in time
        assert block["ts"] <= e["ts"] and e["ts"] + e["dur"] <= block["ts"] + block["dur"] + 1e-3
    assert spans[2]["args"]["Input Dims"] == [[4, 4]]
    assert abs(block["ts"] / 1e6 - time.time()) < 60  # wall-clock microseconds, as TB_TIMELINE


def test_unsupported_options_and_two_profiles_are_errors():
    with pytest.raises(NotImplementedError, match="profile_memory"):
        profile(profile_memory=True)
    with pytest.raises(NotImplementedError, match="with_stack"):
        profile(with_stack=True)
    if not tb.cuda.is_available():
        with pytest.raises(NotImplementedError, match="CUDA GPU"):
            profile(activities=[ProfilerActivity.CUDA])
    with profile():
        with pytest.raises(RuntimeError, match="already recording"):
            profile().start()


def test_as_torch_name():
    import tensorbrain.profiler as tp
    assert tb.profiler is tp


# ***** distributed: the same timeline *****
def _ddp_profile(rank, world, path):
    import tensorbrain.distributed as dist
    from tensorbrain.distributed import _groups
    tb.manual_seed(0)
    model = tb.nn.parallel.DistributedDataParallel(tb.nn.Linear(6, 3))
    fast = _groups._WORLD.default.fast
    with profile() as prof:
        model(tb.ones(4, 6)).sum().backward()
        dist.all_reduce(tb.ones(3))
    prof.export_chrome_trace(path.format(rank=rank))
    restored = _groups._WORLD.default.fast is fast
    return sorted({(e.category, e.name) for e in prof.events()}), restored


def test_collectives_and_ddp_buckets_on_the_same_timeline(workers, tmp_path):
    path = str(tmp_path / "p{rank}.json")
    results = workers(f"{HERE}:_ddp_profile", 2, path)
    for cats, restored in results:
        assert restored
        assert ("collectives", "all_reduce") in cats and ("ddp buckets", "bucket 0") in cats
        assert ("cpu_op", "linear") in cats and ("backward", "AddmmBackward") in cats
    from tensorbrain.distributed import timeline
    merged = timeline.merge([path.format(rank=r) for r in range(2)], str(tmp_path / "m.json"))
    coll = [e for e in merged["traceEvents"] if e.get("cat") == "collectives"]
    assert {e["pid"] for e in coll} == {0, 1}
    assert all(e["args"]["wait_us"] >= 0 for e in coll)
    # one rank started each collective last: its wait is 0
    by_seq = {}
    for e in coll:
        by_seq.setdefault(e["args"]["seq"], []).append(e["args"]["wait_us"])
    assert all(min(w) == 0 for w in by_seq.values())
