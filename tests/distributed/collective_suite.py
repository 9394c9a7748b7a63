"""Collective checks that run inside an already-initialised process group, on any backend.

Each ``check_<op>(rank, size, backend_name)`` builds per-rank inputs that every rank can
recompute (seeded by rank), runs the collective through ``tb.distributed``, and compares with a
NumPy reference; it raises AssertionError naming the op, dtype, op, size and rank on a mismatch
and returns how many cases it checked. They know nothing about the launcher: the tcp tests run
them under ``tensorbrain.testing.distributed.run_workers``; the mpi tests run them under
``mpiexec``. ``run_all`` runs every check in one world (one launch per world size keeps the suite
fast on 2 cores).

Data are small integers (also for floats), so sums are exact whatever the reduction order and the
reference is exact; int8 sums wrap as in NumPy (and torch).
"""
from __future__ import annotations

import time

import numpy as np

import tensorbrain as tb
import tensorbrain.distributed as dist

DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int16", "int32", "int64"]
OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "prod": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX, "band": dist.ReduceOp.BAND,
       "bor": dist.ReduceOp.BOR, "bxor": dist.ReduceOp.BXOR}
# Small counts take the latency path, LARGE ones the ring/chain paths of the tcp backend (its
# thresholds are 1-2 MiB, its frames 1 MiB); odd counts make uneven chunks.
SMALL = (1, 13)
LARGE = 300_007
RING = 700_001   # all_reduce: > 2 MiB per rank for 4-byte dtypes even at 2 ranks


def ops_for(dtype: str) -> list:
    kind = np.dtype(dtype).kind
    names = ["sum", "prod", "min", "max"]
    if kind == "f":
        names.append("avg")
    else:
        names += ["band", "bor", "bxor"]
    return names


def data(rank: int, count: int, dtype: str, salt: int = 0, op: str = "sum") -> np.ndarray:
    """Rank-specific inputs every rank can recompute; small values keep products in range."""
    rng = np.random.default_rng([rank, count, salt, DTYPES.index(dtype) if dtype in DTYPES else 0])
    if op == "prod":
        vals = rng.choice(np.array([1, 2, 1, 1]), size=count)
        if np.dtype(dtype).kind in "if":
            vals = vals * rng.choice(np.array([1, -1]), size=count)
    else:
        lo = 0 if np.dtype(dtype).kind == "u" else -8
        vals = rng.integers(lo, 9, size=count)
    return vals.astype(dtype)


def reference(inputs: list, op: str) -> np.ndarray:
    stack = np.stack(inputs)
    if op == "sum":
        return stack.sum(axis=0, dtype=stack.dtype)
    if op == "avg":
        return (stack.astype(np.float64).sum(axis=0) / len(inputs)).astype(stack.dtype)
    if op == "prod":
        return stack.prod(axis=0, dtype=stack.dtype)
    if op == "min":
        return stack.min(axis=0)
    if op == "max":
        return stack.max(axis=0)
    fn = {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op]
    return fn.reduce(stack, axis=0)


def assert_equal(got, want, what: str, rank: int, tol: bool = False) -> None:
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        raise AssertionError(f"{what} on rank {rank}: shape {got.shape}, expected {want.shape}")
    if tol:
        rtol = 2e-3 if got.dtype == np.float16 else 1e-6
        ok = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=rtol)
    else:
        ok = np.array_equal(got, want)
    if not ok:
        bad = np.flatnonzero(~np.isclose(got.astype(np.float64).ravel(),
                                         want.astype(np.float64).ravel()))[:5]
        raise AssertionError(f"{what} on rank {rank}: wrong at flat indices {bad.tolist()}: "
                             f"got {got.ravel()[bad].tolist()} expected {want.ravel()[bad].tolist()}")


def T(arr) -> tb.Tensor:
    return tb.Tensor._wrap(np.array(arr))


