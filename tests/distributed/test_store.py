"""Stores: semantics shared by all kinds, across real processes, hostile clients, FileStore files.

Every subprocess runs under a hard timeout; the TCP server runs in this test process (the master)
or in a child, on 127.0.0.1 with a kernel-chosen port.
"""
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from tensorbrain.distributed.errors import DistNetworkError, DistStoreError
from tensorbrain.distributed._store import protocol as P
from tensorbrain.distributed.store import FileStore, HashStore, PrefixStore, Store, TCPStore

ROOT = Path(__file__).resolve().parents[2]


def spawn(code: str, *args: str, env=None) -> subprocess.Popen:
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.Popen([sys.executable, "-c", code, *args], env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(procs, timeout=30):
    """Wait for all; kill leftovers; return stdouts. Fails with the child's stderr."""
    outs = []
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            assert p.returncode == 0, f"child failed ({p.returncode}):\n{err}"
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return outs


@pytest.fixture
def master():
    s = TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=10))
    yield s
    s.close()


@pytest.fixture(params=["hash", "file", "tcp"])
def store(request, tmp_path):
    if request.param == "hash":
        s = HashStore(timeout=timedelta(seconds=5))
        yield s
    elif request.param == "file":
        s = FileStore(str(tmp_path / "fs"), timeout=timedelta(seconds=5))
        yield s
        s.close()
    else:
        m = TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=5))
        c = TCPStore("127.0.0.1", m.port, timeout=timedelta(seconds=5))
        yield c
        c.close()
        m.close()


# ***** semantics, the same for every store (torch.distributed.Store's) *****

def test_set_get_add_bytes_and_str(store):
    store.set("s", "text")
    store.set("b", b"\x00\xffraw")
    assert store.get("s") == b"text" and store.get("b") == b"\x00\xffraw"
    assert store.add("n", 3) == 3 and store.add("n", -5) == -2
    assert store.get("n") == b"-2"  # counters are decimal ASCII, as in torch
    store.set("s", b"")
    assert store.get("s") == b""


def test_compare_set_rules(store):
    # absent + expected "" -> set; absent + other expected -> returns expected, no write
    assert store.compare_set("k", "", "first") == b"first"
    assert store.compare_set("absent", "x", "y") == b"x" and not store.check(["absent"])
    assert store.compare_set("k", "wrong", "second") == b"first"
    assert store.compare_set("k", "first", "second") == b"second"
    assert store.get("k") == b"second"


def test_check_delete_num_keys(store):
    assert store.num_keys() == 0
    store.set("a", "1")
    store.add("b", 1)
    assert store.check(["a", "b"]) and not store.check(["a", "c"])
    assert store.num_keys() == 2
    assert store.delete_key("a") is True and store.delete_key("a") is False
    assert store.num_keys() == 1 and not store.check(["a"])


def test_get_timeout_names_key_timeout_and_store(store):
    store.set_timeout(timedelta(seconds=0.3))
    assert store.timeout == timedelta(seconds=0.3)
    t0 = time.monotonic()
    with pytest.raises(DistStoreError) as exc:
        store.get("never")
    took = time.monotonic() - t0
    assert 0.25 < took < 3, took
    msg = str(exc.value)
    assert "'never'" in msg and "0.3 s" in msg and store.describe() in msg


def test_wait_times_out_naming_missing_keys(store):
    store.set("here", "1")
    with pytest.raises(DistStoreError, match="'gone'") as exc:
        store.wait(["here", "gone"], timeout=timedelta(seconds=0.2))
    assert "'here'" not in str(exc.value)
    store.wait(["here"], timedelta(seconds=0.2))


def test_blocking_get_wakes_when_another_thread_sets(store):
    threading.Timer(0.2, lambda: store.set("late", "v")).start() if isinstance(store, HashStore) \
        else None
    if not isinstance(store, HashStore):
        # a separate handle, as another rank would have
        other = (TCPStore("127.0.0.1", store.port) if isinstance(store, TCPStore)
                 else FileStore(store.path))
        threading.Timer(0.2, lambda: other.set("late", "v")).start()
    t0 = time.monotonic()
    assert store.get("late") == b"v"
    assert time.monotonic() - t0 < 3


