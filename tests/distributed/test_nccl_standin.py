"""The nccl backend's multi-rank code, run on CPUs through a stand-in for NCCL and CuPy.

Why a stand-in: NCCL refuses two ranks on one GPU and CI has no GPU, so the backend's multi-rank
paths (unique-id exchange through the store, dtype/op mapping, grouped send/recv for gather,
scatter and all_to_all, staging of non-contiguous arrays, the watchdog) could otherwise never run
before a user's job. ``tensorbrain.testing.nccl_standin`` replaces only what
``NCCLBackend._runtime`` returns (the binding and CuPy) with a tcp-backed communicator whose calls
are queued on worker-thread "streams", so launches are asynchronous to the host as on a GPU.
Every result is compared with NumPy on inputs every rank can recompute.
"""
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain.testing.distributed import run_workers

HERE = "tests.distributed.test_nccl_standin"
DTYPES = ["float32", "float64", "float16", "int32", "int64", "uint8", "int8"]


def _data(rank, n, dtype, salt=0):
    rng = np.random.default_rng([rank, n, salt, DTYPES.index(dtype)])
    return rng.integers(1, 4, size=n).astype(dtype)


def _init():
    from tensorbrain.testing import nccl_standin
    nccl_standin.register()
    dist.init_process_group("nccl-standin", timeout=30)
    return dist.get_rank(), dist.get_world_size()


def _check(got, want, what):
    np.testing.assert_array_equal(np.asarray(got), want, err_msg=what)


