"""FSDP really gives back the memory of its unsharded parameters, and a rank that runs out of
memory under a data limit (RLIMIT_DATA) fails naming itself while the others fail naming it."""
import sys

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.testing.distributed import run_workers

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="/proc/self/status and RLIMIT_DATA are Linux's")

ME = "tests.distributed.test_fsdp_memory"


def _vmdata() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmData")


def _fsdp(width, layers=2):
    from tensorbrain.distributed.fsdp import FullyShardedDataParallel as FSDP
    from tensorbrain.distributed.fsdp.wrap import ModuleWrapPolicy
    tb.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [tb.nn.Linear(width, width), tb.nn.ReLU()]
    return FSDP(tb.nn.Sequential(*mods), auto_wrap_policy=ModuleWrapPolicy({tb.nn.Linear}))


def released_buffers(rank, world):
    model = _fsdp(256)
    optim = tb.optim.SGD(model.parameters(), lr=0.1)
    x = tb.tensor(np.random.RandomState(rank).randn(4, 256).astype(np.float32))
    (model(x) ** 2).mean().backward()
    optim.step()
    h = model.module[0]._fsdp_state.handle
    nbytes = h.full.nbytes
    released = [bool(np.all(h.full == 0)), bool(h.entries[0].view._data.flags.writeable)]
    try:
        h.entries[0].view._data[0, 0] = 1.0
        write = "allowed"
    except ValueError as exc:
        write = str(exc)
    before = _vmdata()
    h.unshard()
    gathered = [bool(np.any(h.full != 0)), _vmdata() - before]
    h.reshard()
    return {"nbytes": nbytes, "released": released, "write": write, "gathered": gathered,
            "after": _vmdata() - before}


def test_reshard_gives_the_pages_back_and_data_limit_sees_it():
    """Resharding drops the pages (the buffer reads zeros, not the old parameters: a shared
    mapping kept them allocated) and stops counting the buffer as data; unsharding counts it."""
    for r in run_workers(f"{ME}:released_buffers", 2, timeout=120):
        assert r["released"] == [True, False], r
        assert "read-only" in r["write"], r
        assert r["gathered"][0], r
        # VmData grows by the buffer (page-rounded) while it holds the parameters, then shrinks
        assert r["nbytes"] <= r["gathered"][1] <= r["nbytes"] + 8192, r
        assert abs(r["after"]) <= 8192, r


def oom_under_data_limit(rank, world):
    import resource
    model = _fsdp(1024)
    optim = tb.optim.SGD(model.parameters(), lr=0.1)
    x = tb.tensor(np.random.RandomState(rank).randn(4, 1024).astype(np.float32))

    def step():
        optim.zero_grad()
        (model(x) ** 2).mean().backward()
        optim.step()
    step()
    if rank == 0:   # room for Python's small objects, not for one unit's 4 MiB of parameters
        resource.setrlimit(resource.RLIMIT_DATA, (_vmdata() + (1 << 20),
                                                  resource.getrlimit(resource.RLIMIT_DATA)[1]))
    step()


def test_rank_out_of_memory_names_itself_and_the_others_name_it():
    res = run_workers(f"{ME}:oom_under_data_limit", 2, timeout=120, raise_on_error=False)
    r0, r1 = res
    assert not r0.timed_out and not r1.timed_out, [r.describe() for r in res]
    assert r0.error_type == "MemoryError", r0.describe()
    assert "FSDP unit '0' on rank 0 ran out of memory gathering its parameters" in r0.message
    assert "RLIMIT_DATA" in r0.message, r0.message
    assert r1.error_type == "DistBackendError", r1.describe()
    assert "rank 0" in r1.message and "died" in r1.message, r1.message
    assert "another rank died" in r1.message, r1.message
