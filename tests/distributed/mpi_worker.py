"""One rank of an MPI test job: ``mpiexec -n N python tests/distributed/mpi_worker.py SCENARIO``.

Started by ``tests/distributed/test_mpi.py`` (never collected by pytest: no ``test_`` prefix).
Every check compares against NumPy computed from what each rank is known to contribute. Each
passing check prints ``PASS <name>``; a failing one raises, which (through the mpi backend's
``MPI_Abort`` hook) ends the whole job at once with a non-zero exit status.

Scenarios:
* ``suite``: the shared collective suite (``collective_suite.check_*``, the same functions the
  tcp backend runs) and the MPI-specific checks below, in one world.
* ``dead``: rank 1 raises before a collective the others are waiting in; the job must end.
* ``timeout``: rank 1 skips a collective; rank 0 must get DistTimeoutError within its timeout.
* ``thread_levels``: MPI initialised at THREAD_FUNNELED refuses calls from other threads.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import tensorbrain as tb  # noqa: E402
import tensorbrain.distributed as dist  # noqa: E402
from tensorbrain.distributed.errors import DistBackendError, DistTimeoutError  # noqa: E402


def contribution(rank: int, shape, dtype, seed: int = 0) -> np.ndarray:
    """What ``rank`` contributes: deterministic, so every rank can compute the reference."""
    rng = np.random.default_rng(1000 * seed + rank)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(-5, 6, shape).astype(dtype)


# ***** MPI-specific checks (the shared suite covers the generic semantics) *****
def check_float16_against_numpy(rank, size):
    # The backend reduces float16 in float32 and rounds once: exactly NumPy's float32 sum of the
    # float16 inputs, rounded to float16, whatever the rank count or MPI's algorithm.
    parts = [contribution(r, (1000,), np.float16, seed=1) * np.float16(100) for r in range(size)]
    wide = np.sum([p.astype(np.float32) for p in parts], axis=0)
    for op, ref in (("sum", wide), ("avg", wide / np.float32(size))):
        t = tb.from_numpy(parts[rank].copy())
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op.upper() if op != "avg" else "AVG"))
        np.testing.assert_array_equal(t._data, ref.astype(np.float16))
    # A sum that overflows float16 partway but not at the end (65504 is float16's max).
    big = np.full(4, 60000.0 if rank == 0 else -59000.0 / max(size - 1, 1), np.float16)
    ref = np.sum([np.full(4, 60000.0 if r == 0 else -59000.0 / max(size - 1, 1), np.float16)
                  .astype(np.float32) for r in range(size)], axis=0).astype(np.float16)
    t = tb.from_numpy(big)
    dist.all_reduce(t)
    np.testing.assert_array_equal(t._data, ref)
    assert np.isfinite(t._data).all()


def check_ops_and_dtypes(rank, size):
    for dtype, ops in ((np.float64, ("sum", "prod", "min", "max", "avg")),
                       (np.float32, ("sum", "max", "avg")),
                       (np.int32, ("sum", "prod", "min", "max")),
                       (np.int64, ("band", "bor", "bxor", "sum")),
                       (np.uint8, ("bor", "max")),
                       (bool, ("sum", "prod", "max", "min"))):
        parts = [contribution(r, (3, 5), dtype, seed=2) for r in range(size)]
        for op in ops:
            ufunc = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum,
                     "max": np.maximum, "band": np.bitwise_and, "bor": np.bitwise_or,
                     "bxor": np.bitwise_xor}[op]
            if dtype is bool:
                ufunc = {"sum": np.logical_or, "max": np.logical_or, "prod": np.logical_and,
                         "min": np.logical_and}[op]
            ref = parts[0].copy()
            for p in parts[1:]:
                ref = ufunc(ref, p)
            if op == "avg":
                ref = ref / size
            t = tb.from_numpy(parts[rank].copy())
            dist.all_reduce(t, op=op)
            np.testing.assert_allclose(t._data, ref, rtol=1e-6 if dtype == np.float32 else 1e-12,
                                       err_msg=f"{np.dtype(dtype).name} {op}")
    try:
        dist.all_reduce(tb.from_numpy(np.zeros(2, np.int32)), op="avg")
    except TypeError as exc:
        assert "AVG needs a floating dtype" in str(exc)
    else:
        raise AssertionError("integer AVG must be refused")


def check_async_out_of_order(rank, size):
    # Five async all_reduces in flight, waited in reverse order, then from another thread
    # (mpi4py asks for MPI_THREAD_MULTIPLE; MPICH grants it).
    tensors = [tb.from_numpy(np.full(1 << k, float(rank + k), np.float32)) for k in range(5)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    for w in reversed(works):
        assert w.wait()
    for k, t in enumerate(tensors):
        np.testing.assert_array_equal(t._data, sum(r + k for r in range(size)))
    t = tb.from_numpy(np.full(8, rank, np.float64))
    w = dist.all_reduce(t, async_op=True)
    errors = []
    thread = threading.Thread(target=lambda: errors.append(None if w.wait() else "no"))
    thread.start()
    thread.join(30)
    assert errors == [None] and w.is_completed()
    np.testing.assert_array_equal(t._data, sum(range(size)))


def check_fingerprints_beyond_the_slots(rank, size):
    # More collectives in flight than the backend has persistent fingerprint all-gathers (16):
    # posting the 17th waits for the 1st; every result still matches NumPy's.
    group = dist.new_group(list(range(size)))
    tensors = [tb.from_numpy(np.full(3, float(rank + k), np.float32)) for k in range(40)]
    works = [dist.all_reduce(t, group=group, async_op=True) for t in tensors]
    for w in reversed(works):
        assert w.wait()
    for k, t in enumerate(tensors):
        np.testing.assert_array_equal(t._data, sum(r + k for r in range(size)))
    if size == 1:
        return  # nothing to disagree with
    # a mismatch (MAX on rank 0, SUM elsewhere) at position 20 of 24 in flight: MPI completes
    # both with a wrong value; the fingerprint must fail that op on every rank
    bad = dist.new_group(list(range(size)))
    tensors = [tb.from_numpy(np.full(3, float(rank + 1), np.float32)) for _ in range(24)]
    works = [dist.all_reduce(t, group=bad, async_op=True,
                             op=dist.ReduceOp.MAX if k == 20 and rank == 0 else dist.ReduceOp.SUM)
             for k, t in enumerate(tensors)]
    for k, w in enumerate(works[:20]):
        assert w.wait()
        np.testing.assert_array_equal(tensors[k]._data, sum(range(1, size + 1)))
    try:
        works[20].wait()
    except DistBackendError as exc:
        assert "mismatch" in str(exc) and "op=max" in str(exc), exc
    else:
        raise AssertionError("a MAX/SUM mismatch among 24 ops in flight went unnoticed")
    dist.barrier()


def check_the_check_mode(rank, size):
    # The group checks collectives inline (one MPI reduction that carries small all_reduces)
    # unless TB_MPI_INLINE_CHECK=0, DETAIL or a missing native module says otherwise: the test
    # that runs both modes must not silently run one twice.
    from tensorbrain import _native
    be = dist.distributed_c10d._default("test").backend
    inner = getattr(be, "_inner", be)
    want = size > 1 and _native.is_available() and \
        os.environ.get("TB_MPI_INLINE_CHECK", "1") != "0" and \
        os.environ.get("TB_DISTRIBUTED_DEBUG", "OFF").upper() != "DETAIL"
    assert inner._fp_inline == want, (inner._fp_inline, want)
    # the process group's fast all_reduce (the pipeline's first step) comes with the inline check
    from tensorbrain.distributed import _groups
    fast = want and os.environ.get("TB_FASTPATH", "1") != "0"
    assert (_groups._WORLD.default.fast is not None) == fast, (_groups._WORLD.default.fast, fast)


def check_default_group_mismatch_last(rank, size):
    # Through dist.all_reduce on the default group (the fast path when it is on): MAX on rank
    # 0, SUM elsewhere, is an error on every rank, and the group is unusable after it. Runs
    # last: it poisons the default group.
    if size == 1:
        return
    t = tb.from_numpy(np.full(2, rank + 1.0, np.float32))
    try:
        dist.all_reduce(t, op=dist.ReduceOp.MAX if rank == 0 else dist.ReduceOp.SUM)
    except DistBackendError as exc:
        assert "mismatch" in str(exc) and "op=max" in str(exc) and "op=sum" in str(exc), exc
    else:
        raise AssertionError(f"MAX against SUM returned {t._data} on rank {rank}")
    try:
        dist.all_reduce(t)
    except DistBackendError as exc:
        assert "mismatch" in str(exc), exc
    else:
        raise AssertionError("the default group must be unusable after a mismatch")


def check_inline_sizes_and_layouts(rank, size):
    # Around the message's payload limit (256 bytes), non-contiguous and 0-d tensors, AVG,
    # async and sync, dtypes the C kernel reduces and ones it leaves to MPI (uint16, float16):
    # every result against NumPy.
    cases = [(np.float32, 64), (np.float32, 65), (np.float64, 32), (np.float64, 33),
             (np.int8, 256), (np.int8, 257), (np.uint16, 3), (np.float16, 5), (np.int64, 1)]
    for k, (dtype, n) in enumerate(cases):
        parts = [contribution(r, (n,), dtype, seed=10 + k) for r in range(size)]
        ref = np.sum(parts, axis=0, dtype=np.float32 if dtype == np.float16 else dtype)
        for async_op in (False, True):
            t = tb.from_numpy(parts[rank].copy())
            w = dist.all_reduce(t, async_op=async_op)
            if async_op:
                w.wait()
            # floats: MPI's summation order is its own (exact for integers)
            tol = 4 * np.finfo(dtype).eps if np.dtype(dtype).kind == "f" else 0
            np.testing.assert_allclose(t._data, ref.astype(dtype), rtol=tol, atol=tol,
                                       err_msg=f"{np.dtype(dtype).name} x {n}")
    x = np.zeros((4, 6), np.float64)
    x[:, 1] = np.arange(4) + rank  # a column: non-contiguous
    t = tb.from_numpy(x)
    dist.all_reduce(t[:, 1], op=dist.ReduceOp.AVG)
    np.testing.assert_allclose(t._data[:, 1], np.arange(4) + (size - 1) / 2)
    np.testing.assert_array_equal(t._data[:, 0], 0)
    for shape in ((0,), (0, 3)):  # empty: nothing to reduce, and no error
        e = tb.from_numpy(np.zeros(shape, np.float32))
        dist.all_reduce(e)
        assert e.shape == shape
    ro = np.ones(2, np.float32)
    ro.flags.writeable = False
    for n in (2, 1 << 16):  # read-only: a clear error before anything is posted, on every rank
        arr = np.broadcast_to(np.float32(1), (n,)) if n > 2 else ro
        try:
            dist.all_reduce(tb.from_numpy(arr))
        except ValueError as exc:
            assert "read-only" in str(exc), exc
        else:
            raise AssertionError("all_reduce into a read-only array must be refused")
    t = tb.ones(3)
    dist.all_reduce(t)  # the group is still usable
    np.testing.assert_array_equal(t._data, size)
    s = tb.tensor(np.float32(rank + 1))  # 0-d
    dist.all_reduce(s, op=dist.ReduceOp.MAX)
    assert float(s) == size


def check_nan_in_min_max(rank, size):
    # MIN/MAX of floats with a NaN on some rank: NaN on every rank, as NumPy (and tcp) give,
    # at every size (inline up to 256 bytes, MPI's reduction above) and for float16 (reduced
    # in float32). MPICH's own MPI_MIN/MPI_MAX gave nan on one rank and 1.0 on the other
    # (found by fault injection); the group uses NaN-propagating ops when every rank has
    # tensorbrain._C.
    from tensorbrain import _native
    for dtype in (np.float32, np.float64, np.float16):
        for n in (1, 65, 1 << 15):
            parts = [np.full(n, np.nan if r == 0 else float(r), dtype) for r in range(size)]
            parts = [p.copy() for p in parts]
            for r in range(size):
                parts[r][1::2] = r + 0.5  # odd elements: numbers everywhere
            for op, ufunc in (("MIN", np.minimum), ("MAX", np.maximum)):
                ref = parts[0]
                for p in parts[1:]:
                    ref = ufunc(ref, p)
                t = tb.from_numpy(parts[rank].copy())
                dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
                if not _native.is_available():
                    continue  # MPI's own MIN/MAX: NaN handling is MPICH's (documented)
                np.testing.assert_array_equal(t._data, ref, err_msg=f"{dtype} x {n} {op}")
    # reduce to a root takes the same ops
    t = tb.from_numpy(np.full(70, np.nan if rank == size - 1 else 1.0, np.float32))
    dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
    if rank == 0:
        assert np.isnan(t._data).all() or size == 1, t._data


def check_inline_mismatches(rank, size):
    # A small all_reduce on rank 0 against a big one (or another collective) elsewhere: the two
    # take different paths through the backend, and must still meet in the check and both fail.
    if size == 1:
        return
    for other in ("big", "broadcast", "all_gather"):
        g = dist.new_group(list(range(size)))
        small = tb.from_numpy(np.ones(4, np.float32))
        try:
            if rank == 0:
                dist.all_reduce(small, group=g)
            elif other == "big":
                dist.all_reduce(tb.from_numpy(np.ones(1 << 18, np.float32)), group=g)
            elif other == "broadcast":
                dist.broadcast(small, src=1, group=g)
            else:
                dist.all_gather([tb.zeros(4) for _ in range(size)], small, group=g)
        except DistBackendError as exc:
            assert "mismatch" in str(exc) and "rank 0: all_reduce" in str(exc), str(exc)
        else:
            raise AssertionError(f"small all_reduce vs {other}: no error on rank {rank}")


def check_new_group_splits(rank, size):
    # Every rank calls new_group in the same order (as torch); members get communicators.
    first_last = dist.new_group(sorted({0, size - 1}))
    odd = dist.new_group([r for r in range(size) if r % 2 == 1] or [0])
    if rank in (0, size - 1):
        t = tb.from_numpy(np.array([rank], np.int64))
        dist.all_reduce(t, group=first_last)
        assert t._data.tolist() == [0 + (size - 1) if size > 1 else 0]
        assert dist.get_world_size(first_last) == len({0, size - 1})
    else:
        assert first_last is dist.GroupMember.NON_GROUP_MEMBER
    members = [r for r in range(size) if r % 2 == 1] or [0]
    if rank in members:
        t = tb.from_numpy(np.array([1.0]))
        dist.broadcast(t, src=members[-1], group=odd)
        dist.all_reduce(t, group=odd)
        assert t._data.tolist() == [float(len(members))]
    dist.barrier()


def check_noncontiguous_and_p2p(rank, size):
    base = contribution(rank, (6, 8), np.float64, seed=3)
    view = base[::2, 1::3]
    dist.all_reduce(tb.Tensor._wrap(view))
    ref = np.sum([contribution(r, (6, 8), np.float64, seed=3)[::2, 1::3] for r in range(size)], 0)
    np.testing.assert_allclose(view, ref)
    if size >= 2:  # ring exchange with isend/irecv: no deadlock, right sources
        out = tb.from_numpy(np.full(5, rank, np.int16))
        inbox = tb.from_numpy(np.zeros(5, np.int16))
        works = [dist.isend(out, (rank + 1) % size, tag=7), dist.irecv(inbox, None, tag=7)]
        for w in works:
            w.wait()
        assert (inbox._data == (rank - 1) % size).all()
        assert works[1].result() == (rank - 1) % size


def check_aliased_in_place_forms(rank, size):
    # torch's in-place idioms: the output is a block of the input (reduce_scatter_tensor) or the
    # input is this rank's block of the output (all_gather_into_tensor). MPI forbids aliased
    # send and receive buffers, so the backend must copy instead of failing.
    m = 3
    full = np.stack([contribution(r, (size * m,), np.float64, seed=4) for r in range(size)])
    inp = full[rank].copy()
    out = inp[rank * m:(rank + 1) * m]
    dist.reduce_scatter_tensor(tb.Tensor._wrap(out), tb.Tensor._wrap(inp))
    np.testing.assert_allclose(out, full.sum(0)[rank * m:(rank + 1) * m])
    gathered = np.zeros(size * m)
    gathered[rank * m:(rank + 1) * m] = full[rank, :m]
    dist.all_gather_into_tensor(tb.Tensor._wrap(gathered),
                                tb.Tensor._wrap(gathered[rank * m:(rank + 1) * m]))
    np.testing.assert_array_equal(gathered, full[:, :m].reshape(-1))


def check_mpi_error_becomes_dist_backend_error(rank, size):
    # A receive into a buffer too small for the message: MPI's own error (MPI_ERR_TRUNCATE)
    # must surface as DistBackendError with MPI's error string. On a private group, since a
    # failed group is poisoned.
    pair = dist.new_group([0, 1])
    if rank == 0:
        dist.send(tb.from_numpy(np.arange(16, dtype=np.float64)), 1, group=pair)
    elif rank == 1:
        try:
            dist.recv(tb.from_numpy(np.zeros(2, np.float64)), 0, group=pair)
        except DistBackendError as exc:
            text = str(exc)
            assert "truncat" in text.lower() and "recv" in text, text
            try:
                dist.barrier(group=pair)
            except DistBackendError as again:
                assert "failed earlier" in str(again)
            else:
                raise AssertionError("a failed group must refuse later ops")
        else:
            raise AssertionError("a truncated receive must raise DistBackendError")
    dist.barrier()


MPI_CHECKS = [check_float16_against_numpy, check_ops_and_dtypes, check_async_out_of_order,
              check_fingerprints_beyond_the_slots,
              check_new_group_splits, check_noncontiguous_and_p2p, check_aliased_in_place_forms,
              check_mpi_error_becomes_dist_backend_error, check_the_check_mode,
              check_inline_sizes_and_layouts, check_nan_in_min_max, check_inline_mismatches,
              check_default_group_mismatch_last]


def report(line: str) -> None:
    """Print ``line``, and append it to ``$TB_MPI_TEST_OUT/rank<r>.txt`` when set: mpiexec merges
    the ranks' stdout and may split lines, so the test reads the per-rank files."""
    print(line, flush=True)
    folder = os.environ.get("TB_MPI_TEST_OUT")
    if folder:
        if dist.is_initialized():
            rank = dist.get_rank()
        else:  # a group that failed to start: MPI's own rank (0 in a singleton)
            mpi = sys.modules.get("mpi4py.MPI")
            rank = mpi.COMM_WORLD.Get_rank() if mpi is not None else 0
        with open(os.path.join(folder, f"rank{rank}.txt"), "a") as f:
            f.write(line + "\n")


