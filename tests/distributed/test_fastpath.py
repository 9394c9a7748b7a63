"""The all_reduce fast path (the pipeline's first step, TCPBackend.fast_all_reduce) against the
general path (TB_FASTPATH=0): the same bits as a NumPy reference, the same sequence numbers (a later
collective over the sockets still matches), the same errors, and the cases it must leave to the
general path (non-contiguous tensors, other ops, async, queued async ops)."""
import numpy as np
import pytest

from tensorbrain.testing.distributed import run_workers

pytest.importorskip("tensorbrain._C")


def _x(rank, n, dtype, seed):
    rng = np.random.default_rng(1000 * seed + rank)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(n).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    return rng.integers(-100, 100, n).astype(dtype)


def w_parity(rank, world):
    """Every eligible (dtype, op) and a few ineligible ones; returns (fast path on, seq)."""
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed import distributed_c10d as c10d
    be = c10d._world().default.backend
    calls = 0
    # flat and reduce-scatter/all-gather shm algorithms; 300_001 spans two 1 MiB chunks (AVG
    # scales each reduced slice inside the reduction: the bits of a sum, then a scale)
    for n in (1, 3, 700, 70_000, 300_001):
        for dtype in ("float32", "float64", "float16", "int32", "int64", "int8", "uint8", "bool"):
            xs = [_x(r, n, dtype, n) for r in range(world)]
            t = tb.tensor(xs[rank].copy())
            dist.all_reduce(t)
            calls += 1
            if dtype == "bool":
                want = np.logical_or.reduce(xs)
            elif dtype == "float16":
                acc = xs[0].astype(np.float32)
                for x in xs[1:]:
                    acc += x
                want = acc.astype(np.float16)
            else:
                want = xs[0].copy()
                for x in xs[1:]:
                    want += x
            np.testing.assert_array_equal(t.numpy(), want, err_msg=f"{dtype} {n}")
            if dtype in ("float32", "float64"):
                t = tb.tensor(xs[rank].copy())
                dist.all_reduce(t, op=dist.ReduceOp.AVG)
                calls += 1
                want = want * want.dtype.type(1.0 / world) if dtype == "float32" else want / world
                np.testing.assert_array_equal(t.numpy(), want)
    # ineligible: a non-contiguous view, MAX, async: the general path, same results
    base = tb.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) * (rank + 1))
    view = base[:, 1]
    dist.all_reduce(view)
    calls += 1
    want = np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1] * sum(range(1, world + 1))
    np.testing.assert_array_equal(base.numpy()[:, 1], want)
    t = tb.tensor(np.array([rank, -rank], np.int64))
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    calls += 1
    np.testing.assert_array_equal(t.numpy(), [world - 1, 0])
    w = dist.all_reduce(tb.ones(5), async_op=True)  # queued: the next sync call waits behind it
    t = tb.ones(5)
    dist.all_reduce(t)
    w.wait()
    calls += 2
    np.testing.assert_array_equal(t.numpy(), np.full(5, world, np.float32))
    # a collective over the sockets after all that: the sequence numbers still agree
    split = [1 + j for j in range(world)]
    src = tb.tensor(np.full(sum(split), rank, np.float32))
    out = tb.zeros(split[rank] * world)
    dist.all_to_all_single(out, src, output_split_sizes=[split[rank]] * world,
                           input_split_sizes=split)
    np.testing.assert_array_equal(out.numpy(), np.repeat(np.arange(world, dtype=np.float32),
                                                         split[rank]))
    return [c10d._world().default.fast is not None, be._ops.seq, calls]


@pytest.mark.parametrize("fast", ["1", "0"])
def test_fast_path_matches_numpy_and_keeps_sequence_numbers(fast, run_id):
    out = run_workers("tests.distributed.test_fastpath:w_parity", 2, timeout=120.0,
                      env={"TB_RUN_ID": run_id, "TB_FASTPATH": fast})
    on, seq, calls = out[0]
    assert on is (fast == "1")
    assert out[0] == out[1]
    assert seq >= calls  # every all_reduce claimed a sequence number on either path


def w_mismatch(rank, world):
    """Rank 0 reduces 4 floats, rank 1 eight: both raise (the shm fingerprint), the group is
    then unusable."""
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed import distributed_c10d as c10d
    res = [c10d._world().default.fast is not None]
    for _ in range(2):
        try:
            dist.all_reduce(tb.ones(4 if rank == 0 else 8))
            res.append("no error")
        except Exception as exc:  # noqa: BLE001 - the error is the result
            res.append(f"{type(exc).__name__}: {exc}")
    return res


@pytest.mark.parametrize("fast", ["1", "0"])
def test_mismatched_sizes_raise_on_both_ranks_on_either_path(fast, run_id):
    out = run_workers("tests.distributed.test_fastpath:w_mismatch", 2, timeout=60.0,
                      group_timeout=20.0, env={"TB_RUN_ID": run_id, "TB_FASTPATH": fast})
    for on, first, later in out:
        assert on is (fast == "1")
        assert first.startswith("DistBackendError"), first
        assert "mismatch" in first and "all_reduce" in first and "seq 0" in first, first
        assert later.startswith("DistBackendError") and "unusable" in later, later
    # the same words on both paths (the rank named differs per rank, not per path)
    assert "16 bytes" in out[0][1] and "32 bytes" in out[0][1]


def w_dies(rank, world):
    import os
    import time

    import tensorbrain as tb
    import tensorbrain.distributed as dist
    t = tb.ones(8)
    dist.all_reduce(t)
    if rank == 1:
        os._exit(3)
    t0 = time.monotonic()
    try:
        dist.all_reduce(t)
    except Exception as exc:  # noqa: BLE001 - the error is the result
        return [type(exc).__name__, str(exc), time.monotonic() - t0]
    return ["no error", "", 0.0]


def test_dead_peer_fails_the_fast_path_naming_the_rank(run_id):
    res = run_workers("tests.distributed.test_fastpath:w_dies", 2, timeout=60.0,
                      group_timeout=20.0, env={"TB_RUN_ID": run_id}, raise_on_error=False)
    assert res[1].exitcode == 3
    kind, msg, waited = res[0].value
    assert kind == "DistBackendError", res[0].value
    assert "group rank 1" in msg and "died" in msg and "all_reduce (seq 1)" in msg, msg
    assert waited < 10.0