# ***** the checks *****
def check_all_reduce(rank, size, backend_name):
    n = 0
    for dtype in DTYPES:
        for op in ops_for(dtype):
            for count in SMALL:
                inputs = [data(r, count, dtype, op=op) for r in range(size)]
                t = T(inputs[rank])
                dist.all_reduce(t, op=OPS[op])
                assert_equal(t._data, reference(inputs, op), f"all_reduce {op} {dtype} x{count}",
                             rank, tol=(op == "avg"))
                n += 1
    for dtype, op in [("float32", "sum"), ("float32", "max"), ("float16", "sum"),
                      ("int64", "sum"), ("float64", "avg"), ("int32", "bxor"), ("uint8", "min")]:
        count = RING * (2 if np.dtype(dtype).itemsize < 4 else 1)
        inputs = [data(r, count, dtype, salt=1, op=op) for r in range(size)]
        t = T(inputs[rank])
        dist.all_reduce(t, op=OPS[op])
        assert_equal(t._data, reference(inputs, op), f"all_reduce {op} {dtype} x{count}", rank,
                     tol=(op == "avg"))
        n += 1
    # non-contiguous input: a transposed view is reduced and written back in place
    base = np.arange(48, dtype=np.float32).reshape(6, 8) * (rank + 1)
    t = tb.Tensor._wrap(base.T)
    dist.all_reduce(t)
    assert_equal(base.T, np.arange(48, dtype=np.float32).reshape(6, 8).T * (size * (size + 1) / 2),
                 "all_reduce non-contiguous", rank)
    # float16 AVG of values near the float16 maximum must not overflow on the way
    t = T(np.full(5, 60000.0, dtype=np.float16))
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert_equal(t._data, np.full(5, 60000.0, dtype=np.float16), "all_reduce avg float16 big",
                 rank, tol=True)
    big = T(np.full(2 * RING, 60000.0, dtype=np.float16))
    dist.all_reduce(big, op=dist.ReduceOp.AVG)
    assert_equal(big._data, np.full(2 * RING, 60000.0, dtype=np.float16),
                 "all_reduce avg float16 big (ring)", rank, tol=True)
    # 0-d and multi-dimensional tensors
    t = T(np.float64(rank))
    dist.all_reduce(t)
    assert_equal(t._data, np.float64(size * (size - 1) / 2), "all_reduce 0-d", rank)
    return n + 4


def check_broadcast(rank, size, backend_name):
    n = 0
    for count in (1, 1000, LARGE):
        for dtype in ("float32", "int64", "float16", "uint8"):
            for root in range(size):
                want = data(root, count, dtype, salt=2)
                t = T(want if rank == root else np.zeros(count, dtype))
                dist.broadcast(t, src=root)
                assert_equal(t._data, want, f"broadcast {dtype} x{count} root {root}", rank)
                n += 1
    return n


def check_reduce(rank, size, backend_name):
    n = 0
    for count in (7, LARGE):
        for dtype, op in [("float32", "sum"), ("int32", "max"), ("float16", "sum"),
                          ("int64", "prod"), ("float64", "avg"), ("uint8", "bor")]:
            for root in range(size):
                inputs = [data(r, count, dtype, salt=3, op=op) for r in range(size)]
                t = T(inputs[rank])
                dist.reduce(t, dst=root, op=OPS[op])
                want = reference(inputs, op) if rank == root else inputs[rank]
                assert_equal(t._data, want, f"reduce {op} {dtype} x{count} root {root}", rank,
                             tol=(op == "avg"))
                n += 1
    return n


def check_all_gather(rank, size, backend_name):
    n = 0
    for count in (3, LARGE):
        for dtype in ("float32", "int8", "float64"):
            inputs = [data(r, count, dtype, salt=4) for r in range(size)]
            outs = [T(np.zeros(count, dtype)) for _ in range(size)]
            dist.all_gather(outs, T(inputs[rank]))
            for j in range(size):
                assert_equal(outs[j]._data, inputs[j], f"all_gather {dtype} x{count} [{j}]", rank)
            out = T(np.zeros((size, count), dtype))
            dist.all_gather_into_tensor(out, T(inputs[rank]))
            assert_equal(out._data, np.stack(inputs), f"all_gather_into_tensor {dtype} x{count}",
                         rank)
            n += 2
    return n