def test_add_rejects_non_counter(store):
    store.set("x", "not a number")
    with pytest.raises(DistStoreError, match="not an integer"):
        store.add("x", 1)


def test_prefix_store(store):
    a, b = PrefixStore("a", store), PrefixStore("b", store)
    a.set("k", "1")
    b.set("k", "2")
    assert a.get("k") == b"1" and b.get("k") == b"2" and store.get("a/k") == b"1"
    assert a.add("n", 2) == 2 and store.get("a/n") == b"2"
    assert a.check(["k"]) and not a.check(["n2"])
    nested = PrefixStore("inner", a)
    nested.set("z", "3")
    assert store.get("a/inner/z") == b"3"
    assert a.compare_set("k", "1", "9") == b"9"
    assert a.delete_key("k") and not a.check(["k"]) and b.check(["k"])
    with pytest.raises(DistStoreError, match="'a/missing'"):
        a.wait(["missing"], timedelta(seconds=0.1))


def test_bad_types():
    s = HashStore()
    with pytest.raises(TypeError, match="keys must be str"):
        s.set(1, "x")
    with pytest.raises(TypeError, match="bytes or str"):
        s.set("k", 3)
    with pytest.raises(TypeError):
        PrefixStore("p", object())
    assert isinstance(s, Store)


# ***** TCPStore across processes *****

WORKER = r"""
import sys
from datetime import timedelta
from tensorbrain.distributed.store import TCPStore
port, rank, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = TCPStore("127.0.0.1", port, world_size=n + 1, timeout=timedelta(seconds=20))
s.set(f"addr/{rank}", f"host{rank}:{1000 + rank}")
for _ in range(50):
    s.add("counter", 1)
s.compare_set("winner", "", str(rank))
s.wait([f"addr/{r}" for r in range(n)])
print(",".join(s.get(f"addr/{r}").decode() for r in range(n)), s.get("winner").decode())
"""


def test_tcpstore_across_processes_add_and_compare_set_races():
    n = 4
    master = TCPStore("127.0.0.1", 0, world_size=n + 1, is_master=True, wait_for_workers=False,
                      timeout=timedelta(seconds=20))
    try:
        procs = [spawn(WORKER, str(master.port), str(r), str(n)) for r in range(n)]
        outs = finish(procs)
        expected = ",".join(f"host{r}:{1000 + r}" for r in range(n))
        winners = {o.split()[1] for o in outs}
        assert all(o.split()[0] == expected for o in outs)
        assert len(winners) == 1 and winners.pop() in {str(r) for r in range(n)}
        assert master.get("counter") == str(n * 50).encode()
        assert master.num_keys() == n + 2  # addr/*, counter, winner (bookkeeping keys hidden)
    finally:
        master.close()


def test_workers_may_start_before_the_master():
    port = _free_port()
    worker = spawn(r"""
import sys
from datetime import timedelta
from tensorbrain.distributed.store import TCPStore
s = TCPStore("127.0.0.1", int(sys.argv[1]), world_size=2, timeout=timedelta(seconds=20))
s.set("hello", "from worker"); print(s.get("reply").decode())
""", str(port))
    time.sleep(0.5)  # the worker is retrying "connection refused" meanwhile
    master = TCPStore("127.0.0.1", port, world_size=2, is_master=True, timeout=timedelta(seconds=20))
    try:
        assert master.get("hello") == b"from worker"
        master.set("reply", "ok")
        assert finish([worker])[0].strip() == "ok"
    finally:
        master.close()