def _every_collective(rank, world):
    rank, n = _init()
    everyone = lambda count, dtype, salt=0: [_data(r, count, dtype, salt) for r in range(n)]  # noqa: E731
    cases = 0
    reference = {"sum": lambda xs: np.sum(xs, axis=0), "prod": lambda xs: np.prod(xs, axis=0),
                 "min": lambda xs: np.min(xs, axis=0), "max": lambda xs: np.max(xs, axis=0),
                 "avg": lambda xs: np.sum(xs, axis=0) / n}
    for dtype in DTYPES:
        for op in ("sum", "prod", "min", "max") + (("avg",) if dtype.startswith("f") else ()):
            xs = everyone(13, dtype)
            t = tb.tensor(xs[rank].copy())
            dist.all_reduce(t, op=op)
            want = reference[op](np.stack(xs)).astype(dtype)
            if op == "avg":  # sum then one scale by 1/n in the dtype: within its rounding
                np.testing.assert_allclose(t.numpy(), want, rtol=np.finfo(dtype).eps * 2,
                                           err_msg=f"all_reduce avg {dtype}")
            else:
                _check(t.numpy(), want, f"all_reduce {op} {dtype}")
            cases += 1
    # non-contiguous: staged through a contiguous copy on the stream and written back
    base = tb.tensor(np.arange(24, dtype="float32").reshape(4, 6) * (rank + 1))
    dist.all_reduce(base.t())
    _check(base.numpy(), np.arange(24, dtype="float32").reshape(4, 6) * sum(range(1, n + 1)),
           "all_reduce of a transposed view")
    xs = everyone(7, "int64", 1)
    t = tb.tensor(xs[rank].copy())
    dist.broadcast(t, src=n - 1)
    _check(t.numpy(), xs[n - 1], "broadcast")
    t = tb.tensor(xs[rank].copy())
    dist.reduce(t, dst=1, op=dist.ReduceOp.MAX)
    _check(t.numpy(), np.max(xs, axis=0) if rank == 1 else xs[rank], "reduce")
    outs = [tb.zeros(7, dtype=tb.int64) for _ in range(n)]
    dist.all_gather(outs, tb.tensor(xs[rank]))
    for r in range(n):
        _check(outs[r].numpy(), xs[r], f"all_gather from {r}")
    out = tb.zeros(7 * n, dtype=tb.int64)
    dist.all_gather_into_tensor(out, tb.tensor(xs[rank]))
    _check(out.numpy(), np.concatenate(xs), "all_gather_into_tensor")
    ys = everyone(5 * n, "float32", 2)
    out = tb.zeros(5)
    dist.reduce_scatter_tensor(out, tb.tensor(ys[rank]))
    _check(out.numpy(), np.sum(ys, axis=0)[5 * rank:5 * rank + 5], "reduce_scatter_tensor")
    out = tb.zeros(5)
    dist.reduce_scatter(out, [tb.tensor(ys[rank][5 * j:5 * j + 5]) for j in range(n)])
    _check(out.numpy(), np.sum(ys, axis=0)[5 * rank:5 * rank + 5], "reduce_scatter")
    gathered = [tb.zeros(7, dtype=tb.int64) for _ in range(n)] if rank == 0 else None
    dist.gather(tb.tensor(xs[rank]), gathered, dst=0)
    if rank == 0:
        for r in range(n):
            _check(gathered[r].numpy(), xs[r], f"gather from {r}")
    out = tb.zeros(7, dtype=tb.int64)
    dist.scatter(out, [tb.tensor(x) for x in xs] if rank == 0 else None, src=0)
    _check(out.numpy(), xs[rank], "scatter")
    # all_to_all: block j of rank i's input goes to rank j
    blocks = lambda r: [np.full(3, 10 * r + j, "int32") for j in range(n)]  # noqa: E731
    outs = [tb.zeros(3, dtype=tb.int32) for _ in range(n)]
    dist.all_to_all(outs, [tb.tensor(b) for b in blocks(rank)])
    for r in range(n):
        _check(outs[r].numpy(), blocks(r)[rank], f"all_to_all from {r}")
    # uneven all_to_all_single: rank r sends j+1 rows to rank j
    send = np.concatenate([np.full((j + 1, 2), 100 * rank + j, "float64") for j in range(n)])
    out = tb.zeros((rank + 1) * n, 2, dtype=tb.float64)
    dist.all_to_all_single(out, tb.tensor(send), output_split_sizes=[rank + 1] * n,
                           input_split_sizes=[j + 1 for j in range(n)])
    want = np.concatenate([np.full((rank + 1, 2), 100 * r + rank, "float64") for r in range(n)])
    _check(out.numpy(), want, "all_to_all_single")
    # point to point around a ring, batched (both directions at once must not deadlock)
    right, left = (rank + 1) % n, (rank - 1) % n
    got = tb.zeros(4)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, tb.full((4,), float(rank)), right),
                                    dist.P2POp(dist.irecv, got, left)])
    for w in works:
        w.wait()
    _check(got.numpy(), np.full(4, float(left)), "batch_isend_irecv")
    # async ops queue on the communication stream in order; wait() makes results visible
    ts = [tb.tensor(np.full(1000, float(rank + k), "float32")) for k in range(6)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for w in works:
        w.wait()
    for k, t in enumerate(ts):
        _check(t.numpy(), np.full(1000, float(sum(r + k for r in range(n))), "float32"),
               f"async all_reduce {k}")
    dist.barrier()
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": r} for r in range(n)]
    with pytest.raises(ValueError, match="no bitwise reductions"):
        dist.all_reduce(tb.ones(3, dtype=tb.int32), op=dist.ReduceOp.BAND)
    dist.destroy_process_group()
    return cases


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_collective_against_numpy(world_size):
    results = run_workers(f"{HERE}:_every_collective", world_size, init=None, timeout=120)
    assert all(r == 31 for r in results)


def _peer_dies(rank, world):
    import os
    import time

    from tensorbrain.testing.nccl_standin import Stream
    _init()
    t = tb.ones(1 << 16)
    dist.all_reduce(t)            # the group works
    if rank == 1:
        # The ranks' calls agree, but this rank's NCCL op waits behind slow work on its stream
        # when it dies: the survivor learns of it from NCCL (the watchdog), not from the check.
        stream = Stream()
        stream.enqueue(lambda: time.sleep(2))
        with stream:
            dist.all_reduce(t, async_op=True)
        os._exit(3)               # dies without a word, as a killed process does
    try:
        dist.all_reduce(t, async_op=True).wait(timeout=60)
    except dist.DistBackendError as exc:
        try:
            dist.all_reduce(t)
        except dist.DistBackendError as later:
            return [str(exc), str(later)]
    return ["no error", ""]


def test_a_dead_peer_fails_the_op_through_the_watchdog_and_poisons_the_group():
    results = run_workers(f"{HERE}:_peer_dies", 2, init=None, timeout=90, raise_on_error=False)
    first, later = results[0].value
    assert "NCCL reported an asynchronous error" in first and "all_reduce (seq 1)" in first, first
    assert "failed earlier" in later, later
    assert results[1].exitcode == 3


def _peer_gone_before_the_call(rank, world):
    import os
    _init()
    t = tb.ones(1000)
    dist.all_reduce(t)
    if rank == 1:
        os._exit(3)
    try:
        dist.all_reduce(t)
    except dist.DistError as exc:
        try:
            dist.broadcast(t, src=0)
        except dist.DistBackendError as later:
            return [type(exc).__name__, str(exc), str(later)]
    return ["no error", "", ""]


def test_a_peer_gone_before_a_collective_is_named_by_the_check_before_nccl_runs():
    """The fingerprints meet on the host before NCCL is called: a rank that is gone fails the
    survivor's next collective there, naming it, and the group is failed as after an NCCL error."""
    results = run_workers(f"{HERE}:_peer_gone_before_the_call", 2, init=None, timeout=90,
                          raise_on_error=False)
    kind, first, later = results[0].value
    assert kind != "no error", results[0].value
    assert first.startswith("all_reduce (seq 1) of group 'default' on rank 0: comparing the "
                            "ranks' calls before NCCL runs failed"), first
    assert "rank 1" in first.split("failed:", 1)[1], first
    assert "failed earlier" in later, later
    assert results[1].exitcode == 3


def _calls_compared(rank, world):
    import time

    from tensorbrain.testing.nccl_standin import Stream
    _init()
    # The host does not wait for the stream: two seconds of work queued on the current stream
    # before a synchronous all_reduce, which returns at once and is ordered after that work.
    stream = Stream()
    stream.enqueue(lambda: time.sleep(2))
    t = tb.tensor(np.full(1000, rank + 1.0, np.float32))
    with stream:
        t0 = time.monotonic()
        dist.all_reduce(t)
        returned = time.monotonic() - t0
    stream.synchronize()
    _check(t.numpy(), np.full(1000, world * (world + 1) / 2, np.float32), "ordered all_reduce")
    # Mismatched calls are refused on every rank before NCCL runs (NCCL could reduce them
    # silently or hang): this rank's count differs from the others'.
    try:
        dist.all_reduce(tb.ones(4 + rank))
        error = None
    except dist.DistError as exc:
        error = str(exc)
    return returned, error


def test_the_calls_are_compared_on_the_host_without_waiting_for_the_gpu():
    results = run_workers(f"{HERE}:_calls_compared", 2, init=None, timeout=90)
    for rank, (returned, error) in enumerate(results):
        assert returned < 1.0, f"rank {rank}: the host waited {returned:.2f} s for the stream"
        assert error is not None and "collective mismatch" in error, error
        assert "float32 x 4" in error and "float32 x 5" in error, error


def _streams_used(rank, world):
    import time

    from tensorbrain.distributed._groups import _default
    from tensorbrain.testing import nccl_standin as S
    _init()
    backend = _default("test").backend
    queued, records = [], []
    queue, record = S._Communicator._queue, S.Event.record

    def queue_seen(comm, ptr, fn):          # which stream each NCCL call is queued on
        queued.append(ptr)
        queue(comm, ptr, fn)

    def record_counted(event, stream=None):  # how many events the backend records
        records.append(1)
        record(event, stream)
    S._Communicator._queue, S.Event.record = queue_seen, record_counted
    stream = S.Stream()
    stream.enqueue(lambda: time.sleep(0.5))   # the caller's earlier work, still running
    x = tb.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) * (rank + 1))
    y = tb.tensor(np.full(5, rank + 1.0, np.float32))
    with stream:
        dist.all_reduce(x.t())                 # synchronous, staged through a copy
        sync_records = len(records)
        work = dist.all_reduce(y, async_op=True)
        async_records = len(records) - sync_records
        work.wait()
    stream.synchronize()
    total = sum(range(1, world + 1))
    _check(x.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) * total, "sync, transposed")
    _check(y.numpy(), np.full(5, total, np.float32), "async")
    return queued == [stream.ptr, backend.stream.ptr], sync_records, async_records