def check_gather_scatter(rank, size, backend_name):
    n = 0
    for root in range(size):
        for count in (2, 50_000):
            inputs = [data(r, count, "float32", salt=5) for r in range(size)]
            outs = [T(np.zeros(count, np.float32)) for _ in range(size)] if rank == root else None
            dist.gather(T(inputs[rank]), outs, dst=root)
            if rank == root:
                for j in range(size):
                    assert_equal(outs[j]._data, inputs[j], f"gather x{count} root {root}", rank)
            chunks = [data(j, count, "int32", salt=6 + root) for j in range(size)]
            out = T(np.zeros(count, np.int32))
            dist.scatter(out, [T(c) for c in chunks] if rank == root else None, src=root)
            assert_equal(out._data, chunks[rank], f"scatter x{count} root {root}", rank)
            n += 2
    return n


def check_reduce_scatter(rank, size, backend_name):
    n = 0
    for count in (5, LARGE):
        for dtype, op in [("float32", "sum"), ("int64", "min"), ("float16", "sum"),
                          ("float64", "avg"), ("int32", "bxor")]:
            inputs = [[data(r, count, dtype, salt=10 + j, op=op) for j in range(size)]
                      for r in range(size)]
            out = T(np.zeros(count, dtype))
            dist.reduce_scatter(out, [T(x) for x in inputs[rank]], op=OPS[op])
            want = reference([inputs[r][rank] for r in range(size)], op)
            assert_equal(out._data, want, f"reduce_scatter {op} {dtype} x{count}", rank,
                         tol=(op == "avg"))
            flat_in = T(np.concatenate(inputs[rank]))
            before = flat_in._data.copy()
            out2 = T(np.zeros(count, dtype))
            dist.reduce_scatter_tensor(out2, flat_in, op=OPS[op])
            assert_equal(out2._data, want, f"reduce_scatter_tensor {op} {dtype} x{count}", rank,
                         tol=(op == "avg"))
            assert_equal(flat_in._data, before, "reduce_scatter_tensor leaves its input", rank)
            n += 2
    return n


def check_all_to_all(rank, size, backend_name):
    n = 0
    for count in (3, 60_000):
        ins = [data(rank, count, "float32", salt=20 + j) for j in range(size)]
        outs = [T(np.zeros(count, np.float32)) for _ in range(size)]
        dist.all_to_all(outs, [T(x) for x in ins])
        for j in range(size):
            assert_equal(outs[j]._data, data(j, count, "float32", salt=20 + rank),
                         f"all_to_all x{count} from {j}", rank)
        n += 1
    # all_to_all_single, even split, 2-D rows
    rows = 2 * size
    x = T((np.arange(rows * 3).reshape(rows, 3) + 100 * rank).astype(np.int64))
    y = T(np.zeros((rows, 3), np.int64))
    dist.all_to_all_single(y, x)
    want = np.concatenate([(np.arange(rows * 3).reshape(rows, 3) + 100 * j)[2 * rank:2 * rank + 2]
                           for j in range(size)])
    assert_equal(y._data, want, "all_to_all_single even", rank)
    # uneven splits: rank r sends (j + 1) rows to rank j, so receives (rank + 1) rows from each
    in_splits = [j + 1 for j in range(size)]
    out_splits = [rank + 1] * size
    x = T(np.concatenate([np.full(j + 1, 10 * rank + j, np.float64) for j in range(size)]))
    y = T(np.zeros(sum(out_splits), np.float64))
    dist.all_to_all_single(y, x, out_splits, in_splits)
    want = np.concatenate([np.full(rank + 1, 10 * j + rank, np.float64) for j in range(size)])
    assert_equal(y._data, want, "all_to_all_single uneven", rank)
    return n + 2


def check_barrier(rank, size, backend_name):
    for _ in range(3):
        dist.barrier()
    # the last rank arrives late: nobody may leave the barrier before it arrives
    if rank == size - 1:
        time.sleep(0.3)
    t0 = time.monotonic()
    dist.barrier()
    waited = time.monotonic() - t0
    if size > 1 and rank != size - 1 and waited < 0.2:
        raise AssertionError(f"barrier on rank {rank} returned after {waited:.3f} s, before the "
                             f"late rank arrived")
    dist.monitored_barrier(timeout=30)
    return 5