def test_master_waits_for_workers_and_names_how_many_arrived():
    # 3 s leaves the worker time to start Python and connect even on a loaded 2-core machine
    with pytest.raises(DistStoreError, match=r"only 2 of 3 processes connected within 3 s"):
        port = _free_port()
        worker = spawn(r"""
import sys, time
from datetime import timedelta
from tensorbrain.distributed.store import TCPStore
s = TCPStore("127.0.0.1", int(sys.argv[1]), world_size=3, timeout=timedelta(seconds=10))
time.sleep(6)
""", str(port))
        try:
            TCPStore("127.0.0.1", port, world_size=3, is_master=True, timeout=timedelta(seconds=3))
        finally:
            worker.kill()
            worker.wait()


def test_connect_timeout_names_address():
    port = _free_port()
    t0 = time.monotonic()
    with pytest.raises(DistNetworkError, match=f"127.0.0.1:{port} within 0.5 s"):
        TCPStore("127.0.0.1", port, timeout=timedelta(seconds=0.5))
    assert time.monotonic() - t0 < 3


def test_port_in_use_says_which_and_what_to_do(master):
    with pytest.raises(DistNetworkError, match=rf"port {master.port} .*already in use.*port=0"):
        TCPStore("127.0.0.1", master.port, is_master=True)
    with socket.create_server(("127.0.0.1", 0)) as other:
        busy = other.getsockname()[1]
        with pytest.raises(DistNetworkError, match=f"port {busy}"):
            TCPStore("127.0.0.1", busy, is_master=True)


def test_master_gone_is_a_clear_error():
    m = TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=1))
    c = TCPStore("127.0.0.1", m.port, timeout=timedelta(seconds=1))
    c.set("a", "1")
    m.close()
    with pytest.raises((DistStoreError, DistNetworkError), match=f"127.0.0.1:{m.port}"):
        c.get("a")
        c.get("a")  # the first call may have been answered before the server went away
    c.close()


def test_blocking_get_does_not_stall_other_clients(master):
    waiter = TCPStore("127.0.0.1", master.port, timeout=timedelta(seconds=5))
    other = TCPStore("127.0.0.1", master.port, timeout=timedelta(seconds=5))
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("v", waiter.get("slow")))
    t.start()
    time.sleep(0.1)
    t0 = time.monotonic()
    for i in range(100):
        other.set(f"k{i}", "x")
        assert other.get(f"k{i}") == b"x"
    assert time.monotonic() - t0 < 2  # ~100 round trips while "slow" is parked
    other.set("slow", "done")
    t.join(5)
    assert got["v"] == b"done"


def test_caps_are_enforced_on_the_client(master):
    with pytest.raises(ValueError, match="key of 4097 bytes"):
        master.set("k" * (P.MAX_KEY_BYTES + 1), "x")
    with pytest.raises(ValueError, match="exceeds the 67108864-byte cap"):
        master.set("big", b"\0" * (P.MAX_VALUE_BYTES + 1))


def test_large_value_round_trip(master):
    value = os.urandom(8 * 1024 * 1024)
    c = TCPStore("127.0.0.1", master.port)
    c.set("big", value)
    assert master.get("big") == value
    c.close()


# ***** hostile clients: the server keeps serving the good one *****