def test_a_synchronous_collective_runs_on_the_callers_stream_an_async_one_on_its_own():
    """As torch's ProcessGroupNCCL since 2.8: with ``async_op=False`` the NCCL call is queued on
    the caller's current stream, whose order is all it needs (one event, for the watchdog);
    with ``async_op=True`` on the group's communication stream, ordered after the caller's by an
    event and waited for by another."""
    for same, sync_records, async_records in run_workers(f"{HERE}:_streams_used", 2, init=None,
                                                         timeout=90):
        assert same, "the NCCL calls were not queued on the caller's stream, then the group's"
        assert (sync_records, async_records) == (1, 2), (sync_records, async_records)


# ***** TB_DISTRIBUTED_DEBUG and TB_TIMELINE mean on nccl what they mean on tcp and mpi *****
def _observed(rank, world):
    import json
    import logging

    from tensorbrain.distributed import _observe
    records = []
    handler = logging.Handler()
    handler.emit = lambda r: records.append(r.getMessage())
    logging.getLogger("tensorbrain.distributed").addHandler(handler)
    _init()
    dist.all_reduce(tb.ones(100))
    dist.broadcast(tb.zeros(10, dtype=tb.float64), src=0)
    # same dtype and count, other shapes: only DETAIL compares shapes (checked on the host,
    # before the kernel, as on a GPU, where NCCL would reduce the mismatched buffers silently)
    try:
        dist.all_reduce(tb.tensor(np.ones((2, 3) if rank == 0 else (3, 2), np.float32)))
        error = None
    except Exception as exc:   # noqa: BLE001  (the test reports whatever was raised)
        error = f"{type(exc).__name__}: {exc}"
    _observe.flush()
    with open(_observe.timeline().path) as f:
        events = [(e["name"], e["args"]["seq"], e["args"]["bytes"])
                  for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
    return error, events, [r for r in records if "(seq " in r]


def test_debug_detail_info_and_timeline_on_the_nccl_backend(tmp_path):
    env = {"TB_DISTRIBUTED_DEBUG": "DETAIL", "TB_TIMELINE": str(tmp_path / "t.json")}
    results = run_workers(f"{HERE}:_observed", 2, init=None, timeout=90, env=env)
    for error, events, logged in results:
        assert error is not None and "[2, 3]" in error and "[3, 2]" in error, error
        assert events[:2] == [("all_reduce", 0, 400), ("broadcast", 1, 80)], events
        # DETAIL includes INFO: one record per collective, as on tcp and mpi
        assert any(r.startswith("all_reduce (seq 0) of group 'default': float32 x 100 (400 B)")
                   for r in logged), logged