def check_send_recv(rank, size, backend_name):
    if size == 1:
        return 0
    right, left = (rank + 1) % size, (rank - 1) % size
    n = 0
    for count in (4, 600_000):  # 2.4 MB: bigger than socket buffers both ways at once
        out = T(data(rank, count, "float32", salt=30))
        got = T(np.zeros(count, np.float32))
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, out, right),
                                        dist.P2POp(dist.irecv, got, left)])
        for w in works:
            w.wait()
        assert_equal(got._data, data(left, count, "float32", salt=30), f"ring exchange x{count}",
                     rank)
        n += 1
    # blocking send/recv between rank 0 and every other rank, two tags sent out of order
    if rank == 0:
        for j in range(1, size):
            dist.send(T(np.full(3, j, np.int32)), dst=j, tag=7)
            dist.send(T(np.full(2, -j, np.int32)), dst=j, tag=9)
    else:
        b = T(np.zeros(2, np.int32))
        a = T(np.zeros(3, np.int32))
        assert dist.recv(b, src=0, tag=9) == 0   # tag 9 arrives second: tag 7 gets stashed
        assert_equal(b._data, np.full(2, -rank, np.int32), "recv tag 9", rank)
        dist.recv(a, src=0, tag=7)
        assert_equal(a._data, np.full(3, rank, np.int32), "recv tag 7", rank)
    n += 1
    # recv from any source: rank 0 collects one message from everyone, in arrival order
    if rank == 0:
        seen = set()
        for _ in range(size - 1):
            buf = T(np.zeros(1, np.int64))
            src = dist.recv(buf, tag=3)
            assert int(buf._data[0]) == 1000 + src, (src, buf._data)
            seen.add(src)
        assert seen == set(range(1, size)), seen
    else:
        dist.isend(T(np.array([1000 + rank], np.int64)), dst=0, tag=3).wait()
    n += 1
    # recv from any source that meets another tag's message first: that one waits for its recv
    if rank == 1:
        dist.send(T(np.array([5], np.int64)), dst=0, tag=5)
        dist.send(T(np.array([6], np.int64)), dst=0, tag=6)
    elif rank == 0:
        five, six = T(np.zeros(1, np.int64)), T(np.zeros(1, np.int64))
        assert dist.recv(six, tag=6) == 1 and int(six._data[0]) == 6, six._data
        assert dist.recv(five, src=1, tag=5) == 1 and int(five._data[0]) == 5, five._data
    n += 1
    dist.barrier()
    return n