def shared_suite():
    """``check_<op>(rank, size, backend_name)`` functions of the shared collective suite."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import collective_suite
    except ImportError:
        return []
    checks = getattr(collective_suite, "ALL_CHECKS", None)
    if checks is None:
        checks = [getattr(collective_suite, n) for n in sorted(dir(collective_suite))
                  if n.startswith("check_") and callable(getattr(collective_suite, n))]
    return list(checks)


def run_suite() -> None:
    dist.init_process_group("mpi", timeout=60)
    rank, size = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "mpi"
    for check in shared_suite():
        check(rank, size, "mpi")
        report(f"PASS suite.{check.__name__}")
    if tb.cuda.is_available():  # CuPy tensors through MPI (CUDA-aware or staged via the host)
        import collective_suite
        collective_suite.check_cuda(rank, size, "mpi")
        report("PASS suite.check_cuda")
    for check in MPI_CHECKS:
        if check is check_mpi_error_becomes_dist_backend_error and size < 2:
            continue
        check(rank, size)
        report(f"PASS mpi.{check.__name__}")
    dist.destroy_process_group()


def run_dead() -> None:
    dist.init_process_group("mpi", timeout=60)
    if dist.get_rank() == 1:
        raise RuntimeError("rank 1 dies on purpose")
    dist.all_reduce(tb.ones(4))  # the others wait here until MPI_Abort ends them
    print("UNREACHABLE: all_reduce returned without rank 1", flush=True)


def run_timeout() -> None:
    dist.init_process_group("mpi", timeout=1.0)
    rank = dist.get_rank()
    # monitored_barrier names the late rank (on rank 0) and tells the late rank so
    if rank == 1:
        time.sleep(1.5)
    try:
        dist.monitored_barrier(timeout=0.5)
    except DistTimeoutError as exc:
        assert "rank(s) [1] did not arrive" in str(exc), str(exc)
        report(f"PASS monitored_barrier rank {rank}: {exc}")
    else:
        raise AssertionError("monitored_barrier must name the late rank")
    if rank == 0:
        start = time.monotonic()
        work = dist.all_reduce(tb.ones(4), async_op=True)
        try:  # a wait with its own timeout gives up, the op goes on...
            work.wait(timeout=0.2)
        except DistTimeoutError as exc:
            assert "Work.wait timed out after 0.2 s" in str(exc), str(exc)
            report(f"PASS Work.wait timeout: {exc}")
        try:  # ...until the group timeout fails it
            work.wait()
        except DistTimeoutError as exc:
            elapsed = time.monotonic() - start
            assert 0.9 <= elapsed < 10, elapsed
            assert "group timeout" in str(exc) and "all_reduce" in str(exc), str(exc)
            report(f"PASS timeout after {elapsed:.2f} s: {exc}")
    # No clean finalize is possible with a collective still posted on rank 0: end the job.
    sys.stdout.flush()
    from mpi4py import MPI
    MPI.COMM_WORLD.Barrier()
    MPI.COMM_WORLD.Abort(0)


def run_thread_levels() -> None:
    """MPI initialised by the user at THREAD_FUNNELED: calls from the main thread work, calls
    from another thread are refused with a clear error instead of corrupting MPI."""
    import mpi4py
    mpi4py.rc.thread_level = "funneled"
    from mpi4py import MPI
    assert MPI.Query_thread() == MPI.THREAD_FUNNELED
    dist.init_process_group("mpi", timeout=30)
    t = tb.ones(3)
    dist.all_reduce(t)
    errors = []

    def other_thread():
        try:
            dist.all_reduce(tb.ones(3))
        except DistBackendError as exc:
            errors.append(str(exc))
    thread = threading.Thread(target=other_thread, name="worker-thread")
    thread.start()
    thread.join(30)
    assert len(errors) == 1 and "THREAD_FUNNELED" in errors[0] and "worker-thread" in errors[0], errors
    report(f"PASS funneled: {errors[0]}")
    dist.destroy_process_group()


def run_modes() -> None:
    # Started with TB_MPI_INLINE_CHECK=0 on rank 0 only: the ranks agree on the all-gather
    # check when the group is made, and collectives work. With TB_DISTRIBUTED_DEBUG=DETAIL on
    # rank 0 only, making the group fails on every rank, naming the setting.
    want = os.environ["TB_MPI_MODES"]
    try:
        dist.init_process_group("mpi", timeout=30)
    except DistBackendError as exc:
        assert want == "detail" and "TB_DISTRIBUTED_DEBUG=DETAIL is set on rank(s) [0]" in str(exc)
        report(f"PASS modes: {exc}")
        return
    assert want == "inline", want
    inner = dist.distributed_c10d._default("test").backend
    assert inner._fp_inline is False
    t = tb.ones(3)
    dist.all_reduce(t)
    np.testing.assert_array_equal(t._data, dist.get_world_size())
    report("PASS modes: agreed on the all-gather check")
    dist.destroy_process_group()


if __name__ == "__main__":
    {"suite": run_suite, "dead": run_dead, "timeout": run_timeout,
     "thread_levels": run_thread_levels, "modes": run_modes}[sys.argv[1]]()
