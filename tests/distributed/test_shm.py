"""The shared-memory transport in real processes: every collective against NumPy references, the
native transport and its NumPy twin (and both in one group), failures, lifetime of segments."""
import functools
import glob
import os
import threading
import time

import numpy as np
import pytest

from tensorbrain.distributed import _shm
from tensorbrain.testing.distributed import run_workers

needs_native = pytest.mark.skipif(not _shm.native_available(),
                                  reason="tensorbrain._C with the shm transport is not built")
# "mixed": rank 0 runs the C++ transport and the others the twin, on one segment.
IMPLS = ["twin", pytest.param("native", marks=needs_native),
         pytest.param("mixed", marks=needs_native)]
UFUNC = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
         "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}
SMALL_BUF = 8192  # tiny buffers: the flat path, the rs/ag path and chunking all run on small data


def _native_for(impl, rank):
    return {"twin": False, "native": True, "mixed": rank == 0}[impl]


def _group(rank, world, impl, buf_bytes=SMALL_BUF, timeout=10.0):
    from tensorbrain.distributed.store import TCPStore
    store = TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), is_master=rank == 0,
                     wait_for_workers=False, timeout=timeout)
    g = _shm.connect(store, rank, world, timeout, buf_bytes=buf_bytes,
                     native=_native_for(impl, rank))
    return store, g


def _data(rank, size, dtype, seed=0):
    rng = np.random.default_rng(1000 * seed + rank)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (rng.standard_normal(size) * 10).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size).astype(bool)
    return rng.integers(-50 if dt.kind == "i" else 0, 50, size).astype(dt)


def _reference(xs, op):
    if xs[0].dtype == np.float16:
        return functools.reduce(UFUNC[op], [x.astype(np.float32) for x in xs]).astype(np.float16)
    return functools.reduce(UFUNC[op], xs)


# ***** workers (run in subprocesses) *****
def w_collectives(rank, world, impl):
    store, g = _group(rank, world, impl)
    g.barrier()  # the creator unlinks the name once all attached, before its first collective
    assert not os.path.exists("/dev/shm/" + g.name), "the name must be unlinked once attached"
    checked = 0
    # sizes: flat (<= flat_max_bytes), rs/ag with one chunk, several chunks, odd tails
    for size in (1, 5, 300, 2049, 7001):
        for dtype, op in (("float32", "sum"), ("float16", "sum"), ("float64", "max"),
                          ("int32", "prod"), ("uint8", "bxor"), ("bool", "sum"),
                          ("int64", "min")):
            xs = [_data(r, size, dtype, seed=size) for r in range(world)]
            out = np.empty_like(xs[rank])
            g.all_reduce(xs[rank], out, op)
            np.testing.assert_array_equal(out, _reference(xs, op), err_msg=f"{size} {dtype} {op}")
            inplace = xs[rank].copy()
            g.all_reduce(inplace, inplace, op)
            np.testing.assert_array_equal(inplace, out)
            checked += 1
        # broadcast from every root
        for root in range(world):
            b = _data(root, size, "float32", seed=7) if rank == root else np.zeros(size, np.float32)
            g.broadcast(b, root)
            np.testing.assert_array_equal(b, _data(root, size, "float32", seed=7))
        # all_gather
        xs = [_data(r, size, "int16", seed=3) for r in range(world)]
        out = np.empty(world * size, np.int16)
        g.all_gather(xs[rank], out)
        np.testing.assert_array_equal(out, np.concatenate(xs))
        # reduce_scatter
        xs = [_data(r, world * size, "float32", seed=4) for r in range(world)]
        out = np.empty(size, np.float32)
        g.reduce_scatter(xs[rank], out, "sum")
        np.testing.assert_array_equal(out, _reference(xs, "sum")[rank * size:(rank + 1) * size])
        # all_to_all: block j of rank r's input goes to rank j's output block r
        xs = [_data(r, world * size, "float64", seed=5) for r in range(world)]
        out = np.empty(world * size)
        g.all_to_all(xs[rank], out)
        want = np.concatenate([xs[r][rank * size:(rank + 1) * size] for r in range(world)])
        np.testing.assert_array_equal(out, want)
        g.barrier()
    _shm.all_reduce(g, np.full(4, rank, np.float32), out := np.empty(4, np.float32), "avg")
    np.testing.assert_array_equal(out, np.full(4, sum(range(world)) / world, np.float32))
    _shm.close(g)
    return checked


