"""FileStore: a store in a file on a filesystem every rank can see (torch.distributed.FileStore).

The file is an append-only log with a fixed, parsed format (never pickle):

    header   b"TBFILESTORE1\\n"
    record   op (b"S" set / b"D" delete), u32 LE key length, u32 LE value length, key, value

Writers append under an exclusive ``fcntl.flock``; readers parse new records under a shared lock,
remembering how far they have read, so each operation costs only the bytes appended since the
last one. A record cut short by a writer that died mid-append is truncated away by the next
writer (it sits after the last complete record and is never read as data). ``get``/``wait`` poll
with a short backoff (1 ms growing to 20 ms) because files have no portable wake-up.

With ``world_size > 0`` the last of ``world_size`` instances to ``close()`` removes the file, as
torch does, so reruns do not see stale keys.

>>> import os, tempfile
>>> from tensorbrain.distributed.store import FileStore
>>> path = os.path.join(tempfile.mkdtemp(), "store")
>>> s = FileStore(path, world_size=1); s.set("a", b"1"); s.add("n", 5)
5
>>> s.get("a"); s.close(); os.path.exists(path)
b'1'
False
"""
from __future__ import annotations

import fcntl
import os
import struct
import threading
import time

from ..errors import DistStoreError
from . import protocol as P
from .base import (DEFAULT_TIMEOUT, INTERNAL_PREFIX, Store, add_rule, check_key, compare_set_rule,
                   to_bytes, to_timedelta, wait_timeout_message)

HEADER = b"TBFILESTORE1\n"
_REC = struct.Struct("<cII")
_JOINED = INTERNAL_PREFIX + "filestore/joined"
_FINISHED = INTERNAL_PREFIX + "filestore/finished"


class FileStore(Store):
    """A store backed by one file, safe across processes (and threads) through fcntl locks."""

    def __init__(self, file_name: str, world_size: int = -1, timeout=DEFAULT_TIMEOUT):
        super().__init__(timeout)
        self.path = os.fspath(file_name)
        self.world_size = world_size
        self._tlock = threading.RLock()
        self._data: dict[str, bytes] = {}
        self._offset = 0
        self._closed = False
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as exc:
            raise DistStoreError(f"FileStore cannot open {self.path!r}: {exc}") from None
        with self._locked(exclusive=True):
            if os.fstat(self._fd).st_size == 0:
                os.write(self._fd, HEADER)
            self._refresh()
        if world_size is not None and world_size > 0:
            self.add(_JOINED, 1)

    def describe(self):
        return f"FileStore {self.path!r}"

    # ---- file access ----------------------------------------------------------------------
    class _Lock:
        def __init__(self, store, exclusive):
            self.store, self.mode = store, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH

        def __enter__(self):
            self.store._tlock.acquire()
            if self.store._closed:
                self.store._tlock.release()
                raise DistStoreError(f"{self.store.describe()} is closed")
            fcntl.flock(self.store._fd, self.mode)

        def __exit__(self, *exc):
            fcntl.flock(self.store._fd, fcntl.LOCK_UN)
            self.store._tlock.release()

    def _locked(self, exclusive=False):
        return FileStore._Lock(self, exclusive)

    def _refresh(self) -> int:
        """Parse records appended since the last call; returns the end of the last complete one."""
        size = os.fstat(self._fd).st_size
        if size < self._offset:  # the file was truncated or replaced under us: start over
            self._data.clear()
            self._offset = 0
        if self._offset == 0:
            if size == 0:
                return 0
            head = os.pread(self._fd, len(HEADER), 0)
            if len(head) < len(HEADER):
                return 0
            if head != HEADER:
                raise DistStoreError(f"{self.path!r} is not a TensorBrain FileStore file (bad "
                                     "header); pick a new path or delete it")
            self._offset = len(HEADER)
        if size == self._offset:
            return self._offset
        buf = os.pread(self._fd, size - self._offset, self._offset)
        pos = 0
        while len(buf) - pos >= _REC.size:
            op, klen, vlen = _REC.unpack_from(buf, pos)
            if op not in (b"S", b"D") or klen > P.MAX_KEY_BYTES or vlen > P.MAX_VALUE_BYTES:
                raise DistStoreError(f"{self.describe()}: corrupt record at byte "
                                     f"{self._offset + pos}; delete the file and restart the job")
            end = pos + _REC.size + klen + vlen
            if end > len(buf):
                break
            key = buf[pos + _REC.size:pos + _REC.size + klen].decode("utf-8")
            if op == b"S":
                self._data[key] = buf[pos + _REC.size + klen:end]
            else:
                self._data.pop(key, None)
            pos = end
        self._offset += pos
        return self._offset

    def _append(self, op: bytes, key: str, value: bytes = b""):
        valid_end = self._refresh()
        if os.fstat(self._fd).st_size > valid_end:  # torn tail left by a writer that died
            os.ftruncate(self._fd, valid_end)
        k = key.encode("utf-8")
        if len(k) > P.MAX_KEY_BYTES or len(value) > P.MAX_VALUE_BYTES:
            raise ValueError(f"FileStore key/value exceeds the caps ({P.MAX_KEY_BYTES} / "
                             f"{P.MAX_VALUE_BYTES} bytes)")
        os.write(self._fd, _REC.pack(op, len(k), len(value)) + k + value)
        self._refresh()

    # ---- operations ----------------------------------------------------------------------
    def set(self, key, value):
        key, value = check_key(key), to_bytes(value)
        with self._locked(True):
            self._append(b"S", key, value)

    def get(self, key):
        key = check_key(key)
        self.wait([key])
        with self._locked():
            self._refresh()
            return self._data[key]

    def add(self, key, amount):
        key = check_key(key)
        with self._locked(True):
            self._refresh()
            new = add_rule(self._data.get(key), amount, key)
            self._append(b"S", key, new)
            return int(new)

    def compare_set(self, key, expected, desired):
        key = check_key(key)
        expected, desired = to_bytes(expected, "expected"), to_bytes(desired, "desired")
        with self._locked(True):
            self._refresh()
            result, write = compare_set_rule(self._data.get(key), expected, desired)
            if write:
                self._append(b"S", key, desired)
            return result

    def wait(self, keys, timeout=None):
        keys = [check_key(k) for k in keys]
        td = self.timeout if timeout is None else to_timedelta(timeout)
        deadline = time.monotonic() + td.total_seconds()
        delay = 0.001
        while True:
            with self._locked():
                self._refresh()
                missing = [k for k in keys if k not in self._data]
            if not missing:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise DistStoreError(wait_timeout_message(missing, td, self.describe()))
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.02)

    def check(self, keys):
        keys = [check_key(k) for k in keys]
        with self._locked():
            self._refresh()
            return all(k in self._data for k in keys)

    def delete_key(self, key):
        key = check_key(key)
        with self._locked(True):
            self._refresh()
            if key not in self._data:
                return False
            self._append(b"D", key)
            return True

    def num_keys(self):
        with self._locked():
            self._refresh()
            return sum(1 for k in self._data if not k.startswith(INTERNAL_PREFIX))

    def close(self):
        if self._closed:
            return
        remove = False
        try:
            if self.world_size is not None and self.world_size > 0:
                remove = self.add(_FINISHED, 1) >= self.world_size
        except (DistStoreError, OSError):
            pass
        with self._tlock:
            self._closed = True
            if remove:
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
            os.close(self._fd)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