def check_async_ordering(rank, size, backend_name):
    """Async ops run in issue order; waiting in any order gives each its own result."""
    tensors = [T(np.full(1000 * (i + 1), float(rank + i), np.float32)) for i in range(6)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    # a synchronous op issued after the async ones waits behind them, in order
    s = T(np.array([rank], np.int64))
    dist.all_reduce(s)
    for i, w in reversed(list(enumerate(works))):
        w.wait()
        assert w.is_completed()
        want = sum(float(r + i) for r in range(size))
        assert_equal(tensors[i]._data, np.full(1000 * (i + 1), want, np.float32),
                     f"async all_reduce #{i}", rank)
    assert int(s._data[0]) == size * (size - 1) // 2
    b = T(np.arange(10, dtype=np.float32) if rank == 0 else np.zeros(10, np.float32))
    w = dist.broadcast(b, src=0, async_op=True)
    w.wait(timeout=30)
    assert w.result()[0] is b   # torch: result() is the output tensors
    assert_equal(b._data, np.arange(10, dtype=np.float32), "async broadcast", rank)
    return len(works) + 2


def check_object_collectives(rank, size, backend_name):
    objs = [{"rank": 0, "name": "zero", "arr": np.arange(3)}, (1, 2.5, None), b"\x00\xff", [True]]
    lst = objs if rank == 0 else [None] * len(objs)
    dist.broadcast_object_list(lst, src=0)
    assert lst[1] == (1, 2.5, None) and lst[2] == b"\x00\xff" and lst[3] == [True], lst
    assert lst[0]["arr"].tolist() == [0, 1, 2]
    mine = {"rank": rank, "payload": "x" * (rank * 100), "t": tb.tensor([float(rank)])}
    gathered = [None] * size
    dist.all_gather_object(gathered, mine)
    for j, g in enumerate(gathered):
        assert g["rank"] == j and len(g["payload"]) == 100 * j and g["t"].item() == float(j), g
    dst = size - 1
    out = [None] * size if rank == dst else None
    dist.gather_object(("r", rank), out, dst=dst)
    if rank == dst:
        assert out == [("r", j) for j in range(size)], out
    recv = [None]
    dist.scatter_object_list(recv, [{"to": j} for j in range(size)] if rank == 0 else None, src=0)
    assert recv[0] == {"to": rank}, recv
    try:
        dist.all_gather_object([None] * size, object())
    except TypeError as exc:
        assert "data only" in str(exc)
    else:
        raise AssertionError("all_gather_object(object()) should raise TypeError")
    return 5


def check_new_group(rank, size, backend_name):
    evens = list(range(0, size, 2))
    odds = list(range(1, size, 2))
    g_even = dist.new_group(evens)
    g_odd = dist.new_group(odds) if odds else None
    pair_a = dist.new_group([0, 1]) if size >= 2 else None
    pair_b = dist.new_group([1, 2]) if size >= 3 else None   # overlaps pair_a at rank 1
    n = 0
    mine, members = (g_even, evens) if rank % 2 == 0 else (g_odd, odds)
    t = T(np.array([rank + 1], np.int64))
    dist.all_reduce(t, group=mine)
    assert int(t._data[0]) == sum(r + 1 for r in members), (t._data, members)
    assert dist.get_rank(mine) == members.index(rank)
    assert dist.get_world_size(mine) == len(members)
    n += 1
    other = g_odd if rank % 2 == 0 else g_even
    if other is not None:
        assert dist.get_rank(other) == -1
        assert dist.all_reduce(T(np.zeros(1)), group=other) is None   # non-members skip
    # overlapping pairs: rank 1 is in both and alternates between them, async
    for g, members in ((pair_a, [0, 1]), (pair_b, [1, 2])):
        if g is None or rank not in members:
            continue
        x = T(np.array([10.0 * rank], np.float64))
        w = dist.all_reduce(x, group=g, async_op=True)
        b = T(np.array([7.0]) if rank == members[-1] else np.zeros(1))
        dist.broadcast(b, src=members[-1], group=g)
        w.wait()
        assert float(x._data[0]) == 10.0 * sum(members), (x._data, members)
        assert float(b._data[0]) == 7.0
        n += 1
    if size >= 2:
        sub = pair_a
        if rank in (0, 1):
            v = T(np.array([5.0]) if rank == 1 else np.zeros(1))
            if rank == 1:
                dist.send(v, dst=0, group=sub)
            else:
                assert dist.recv(v, src=1, group=sub) == 1
                assert float(v._data[0]) == 5.0
    dist.barrier()
    for g in (g_even, g_odd, pair_a, pair_b):
        if g is not None and g is not dist.GroupMember.NON_GROUP_MEMBER:
            dist.destroy_process_group(g)
    return n


def check_cuda(rank, size, backend_name):
    """CUDA tensors (CPU backends stage them through host memory); run only with a GPU."""
    from tensorbrain import _xp
    n = 0
    for count in (5, RING):
        inputs = [data(r, count, "float32") for r in range(size)]
        t = tb.tensor(inputs[rank], device="cuda")
        dist.all_reduce(t)
        assert_equal(_xp.to_numpy(t._data), reference(inputs, "sum"), f"cuda all_reduce x{count}",
                     rank)
        b = tb.tensor(inputs[rank], device="cuda")
        dist.broadcast(b, src=size - 1)
        assert_equal(_xp.to_numpy(b._data), inputs[size - 1], f"cuda broadcast x{count}", rank)
        outs = [tb.tensor(np.zeros(count, np.float32), device="cuda") for _ in range(size)]
        dist.all_gather(outs, tb.tensor(inputs[rank], device="cuda"))
        for j in range(size):
            assert_equal(_xp.to_numpy(outs[j]._data), inputs[j], f"cuda all_gather x{count}", rank)
        n += 3
    return n


def check_random_sequence(rank, size, backend_name, steps=120):
    """A seeded random mix of collectives, sizes, dtypes, async and sync calls and p2p, the same
    sequence on every rank; each result checked. Catches ordering and framing bugs that fixed
    patterns miss."""
    rng = np.random.default_rng(1234)  # the same stream on every rank
    pending = []
    n = 0
    for step in range(steps):
        kind = rng.choice(["all_reduce", "broadcast", "all_gather", "reduce_scatter",
                           "all_to_all", "barrier", "p2p"])
        count = int(rng.choice([1, 3, 17, 1000, 70_000]))
        dtype = str(rng.choice(["float32", "int64", "float16", "uint8"]))
        async_op = bool(rng.integers(0, 2))
        salt = 100 + step
        if kind == "all_reduce":
            op = "max" if dtype == "uint8" else "sum"
            inputs = [data(r, count, dtype, salt=salt, op=op) for r in range(size)]
            t = T(inputs[rank])
            w = dist.all_reduce(t, op=OPS[op], async_op=async_op)
            pending.append((w, t, reference(inputs, op), f"step {step} all_reduce"))
        elif kind == "broadcast":
            root = int(rng.integers(0, size))
            want = data(root, count, dtype, salt=salt)
            t = T(want if rank == root else np.zeros(count, dtype))
            w = dist.broadcast(t, src=root, async_op=async_op)
            pending.append((w, t, want, f"step {step} broadcast from {root}"))
        elif kind == "all_gather":
            inputs = [data(r, count, dtype, salt=salt) for r in range(size)]
            out = T(np.zeros(count * size, dtype))
            w = dist.all_gather_into_tensor(out, T(inputs[rank]), async_op=async_op)
            pending.append((w, out, np.concatenate(inputs), f"step {step} all_gather"))
        elif kind == "reduce_scatter":
            if dtype == "float16":
                dtype = "float32"
            inputs = [data(r, count * size, dtype, salt=salt) for r in range(size)]
            out = T(np.zeros(count, dtype))
            w = dist.reduce_scatter_tensor(out, T(inputs[rank]), async_op=async_op)
            want = reference([x[rank * count:(rank + 1) * count] for x in inputs], "sum")
            pending.append((w, out, want, f"step {step} reduce_scatter"))
        elif kind == "all_to_all":
            x = T(np.concatenate([data(rank, count, dtype, salt=salt + j) for j in range(size)]))
            y = T(np.zeros(count * size, dtype))
            w = dist.all_to_all_single(y, x, async_op=async_op)
            want = np.concatenate([data(j, count, dtype, salt=salt + rank) for j in range(size)])
            pending.append((w, y, want, f"step {step} all_to_all"))
        elif kind == "barrier":
            w = dist.barrier(async_op=async_op)
            pending.append((w, None, None, f"step {step} barrier"))
        elif size > 1:
            # rank r sends to r+1 with a tag; async or not, matched by tag on the receiver
            tag = int(rng.integers(0, 4))
            out = T(data(rank, count, dtype, salt=salt))
            got = T(np.zeros(count, dtype))
            right, left = (rank + 1) % size, (rank - 1) % size
            ws = dist.batch_isend_irecv([dist.P2POp(dist.isend, out, right, tag=tag),
                                         dist.P2POp(dist.irecv, got, left, tag=tag)])
            pending.append((ws[0], got, data(left, count, dtype, salt=salt), f"step {step} p2p"))
        if rng.integers(0, 4) == 0 or step == steps - 1:  # sometimes wait for everything
            for w, t, want, what in pending:
                if w is not None:
                    w.wait()
                if t is not None:
                    assert_equal(t._data, want, what, rank)
                n += 1
            pending = []
    return n


ALL_CHECKS = [check_all_reduce, check_broadcast, check_reduce, check_all_gather,
              check_gather_scatter, check_reduce_scatter, check_all_to_all, check_barrier,
              check_send_recv, check_async_ordering, check_object_collectives, check_new_group,
              check_random_sequence]


def run_all(rank, size, backend_name="tcp"):
    """Every check in this world; returns {check name: cases checked}."""
    return {fn.__name__: fn(rank, size, backend_name) for fn in ALL_CHECKS}


def run_some(rank, size, backend_name, names):
    return {name: globals()[name](rank, size, backend_name) for name in names}