def w_peer_dies(rank, world, impl):
    store, g = _group(rank, world, impl, timeout=20.0)
    x = np.ones(16, np.float32)
    g.all_reduce(x, x, "sum")
    if rank == world - 1:
        os._exit(3)  # dies between collectives, as a crashed process does
    t0 = time.monotonic()
    try:
        g.all_reduce(x, x, "sum")
    except Exception as exc:  # noqa: BLE001 - the type and message are the result
        return [type(exc).__name__, str(exc), time.monotonic() - t0, getattr(exc, "rank", None)]
    return ["no error", "", time.monotonic() - t0, None]


def w_peer_hangs(rank, world, impl):
    store, g = _group(rank, world, impl, timeout=1.0)
    x = np.ones(16, np.float32)
    if rank == 1:
        time.sleep(2.5)  # alive, but never enters the collective in time
        return ["slept", "", 0.0]
    t0 = time.monotonic()
    try:
        g.all_reduce(x, x, "sum")
    except Exception as exc:  # noqa: BLE001
        return [type(exc).__name__, str(exc), time.monotonic() - t0]
    return ["no error", "", time.monotonic() - t0]


MISMATCHES = {
    # name: (what rank 0 calls, what the others call); (x, out) are float32[16] buffers
    "size": (lambda g, x, o: g.all_reduce(x, o, "sum"), lambda g, x, o: g.all_reduce(x[:8], o[:8], "sum")),
    "dtype": (lambda g, x, o: g.all_reduce(x, o, "sum"),
              lambda g, x, o: g.all_reduce(x.view(np.int32), o.view(np.int32), "sum")),
    "op": (lambda g, x, o: g.all_reduce(x, o, "sum"), lambda g, x, o: g.all_reduce(x, o, "max")),
    "kind": (lambda g, x, o: g.broadcast(x, 0), lambda g, x, o: g.all_reduce(x, o, "sum")),
    "root": (lambda g, x, o: g.broadcast(x, 0), lambda g, x, o: g.broadcast(x, 1)),
    # the byte movers record the dtype too: same bytes, float32 against int32
    "copy_dtype": (lambda g, x, o: g.all_to_all(x[:15], o[:15]),
                   lambda g, x, o: g.all_to_all(x[:15].view(np.int32), o[:15].view(np.int32))),
    "large": (lambda g, x, o: g.all_reduce(np.ones(1 << 16, np.float32), np.ones(1 << 16, np.float32), "sum"),
              lambda g, x, o: g.all_reduce(np.ones(1 << 15, np.float32), np.ones(1 << 15, np.float32), "sum")),
}


def w_mismatch(rank, world, impl, kind):
    store, g = _group(rank, world, impl, timeout=10.0)
    x, o = np.ones(16, np.float32), np.zeros(16, np.float32)
    g.all_reduce(x, o, "sum")  # a matching collective first: the check must not misfire
    call = MISMATCHES[kind][0 if rank == 0 else 1]
    t0 = time.monotonic()
    try:
        call(g, x, o)
    except Exception as exc:  # noqa: BLE001 - the type and message are the result
        first = [type(exc).__name__, str(exc), time.monotonic() - t0]
    else:
        first = ["no error", "", time.monotonic() - t0]
    try:  # the group is aborted: later collectives refuse at once
        g.barrier()
        later = "no error"
    except Exception as exc:  # noqa: BLE001
        later = type(exc).__name__
    return first + [later]


def w_gil_released(rank, world):
    store, g = _group(rank, world, "native")
    x = np.ones(1000, np.float32)
    g.all_reduce(x, x, "sum")
    if rank == 1:
        time.sleep(0.5)  # rank 0 waits inside the collective meanwhile
        g.all_reduce(x, x, "sum")
        return 0
    ticks, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)
    t = threading.Thread(target=spin)
    t.start()
    g.all_reduce(x, x, "sum")
    stop.set()
    t.join()
    return ticks[0]


# ***** tests *****
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("world", [2, 3])
def test_collectives_match_numpy(impl, world, run_id):
    out = run_workers("tests.distributed.test_shm:w_collectives", world, impl, init=None,
                      timeout=90.0, env={"TB_RUN_ID": run_id})
    assert out == [35] * world


@pytest.mark.parametrize("impl", ["twin", pytest.param("native", marks=needs_native)])
def test_dead_peer_is_reported_naming_its_rank(impl, run_id):
    res = run_workers("tests.distributed.test_shm:w_peer_dies", 3, impl, init=None,
                      timeout=60.0, env={"TB_RUN_ID": run_id}, raise_on_error=False)
    assert res[2].exitcode == 3
    for r in res[:2]:
        kind, msg, waited, peer = r.value
        assert kind == "DistBackendError", r.value
        assert "rank 2" in msg and "died" in msg, msg
        assert waited < 5.0, f"noticed only after {waited:.1f} s"
        assert peer == 2


