"""NumPy twin of the shared-memory transport (csrc/shm/shm.cpp), over
``multiprocessing.shared_memory``.

Same segment layout (``_layout.py``), same barrier sequence numbers, same buffer generations, same
chunking and the same reduction order, so a twin rank and a native rank interoperate on one
segment and produce identical bits. Differences, all about speed: the twin waits by polling with
short sleeps (it cannot sleep in futex from Python) and always wakes the peers' futex after it
arrives (it cannot fence between its store and the waiter-count load, so it never skips a wake).

The resource tracker: Python < 3.13 registers every SharedMemory it opens with
``multiprocessing.resource_tracker``, which unlinks "leaked" segments when the process exits and
warns about them, even segments another process created and still uses. We unregister right after
opening (3.13+: ``track=False``) and unlink through ``_posixshmem`` ourselves.
"""
from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Callable
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from .. import errors
from . import _layout as L
from ._reduce import check_op, reduce_ranks

try:  # the private C module behind shared_memory: unlink without the tracker
    import _posixshmem
except ImportError:  # pragma: no cover - non-POSIX
    _posixshmem = None

_SLICE_S = 0.05  # liveness/abort/deadline check period while waiting (as the C++ side)
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(os.uname().machine)
_FUTEX_WAKE = 1
_syscall: Callable[..., int] | None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _syscall = _libc.syscall
except (OSError, AttributeError):  # pragma: no cover
    _syscall = None


def _open(name: str, create: bool, size: int) -> shared_memory.SharedMemory:
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name, create=create, size=size, track=False)
    shm = shared_memory.SharedMemory(name, create=create, size=size)
    # _name: the tracker's key, private (no public spelling before 3.13's track=False)
    resource_tracker.unregister(shm._name, "shared_memory")  # type: ignore[attr-defined]  # noqa: SLF001
    return shm


def _unlink(name: str) -> None:
    try:
        if _posixshmem is not None:
            _posixshmem.shm_unlink("/" + name.lstrip("/"))
        else:  # pragma: no cover
            os.unlink("/dev/shm/" + name.lstrip("/"))
    except FileNotFoundError:
        pass


