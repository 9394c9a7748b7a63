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
    from tensorbrain.distributed.fsdp._pages import PAGES
    PAGES.clear()              # the OS path: no cached block to take the pages from
    before = _vmdata()
    h.unshard()
    gathered = [bool(np.any(h.full != 0)), _vmdata() - before]
    PAGES.keep = 0             # the OS path on release too
    h.reshard()
    PAGES.keep = 2
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


def cached_pages(rank, world):
    from tensorbrain.distributed.fsdp._pages import PAGES
    model = _fsdp(256, layers=3)
    optim = tb.optim.SGD(model.parameters(), lr=0.1)
    x = tb.tensor(np.random.RandomState(rank).randn(4, 256).astype(np.float32))
    (model(x) ** 2).mean().backward()
    optim.step()
    a, b, c = (model.module[i]._fsdp_state.handle for i in (0, 2, 4))
    PAGES.clear()
    a.unshard()                                 # fresh pages from the OS
    base = _vmdata()
    a.reshard()                                 # moved into the cache, still counted as data
    moved = [_vmdata() - base, PAGES.nbytes >= a.full.nbytes, bool(np.all(a.full == 0))]
    b.unshard()                                 # takes a's pages: no new memory
    taken = [_vmdata() - base, PAGES.nbytes]
    from_cache = b.full.copy()
    b.reshard()
    PAGES.clear()
    b.unshard()                                 # the same all-gather into fresh pages
    fresh = b.full.copy()
    b.reshard()
    for h in (a, b, c):                         # three blocks offered, two kept
        h.unshard()
    for h in (a, b, c):
        h.reshard()
    return {"nbytes": a.full.nbytes, "moved": moved, "taken": taken,
            "same": bool(np.array_equal(from_cache, fresh)),
            "differs_from_a": not np.array_equal(from_cache, np.zeros_like(from_cache)),
            "kept": PAGES.nbytes}


def test_released_pages_move_to_the_next_unit_of_the_same_size():
    """A released unit's pages go to the page cache (still counted by RLIMIT_DATA) and the next
    unit of that size all-gathers into them without new memory; its values are exactly what an
    all-gather into fresh pages gives; at most two blocks are kept."""
    for r in run_workers(f"{ME}:cached_pages", 2, timeout=120):
        page = 4096
        assert abs(r["moved"][0]) <= 2 * page and r["moved"][1:] == [True, True], r
        assert abs(r["taken"][0]) <= 2 * page and r["taken"][1] == 0, r
        assert r["same"] and r["differs_from_a"], r
        span = -(-r["nbytes"] // page) * page
        assert r["kept"] == 2 * span, r


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
        from tensorbrain.distributed.fsdp._pages import PAGES
        PAGES.clear()   # (the cached pages of step 1 would be that room)
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