def _raw(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    return s


def _hello(sock):
    """Do the handshake by hand (no secret), return the socket ready for requests."""
    n = struct.unpack("<I", _recvn(sock, 4))[0]
    _recvn(sock, n)
    sock.sendall(P.encode(P.OP_HELLO, P.MAGIC + bytes((P.VERSION,)), os.urandom(32), b""))
    n = struct.unpack("<I", _recvn(sock, 4))[0]
    assert _recvn(sock, n)[0] == P.ST_OK
    return sock


def _recvn(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def _closed_by_server(sock, within=5.0):
    sock.settimeout(within)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def test_hostile_clients_cannot_stop_the_server(master):
    good = TCPStore("127.0.0.1", master.port, timeout=timedelta(seconds=5))
    port = master.port
    garbage = _raw(port)
    garbage.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 10)
    huge = _raw(port)
    huge.sendall(b"\xff\xff\xff\xff" + b"A" * 100)  # 4 GiB length prefix: dropped, not allocated
    half = _hello(_raw(port))
    half.sendall(struct.pack("<I", 1000) + b"\x02partial")  # half a frame, then silence
    mute = _raw(port)  # connects and never says anything
    bad_field = _hello(_raw(port))
    payload = bytes((P.OP_SET,)) + struct.pack("<I", 10_000) + b"short"  # field overruns frame
    bad_field.sendall(struct.pack("<I", len(payload)) + payload)
    unknown = _hello(_raw(port))
    unknown.sendall(P.encode(200, b"x"))
    long_key = _hello(_raw(port))
    long_key.sendall(P.encode(P.OP_SET, b"k" * (P.MAX_KEY_BYTES + 1), b"v"))

    for i in range(20):
        good.set(f"g{i}", str(i))
        assert good.get(f"g{i}") == str(i).encode()
    for name, s in [("garbage", garbage), ("huge", huge), ("bad_field", bad_field),
                    ("unknown", unknown), ("long_key", long_key)]:
        assert _closed_by_server(s), f"the server should drop the {name} client"
    assert not _closed_by_server(half, within=0.2)  # silent clients just sit...
    assert good.add("n", 1) == 1  # ...and cost the others nothing
    for s in (garbage, huge, half, mute, bad_field, unknown, long_key):
        s.close()
    assert master._server.thread.is_alive()
    good.close()


def test_each_request_type_has_one_handler_and_a_second_hello_is_refused(master):
    from tensorbrain.distributed._store.handlers import HANDLERS
    # every opcode the client can send after the handshake is served by the dispatch table
    assert set(HANDLERS) == set(P.OP_NAMES) - {P.OP_HELLO}
    again = _hello(_raw(master.port))
    again.sendall(P.encode(P.OP_HELLO, P.MAGIC + bytes((P.VERSION,)), os.urandom(32), b""))
    assert _closed_by_server(again), "a hello after the handshake is not a request"
    again.close()
    assert master.add("alive", 1) == 1


def test_many_connect_and_close_storms(master):
    for _ in range(200):
        s = socket.create_connection(("127.0.0.1", master.port))
        s.close()
    assert master.add("alive", 1) == 1


# ***** shared secret *****

def test_secret_handshake():
    m = TCPStore("127.0.0.1", 0, is_master=True, secret="s3cret", timeout=timedelta(seconds=2))
    try:
        ok = TCPStore("127.0.0.1", m.port, secret=b"s3cret", timeout=timedelta(seconds=2))
        ok.set("a", "1")
        assert m.get("a") == b"1"
        with pytest.raises(DistStoreError, match="TB_STORE_SECRET differs"):
            TCPStore("127.0.0.1", m.port, secret="wrong", timeout=timedelta(seconds=2))
        with pytest.raises(DistStoreError, match="requires a shared secret"):
            TCPStore("127.0.0.1", m.port, secret="", timeout=timedelta(seconds=2))
        ok.close()
    finally:
        m.close()
    plain = TCPStore("127.0.0.1", 0, is_master=True, secret="", timeout=timedelta(seconds=2))
    try:
        with pytest.raises(DistStoreError, match="does not use a shared secret"):
            TCPStore("127.0.0.1", plain.port, secret="x", timeout=timedelta(seconds=2))
    finally:
        plain.close()


def test_secret_from_environment(monkeypatch):
    monkeypatch.setenv("TB_STORE_SECRET", "from-env")
    m = TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=2))
    try:
        proc = spawn(r"""
import sys
from datetime import timedelta
from tensorbrain.distributed.store import TCPStore
TCPStore("127.0.0.1", int(sys.argv[1]), timeout=timedelta(seconds=5)).set("via", "env")
""", str(m.port), env={"TB_STORE_SECRET": "from-env"})
        finish([proc])
        assert m.get("via") == b"env"
    finally:
        m.close()


# ***** FileStore *****