def pid_alive(pid: int) -> bool:
    """False when ``pid`` is gone or a zombie nobody reaped (0: not attached yet, alive)."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    state = stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3]
    return state not in (b"Z", b"X", b"x")


class ShmGroup:
    """The twin of ``tensorbrain._C.ShmGroup``: same constructor, attributes and collectives."""

    def __init__(self, name: str, rank: int, nranks: int, create: bool, buf_bytes: int,
                 timeout_s: float):
        if not 0 <= rank < nranks:
            raise ValueError(f"shm: rank {rank} is out of range for {nranks} ranks")
        if create and (buf_bytes <= 0 or buf_bytes % 4096):
            raise ValueError(f"shm: buf_bytes must be a positive multiple of 4096, got {buf_bytes}")
        self.name, self.rank, self.size = name.lstrip("/"), rank, nranks
        self.timeout_s = float(timeout_s)
        self._creator, self._unlinked, self._step, self._gen = create, False, 0, 0
        self._coll, self._fp_pending = 0, False
        size = L.segment_bytes(nranks, buf_bytes) if create else 0
        try:
            self._shm: shared_memory.SharedMemory | None = _open(self.name, create, size)
        except FileExistsError:
            raise errors.DistBackendError(f"shm: segment /{self.name} already exists") from None
        except FileNotFoundError:
            raise errors.DistBackendError(f"shm: cannot attach to segment /{self.name}: "
                                          "No such file or directory") from None
        buf = self._shm.buf
        assert buf is not None  # a segment just opened is mapped
        self._u32 = np.ndarray((len(buf) // 4,), np.uint32, buf)
        self._i32 = np.ndarray((len(buf) // 4,), np.int32, buf)
        self._u64 = np.ndarray((len(buf) // 8,), np.uint64, buf)
        hdr64 = np.ndarray((3,), np.uint64, buf)
        if create:
            self._u32[L.OFF_VERSION // 4] = L.VERSION
            self._u32[L.OFF_NRANKS // 4] = nranks
            hdr64[L.OFF_BUF_BYTES // 8] = buf_bytes
            hdr64[L.OFF_MAGIC // 8] = L.MAGIC
        else:
            deadline = time.monotonic() + self.timeout_s
            while int(hdr64[0]) != L.MAGIC:
                if time.monotonic() > deadline:
                    self.close()
                    raise errors.DistTimeoutError(f"shm: segment /{self.name} was never initialised")
                time.sleep(1e-4)
            version, nr = int(self._u32[L.OFF_VERSION // 4]), int(self._u32[L.OFF_NRANKS // 4])
            if version != L.VERSION or nr != nranks:
                self.close()
                raise errors.DistBackendError(
                    f"shm: segment /{self.name} has version {version} and {nr} ranks; expected "
                    f"version {L.VERSION} and {nranks} ranks")
            buf_bytes = int(hdr64[L.OFF_BUF_BYTES // 8])
        self.buf_bytes = buf_bytes
        self.flat_max_bytes = min(L.flat_max_bytes(nranks), buf_bytes)
        self._data = np.ndarray((2 * nranks * buf_bytes,), np.uint8, buf, L.header_bytes(nranks))
        self._i32[self._ctl(rank, L.CTL_PID)] = os.getpid()

    # ***** lifetime *****
    def wait_attached(self) -> None:
        """Return once every rank attached; the creator then unlinks the name."""
        self._check_usable("wait_attached")
        deadline = time.monotonic() + self.timeout_s
        while self._attached() < self.size:
            if self._u32[L.OFF_ABORT // 4]:
                self.close()
                raise errors.DistBackendError(f"shm: group {self.name} aborted while attaching")
            if time.monotonic() > deadline:
                missing = [r for r in range(self.size) if self._pid(r) == 0]
                self._u32[L.OFF_ABORT // 4] = 1
                if self._creator:
                    self.unlink()
                self.close()
                raise errors.DistTimeoutError(
                    f"shm: timed out after {self.timeout_s} s waiting for rank(s) "
                    f"{', '.join(map(str, missing))} to attach to {self.name}")
            time.sleep(5e-5)
        if self._creator:
            self.unlink()

    def _attached(self) -> int:
        # The attach counter is an atomic add on the C++ side; Python cannot do one, so the twin
        # counts the pids that ranks wrote (each rank writes only its own slot).
        return sum(1 for r in range(self.size) if self._pid(r) != 0)

    @property
    def closed(self) -> bool:
        return self._shm is None

    def unlink(self) -> None:
        if not self._unlinked:
            _unlink(self.name)
            self._unlinked = True

    def close(self) -> None:
        if self._shm is not None:
            self._u32 = self._i32 = self._u64 = self._data = None
            try:
                self._shm.close()
            except BufferError:  # a caller still holds a view; the mapping goes with the process
                pass
            self._shm = None

    def __del__(self):
        try:
            if self._creator:
                self.unlink()
            self.close()
        except Exception:
            pass

    # ***** synchronisation *****
    @staticmethod
    def _ctl(rank: int, field: int) -> int:
        return (L.CTL_STRIDE * (rank + 1) + field) // 4

    def _pid(self, r: int) -> int:
        return int(self._i32[self._ctl(r, L.CTL_PID)])

    def _buf(self, r: int, gen: int) -> np.ndarray:
        off = (2 * r + (gen & 1)) * self.buf_bytes
        return self._data[off:off + self.buf_bytes]

    def _arrive(self) -> None:
        self._step = (self._step + 1) & 0xFFFFFFFF
        i = self._ctl(self.rank, L.CTL_SEQ)
        self._u32[i] = self._step
        if _syscall is not None and _SYS_FUTEX is not None:
            addr = self._u32.ctypes.data + 4 * i
            _syscall(_SYS_FUTEX, ctypes.c_void_p(addr), _FUTEX_WAKE, 0x7FFFFFFF, None, None, 0)

    def _reached(self, peer: int) -> bool:
        v = int(self._u32[self._ctl(peer, L.CTL_SEQ)])
        return ((v - self._step) & 0xFFFFFFFF) < 0x80000000  # wrap-around compare, as C++

    def _wait_peers(self) -> None:
        for k in range(1, self.size):
            peer = (self.rank + k) % self.size
            if self._reached(peer):
                continue
            start = time.monotonic()
            deadline, next_check, nap = start + self.timeout_s, start + _SLICE_S, 1e-5
            while not self._reached(peer):
                time.sleep(nap)
                nap = min(nap * 2, 1e-3)
                now = time.monotonic()
                if now >= next_check:
                    next_check = now + _SLICE_S
                    if self._u32[L.OFF_ABORT // 4]:
                        self._check_usable("wait")
                    pid = self._pid(peer)
                    if not pid_alive(pid):
                        self._fail(0, peer, f"shm: rank {peer} (pid {pid}) died while rank "
                                            f"{self.rank} waited for it in a collective of group "
                                            f"{self.name}")
                    if now > deadline:
                        self._fail(1, peer, f"shm: rank {self.rank} timed out after "
                                            f"{self.timeout_s} s waiting for rank {peer} (pid "
                                            f"{pid}) in group {self.name}; the peer is alive but "
                                            "did not enter the same collective (mismatched calls "
                                            "across ranks?)")

    def _sync(self) -> None:
        self._arrive()
        self._wait_peers()
        if self._fp_pending:
            self._check_fingerprints()

    # Collective fingerprints: the same protocol as csrc/shm/shm.cpp (begin/check_fingerprints).
    def _fp_index(self, rank: int) -> int:
        return (L.CTL_STRIDE * (rank + 1) + L.CTL_FP + 16 * (self._coll & 1)) // 8

    def _begin(self, kind: int, nbytes: int, dtype=None, op=None, root: int = -1,
               fp_dtype=None) -> None:
        # fp_dtype: a byte mover's buffer dtype, recorded for the comparison only
        self._coll = (self._coll + 1) & 0xFFFFFFFF
        code = (L.DTYPE_CODES[np.dtype(dtype).name] if dtype is not None
                else L.NONE if fp_dtype is None else L.fp_dtype_code(np.dtype(fp_dtype)))
        a = L.fingerprint(kind, code,
                          L.NONE if op is None else L.OP_CODES[op], root)
        i = self._fp_index(self.rank)
        self._u64[i] = a
        self._u64[i + 1] = nbytes
        self._fp_pending = True

    def _check_fingerprints(self) -> None:
        self._fp_pending = False
        i = self._fp_index(self.rank)
        a, b = int(self._u64[i]), int(self._u64[i + 1])
        for k in range(1, self.size):
            p = (self.rank + k) % self.size
            j = self._fp_index(p)
            pa, pb = int(self._u64[j]), int(self._u64[j + 1])
            if (pa, pb) != (a, b):
                self._fail(3, p, f"shm: mismatch between ranks in collective #{self._coll} of "
                                 f"group {self.name}: rank {self.rank} called {L.describe(a, b)} "
                                 f"but rank {p} called {L.describe(pa, pb)}; every rank must "
                                 "make the same calls in the same order with the same sizes and "
                                 "dtypes")

    def _fail(self, kind: int, peer: int, msg: str):
        if self._u32[L.OFF_ABORT // 4] == 0:
            self._u32[L.OFF_ABORT // 4] = 1
            self._i32[L.OFF_ABORT_RANK // 4] = peer
            self._u32[L.OFF_ABORT_KIND // 4] = kind
        self._wake_all()
        cls = errors.DistTimeoutError if kind == 1 else errors.DistBackendError
        exc = cls(msg)
        exc.rank = peer
        raise exc

    def abort(self) -> None:
        """Mark the group aborted by this rank and wake the peers (they raise)."""
        if self._shm is None:
            return
        if self._u32[L.OFF_ABORT // 4] == 0:
            self._u32[L.OFF_ABORT // 4] = 1
            self._i32[L.OFF_ABORT_RANK // 4] = self.rank
            self._u32[L.OFF_ABORT_KIND // 4] = 2
        self._wake_all()

    def _wake_all(self) -> None:
        if _syscall is not None and _SYS_FUTEX is not None:
            for r in range(self.size):
                addr = self._u32.ctypes.data + 4 * self._ctl(r, L.CTL_SEQ)
                _syscall(_SYS_FUTEX, ctypes.c_void_p(addr), _FUTEX_WAKE, 0x7FFFFFFF, None, None, 0)

    def _check_usable(self, what: str) -> None:
        if self._shm is None:
            raise errors.DistBackendError(f"shm: {what} on a closed group {self.name}")
        if self._u32[L.OFF_ABORT // 4]:
            r = int(self._i32[L.OFF_ABORT_RANK // 4])
            kind = int(self._u32[L.OFF_ABORT_KIND // 4])
            why = ("" if r < 0 else f" by rank {r}" if kind == 2
                   else f" because rank {r} called a mismatched collective" if kind == 3
                   else f" because rank {r} {'timed out' if kind == 1 else 'died'}")
            cls = errors.DistTimeoutError if kind == 1 else errors.DistBackendError
            exc = cls(f"shm: {what} on rank {self.rank}: group {self.name} was aborted{why}; "
                      "destroy the process group")
            exc.rank = r
            raise exc

    # ***** collectives (same algorithms and chunking as shm.cpp) *****
    def barrier(self) -> None:
        self._check_usable("barrier")
        if self.size > 1:
            self._begin(L.KIND_BARRIER, 0)
        self._sync()

    def all_reduce(self, input: np.ndarray, output: np.ndarray, op: str) -> None:
        self._check_usable("all_reduce")
        check_op(input.dtype, op)
        src, dst = input.reshape(-1), output.reshape(-1)
        if self.size == 1:
            if dst is not src:
                np.copyto(dst, src)
            return
        self._begin(L.KIND_ALL_REDUCE, src.nbytes, src.dtype, op)
        if src.nbytes <= self.flat_max_bytes:
            chunk = self.buf_bytes // src.itemsize
            for off in range(0, src.size, chunk):
                ln = min(chunk, src.size - off)
                g = self._gen
                self._gen += 1
                self._buf(self.rank, g).view(src.dtype)[:ln] = src[off:off + ln]
                self._sync()
                reduce_ranks(dst[off:off + ln], [self._buf(p, g).view(src.dtype)[:ln]
                                                 for p in range(self.size)], op)
            return
        esz, n, r = src.itemsize, self.size, self.rank
        chunk, align = self.buf_bytes // esz, max(1, 64 // esz)
        for off in range(0, src.size, chunk):
            ln = min(chunk, src.size - off)
            base = ln // n // align * align
            lo = [base * p for p in range(n)] + [ln]
            g = self._gen
            self._gen += 1
            mine = self._buf(r, g).view(src.dtype)
            for p in range(n):
                if p != r:
                    mine[lo[p]:lo[p + 1]] = src[off + lo[p]:off + lo[p + 1]]
            self._sync()
            a, b = lo[r], lo[r + 1]
            srcs = [src[off + a:off + b] if q == r else self._buf(q, g).view(src.dtype)[a:b]
                    for q in range(n)]
            reduce_ranks(dst[off + a:off + b], srcs, op)
            mine[a:b] = dst[off + a:off + b]
            self._sync()
            for p in range(n):
                if p != r:
                    dst[off + lo[p]:off + lo[p + 1]] = self._buf(p, g).view(src.dtype)[lo[p]:lo[p + 1]]

    def broadcast(self, buffer: np.ndarray, root: int) -> None:
        self._check_usable("broadcast")
        if not 0 <= root < self.size:
            raise ValueError(f"shm: broadcast root {root} is out of range for {self.size} ranks")
        if self.size == 1:
            return
        data = buffer.reshape(-1).view(np.uint8)
        self._begin(L.KIND_BROADCAST, data.size, root=root, fp_dtype=buffer.dtype)
        for off in range(0, max(data.size, 1), self.buf_bytes):
            ln = min(self.buf_bytes, data.size - off)
            g = self._gen
            self._gen += 1
            if self.rank == root:
                self._buf(root, g)[:ln] = data[off:off + ln]
            self._sync()
            if self.rank != root:
                data[off:off + ln] = self._buf(root, g)[:ln]

    def all_gather(self, input: np.ndarray, output: np.ndarray) -> None:
        self._check_usable("all_gather")
        src = input.reshape(-1).view(np.uint8)
        dst = output.reshape(-1).view(np.uint8)
        S = src.size
        if self.size > 1:
            self._begin(L.KIND_ALL_GATHER, S, fp_dtype=input.dtype)
        for off in range(0, max(S, 1), self.buf_bytes):
            ln = min(self.buf_bytes, S - off)
            g = self._gen
            self._gen += 1
            self._buf(self.rank, g)[:ln] = src[off:off + ln]
            self._sync()
            for p in range(self.size):
                dst[p * S + off:p * S + off + ln] = (src[off:off + ln] if p == self.rank
                                                     else self._buf(p, g)[:ln])

    def reduce_scatter(self, input: np.ndarray, output: np.ndarray, op: str) -> None:
        self._check_usable("reduce_scatter")
        check_op(input.dtype, op)
        src, dst = input.reshape(-1), output.reshape(-1)
        n, r, c, esz = self.size, self.rank, dst.size, src.itemsize
        cc = self.buf_bytes // esz // n
        if n > 1:
            self._begin(L.KIND_REDUCE_SCATTER, c * esz, src.dtype, op)
        for off in range(0, max(c, 1), cc):
            ln = min(cc, c - off)
            g = self._gen
            self._gen += 1
            mine = self._buf(r, g).view(src.dtype)
            for p in range(n):
                if p != r:
                    mine[p * cc:p * cc + ln] = src[p * c + off:p * c + off + ln]
            self._sync()
            srcs = [src[r * c + off:r * c + off + ln] if q == r
                    else self._buf(q, g).view(src.dtype)[r * cc:r * cc + ln] for q in range(n)]
            reduce_ranks(dst[off:off + ln], srcs, op)

    def all_to_all(self, input: np.ndarray, output: np.ndarray) -> None:
        self._check_usable("all_to_all")
        src = input.reshape(-1).view(np.uint8)
        dst = output.reshape(-1).view(np.uint8)
        n, r = self.size, self.rank
        S, cs = src.size // n, self.buf_bytes // n
        if n > 1:
            self._begin(L.KIND_ALL_TO_ALL, S, fp_dtype=input.dtype)
        for off in range(0, max(S, 1), cs):
            ln = min(cs, S - off)
            g = self._gen
            self._gen += 1
            mine = self._buf(r, g)
            for p in range(n):
                if p != r:
                    mine[p * cs:p * cs + ln] = src[p * S + off:p * S + off + ln]
            self._sync()
            dst[r * S + off:r * S + off + ln] = src[r * S + off:r * S + off + ln]
            for p in range(n):
                if p != r:
                    dst[p * S + off:p * S + off + ln] = self._buf(p, g)[r * cs:r * cs + ln]
