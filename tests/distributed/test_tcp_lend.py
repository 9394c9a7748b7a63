"""Sends that lend pages to the kernel (tcp/lend.py): the ring's frames to a same-host peer over
a Unix socket are spliced, not copied, and the op returns only after the peer has read them.

The hazard lending brings is a rank writing into a range whose pages the peer has not read yet.
The workers below write garbage into every buffer the moment all_reduce returns, the way DDP's
next backward writes into its buckets, and check every result against NumPy: a rank that
returned before its peer read the last frames would hand that peer garbage. With the wait in
``Engine._wait_lent`` removed, this test fails (the second rank's results differ).
"""
import socket
import threading
import time

import numpy as np
import pytest

from tensorbrain.distributed.backends.tcp import lend
from tests.distributed.collective_suite import data, reference

HERE = "tests.distributed.test_tcp_lend"
# (count, dtype, op): every size takes the ring (more than 1 MiB per rank, SMALL_ALLREDUCE)
CASES = [(300_001, "float32", "sum"), (2_000_003, "float64", "max"), (4_194_304, "float32", "sum"),
         (1_048_577, "int32", "sum"), (3_000_000, "float32", "min")]

needs_lend = pytest.mark.skipif(not lend.enabled(), reason="no vmsplice/os.splice here")


def overwrite_after_return(rank, size, repeats=6):
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    be = dist.distributed_c10d._default("lend").backend
    checked = 0
    for count, dtype, op in CASES:
        want = reference([data(r, count, dtype, op=op) for r in range(size)], op)
        buf = np.empty(count, dtype)
        x = tb.tensor(buf)
        for rep in range(repeats):
            x._data[...] = data(rank, count, dtype, op=op)
            dist.all_reduce(x, op=getattr(dist.ReduceOp, op.upper()))
            got = x._data.copy()
            x._data[...] = -7  # at once: the peer may not have read pages this rank lent
            if not np.array_equal(got, want):
                bad = np.flatnonzero(got != want)
                raise AssertionError(f"rank {rank}: {count} {dtype} {op} repeat {rep}: "
                                     f"{bad.size} elements differ, first at {bad[0]}: "
                                     f"{got[bad[0]]} != {want[bad[0]]}")
            checked += 1
    # reduce_scatter takes the same ring (without its all-gather half) above 2 MiB
    m = 1_000_000
    inp = np.concatenate([data(rank, m, "float32", salt=j) for j in range(size)])
    out = tb.tensor(np.empty(m, np.float32))
    dist.reduce_scatter_tensor(out, tb.tensor(inp))
    want = reference([data(r, m, "float32", salt=rank) for r in range(size)], "sum")
    assert np.array_equal(out._data, want), f"rank {rank}: reduce_scatter differs"
    kinds = sorted({c.transport for c in be.conns if c is not None})
    return {"checked": checked, "lent": be._engine.lent_bytes, "kinds": kinds}


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("splice", ["1", "0"])
def test_results_with_and_without_lending(workers, world_size, splice):
    if splice == "1" and not lend.enabled():
        pytest.skip("no vmsplice/os.splice here")
    res = workers(f"{HERE}:overwrite_after_return", world_size,
                  env={"TB_SHM": "0", "TB_TCP_SPLICE": splice}, timeout=120, group_timeout=60)
    for r in res:
        assert r["checked"] == 6 * len(CASES) and r["kinds"] == ["unix"], r
        assert (r["lent"] > 0) == (splice == "1"), r


@needs_lend
def test_lender_moves_bytes_and_unread_counts_them():
    a, b = socket.socketpair()
    a.setblocking(False)
    payload = np.arange(3 << 18, dtype=np.uint32)  # 3 MiB: more than one pipe-full
    got = bytearray(payload.nbytes)
    lender = lend.Lender()

    def reader():
        view, n = memoryview(got), 0
        time.sleep(0.2)  # let the sender fill the socket first
        while n < len(view):
            n += b.recv_into(view[n:])
    t = threading.Thread(target=reader)
    t.start()
    lent = [payload.ctypes.data, payload.nbytes, 0, payload]
    while not lender.pump(a.fileno(), lent):
        assert lend.unread(a.fileno()) > 0  # the socket is full: bytes wait unread
        time.sleep(0.001)
    t.join(10)
    assert np.array_equal(np.frombuffer(got, np.uint32), payload)
    assert lend.wait_read([a.fileno()], time.monotonic() + 5)
    assert lend.unread(a.fileno()) == 0
    lender.close()
    a.close()
    b.close()


@needs_lend
def test_wait_read_gives_up_at_the_deadline():
    a, b = socket.socketpair()
    a.setblocking(False)
    payload = np.ones(1 << 16, np.uint8)
    lender = lend.Lender()
    assert lender.pump(a.fileno(), [payload.ctypes.data, payload.nbytes, 0, payload])
    assert lend.unread(a.fileno()) >= payload.nbytes  # the kernel counts its overhead too
    t0 = time.monotonic()
    assert not lend.wait_read([a.fileno()], t0 + 0.1)  # b never reads
    assert 0.09 < time.monotonic() - t0 < 2.0
    lender.close()
    a.close()
    b.close()


@needs_lend
def test_lender_reports_a_closed_peer():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.close()
    payload = np.ones(1 << 17, np.uint8)
    with pytest.raises(OSError):
        lend.Lender().pump(a.fileno(), [payload.ctypes.data, payload.nbytes, 0, payload])
    a.close()


def sizes_differ(rank, size):
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    x = tb.tensor(np.ones((4 << 20) if rank == 0 else (2 << 20), np.float32))  # 16 / 8 MiB
    dist.all_reduce(x)


def test_size_mismatch_caught_on_the_first_frame(workers):
    """A lending all_reduce runs one ring per 4 MiB piece; every frame still carries the whole
    op's size, so 16 MiB against 8 MiB fails at once, not in the third piece or at the timeout."""
    t0 = time.monotonic()
    res = workers(f"{HERE}:sizes_differ", 2, env={"TB_SHM": "0"}, timeout=60, group_timeout=20,
                  raise_on_error=False)
    for r in res:
        assert "collective mismatch" in r.message and "16777216" in r.message, r.describe()
    assert time.monotonic() - t0 < 15