FILE_WORKER = r"""
import sys
from datetime import timedelta
from tensorbrain.distributed.store import FileStore
path, rank, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = FileStore(path, world_size=n, timeout=timedelta(seconds=20))
for _ in range(30):
    s.add("counter", 1)
s.set(f"r/{rank}", str(rank * rank))
s.compare_set("winner", "", str(rank))
s.wait([f"r/{r}" for r in range(n)])
print(sum(int(s.get(f"r/{r}")) for r in range(n)), s.get("winner").decode(), s.get("counter").decode())
s.add("done", 1)
s.wait(["go"])
s.close()
"""


def test_filestore_multiprocess_and_cleanup(tmp_path):
    path = str(tmp_path / "store")
    n = 3
    procs = [spawn(FILE_WORKER, path, str(r), str(n)) for r in range(n)]
    try:
        watcher = FileStore(path, timeout=timedelta(seconds=20))
        while int(watcher.add("done", 0)) < n:
            time.sleep(0.02)
        watcher.set("go", "1")
        watcher.close()
        outs = finish(procs)
    finally:
        for p in procs:
            p.kill()
    lines = {o.strip() for o in outs}
    assert len(lines) == 1
    total, winner, counter = lines.pop().split()
    assert int(total) == sum(r * r for r in range(n)) and int(counter) == n * 30
    assert winner in {str(r) for r in range(n)}
    assert not os.path.exists(path)  # the last of world_size instances removed the file


def test_filestore_torn_tail_and_bad_file(tmp_path):
    path = tmp_path / "fs"
    s = FileStore(str(path))
    s.set("a", "1")
    with open(path, "ab") as f:  # a writer that died half-way through a record
        f.write(struct.pack("<cII", b"S", 3, 100) + b"abc" + b"x" * 10)
    other = FileStore(str(path))
    assert other.get("a") == b"1" and not other.check(["abc"])
    other.set("b", "2")
    assert s.get("b") == b"2" and s.num_keys() == 2
    s.close(), other.close()
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x80\x04pickle-ish junk")
    with pytest.raises(DistStoreError, match="not a TensorBrain FileStore"):
        FileStore(str(bad))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_client_that_never_reads_cannot_grow_the_server(master):
    """Pipelined gets of an 8 MiB value with no reads: the server stops reading that client once
    ~4 MiB of replies are queued, so its memory stays bounded, and others are still served."""
    master.set("big", b"\1" * (8 * 1024 * 1024))
    hog = _hello(_raw(master.port))
    frame = P.encode(P.OP_GET, b"big", P.i64(1000))
    hog.setblocking(False)
    sent = 0
    try:
        for _ in range(2000):
            sent += hog.send(frame)
    except (BlockingIOError, socket.timeout):
        pass  # the kernel buffers are full: the server stopped reading us
    good = TCPStore("127.0.0.1", master.port, timeout=timedelta(seconds=5))
    assert good.add("still", 1) == 1
    queued = [len(c.outbuf) for c in list(master._server.conns)]
    assert max(queued) <= 4 * 1024 * 1024 + 8 * 1024 * 1024 + 1024, max(queued)
    assert sent > 0
    hog.close()
    good.close()


def test_wakeup_chains_across_many_clients(master):
    """Many parked gets woken by one set, each client then queueing more work: served in order."""
    n = 40
    clients = [TCPStore("127.0.0.1", master.port, timeout=timedelta(seconds=10)) for _ in range(n)]
    results = [None] * n

    def run(i):
        clients[i].get("go")
        results[i] = clients[i].add("count", 1)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    master.set("go", "1")
    for t in threads:
        t.join(10)
    assert sorted(results) == list(range(1, n + 1))
    for c in clients:
        c.close()


def test_a_connection_that_never_says_hello_is_dropped(monkeypatch):
    monkeypatch.setattr(P, "HANDSHAKE_TIMEOUT_S", 0.5)
    m = TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=5))
    try:
        mute = _raw(m.port)
        t0 = time.monotonic()
        assert _closed_by_server(mute, within=5.0)
        assert time.monotonic() - t0 < 4
        mute.close()
        assert m.add("fine", 1) == 1
    finally:
        m.close()