@pytest.mark.parametrize("impl", ["twin", pytest.param("native", marks=needs_native)])
def test_peer_that_never_arrives_times_out(impl, run_id):
    out = run_workers("tests.distributed.test_shm:w_peer_hangs", 2, impl, init=None,
                      timeout=60.0, env={"TB_RUN_ID": run_id})
    kind, msg, waited = out[0]
    assert kind == "DistTimeoutError", out[0]
    assert "waiting for rank 1" in msg
    assert 0.9 < waited < 3.5


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("kind", sorted(MISMATCHES))
def test_mismatched_calls_raise_on_every_rank(impl, kind, run_id):
    """Ranks that call different collectives (size, dtype, reduce op, kind, root) all raise a
    DistBackendError naming both calls, within the first synchronisation, instead of mixing
    unrelated buffers; the group refuses everything afterwards."""
    out = run_workers("tests.distributed.test_shm:w_mismatch", 3, impl, kind, init=None,
                      timeout=60.0, env={"TB_RUN_ID": run_id})
    for rank, (typ, _msg, waited, later) in enumerate(out):
        assert typ == "DistBackendError", (rank, out)
        assert waited < 5.0, (rank, out)
        assert later == "DistBackendError", (rank, out)
    assert any("mismatch between ranks" in msg and "but rank" in msg for _, msg, _, _ in out), out


@needs_native
def test_native_collective_releases_the_gil(run_id):
    ticks = run_workers("tests.distributed.test_shm:w_gil_released", 2, init=None,
                        timeout=60.0, env={"TB_RUN_ID": run_id})[0]
    # with the GIL held the thread could not tick at all while rank 0 waits ~0.5 s inside the
    # call; a loaded machine stretches sleep(0.001), hence the low bar
    assert ticks >= 20, f"a Python thread ran only {ticks} times in ~0.5 s of all_reduce"


def test_segment_name_uses_the_run_id(monkeypatch):
    monkeypatch.setenv("TB_RUN_ID", "job42")
    assert _shm.segment_name().startswith("tb_job42_")
    monkeypatch.delenv("TB_RUN_ID")
    assert _shm.segment_name().startswith(f"tb_{os.getpid()}_")


@pytest.mark.parametrize("impl", ["twin", pytest.param("native", marks=needs_native)])
def test_creator_unlinks_when_no_peer_attaches(impl, run_id, monkeypatch):
    monkeypatch.setenv("TB_RUN_ID", run_id)
    from tensorbrain.distributed import errors
    g = _shm.open_group(_shm.segment_name(), 0, 2, True, timeout=0.3, native=impl == "native")
    assert glob.glob(f"/dev/shm/tb_{run_id}_*")
    with pytest.raises(errors.DistTimeoutError, match="rank.s. 1 to attach"):
        g.wait_attached()
    _shm.close(g)
    assert not glob.glob(f"/dev/shm/tb_{run_id}_*")


def test_one_rank_group_in_process():
    from tensorbrain.distributed.store import HashStore
    g = _shm.connect(HashStore(), 0, 1, 5.0)
    x = np.arange(6, dtype=np.int64)
    g.all_reduce(x, x, "sum")
    np.testing.assert_array_equal(x, np.arange(6))
    _shm.close(g)


@pytest.mark.parametrize("impl", ["twin", pytest.param("native", marks=needs_native)])
def test_bad_arguments_are_clear_errors(impl):
    from tensorbrain.distributed.store import HashStore
    g = _shm.connect(HashStore(), 0, 1, 5.0, native=impl == "native")
    with pytest.raises(ValueError, match="bitwise reduce op 'band' is not defined for float32"):
        g.all_reduce(np.ones(3, np.float32), np.ones(3, np.float32), "band")
    with pytest.raises(ValueError, match="root 3 is out of range"):
        g.broadcast(np.ones(3), 3)
    _shm.close(g)


@pytest.mark.parametrize("impl", ["twin", pytest.param("native", marks=needs_native)])
def test_launcher_removes_a_segment_left_by_a_crash(impl, run_id, monkeypatch):
    # a creator that dies before its peers attach leaves the name; tbrun removes it by run id
    from tensorbrain.distributed.run import cleanup_shm
    monkeypatch.setenv("TB_RUN_ID", run_id)
    g = _shm.open_group(_shm.segment_name(), 0, 2, True, timeout=1.0, native=impl == "native")
    g.close()  # unmapped, never unlinked: what a crash leaves
    left = glob.glob(f"/dev/shm/tb_{run_id}_*")
    assert len(left) == 1
    assert cleanup_shm(run_id) == left
    assert not glob.glob(f"/dev/shm/tb_{run_id}_*")
