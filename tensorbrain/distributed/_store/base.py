"""The abstract :class:`Store` and the in-process stores (HashStore, PrefixStore).

A store is the small key-value service every rank of a job can reach: ranks publish their
addresses in it, count arrivals with ``add``, and block in ``get``/``wait`` until a peer has
written. Semantics follow ``torch.distributed.Store``: values are bytes (``str`` is encoded as
UTF-8), ``add`` keeps its counter as decimal ASCII (so ``get`` after ``add(k, 3)`` is ``b"3"``),
``compare_set`` sets only when the current value equals ``expected`` (an absent key matches
``b""``), and a ``get``/``wait`` that does not see its keys within the timeout raises
:class:`DistStoreError` naming the keys, the timeout and the store.

>>> from tensorbrain.distributed.store import HashStore, PrefixStore
>>> s = HashStore()
>>> s.set("a", "1"); s.add("n", 2)
2
>>> s.add("n", 3)
5
>>> s.get("a"), s.get("n")
(b'1', b'5')
>>> PrefixStore("job", s).set("a", b"x"); s.get("job/a")
b'x'
"""
from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Iterable

from ..errors import DistStoreError

DEFAULT_TIMEOUT = timedelta(seconds=300)

# Keys the stores use for their own bookkeeping; hidden from num_keys() so user counts are honest.
INTERNAL_PREFIX = "__tb_internal/"


def to_bytes(value, what: str = "value") -> bytes:
    """Values are bytes; str is UTF-8 encoded (torch accepts both)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"store {what} must be bytes or str, got {type(value).__name__}")


def check_key(key) -> str:
    if not isinstance(key, str):
        raise TypeError(f"store keys must be str, got {type(key).__name__}")
    return key


def to_timedelta(timeout) -> timedelta:
    if isinstance(timeout, timedelta):
        return timeout
    if isinstance(timeout, (int, float)):
        return timedelta(seconds=timeout)
    raise TypeError(f"timeout must be a datetime.timedelta or seconds, got {type(timeout).__name__}")


def fmt_timeout(td: timedelta) -> str:
    return f"{td.total_seconds():g} s"


def compare_set_rule(current: bytes | None, expected: bytes, desired: bytes) -> tuple[bytes, bool]:
    """torch's compare_set: returns (value to report, whether to write desired).

    Absent key and expected == b"" -> write desired; absent key otherwise -> report expected
    (nothing written); present and equal -> write desired; present and different -> report current.
    """
    if current is None:
        return (desired, True) if expected == b"" else (expected, False)
    if current == expected:
        return desired, True
    return current, False


def add_rule(current: bytes | None, amount: int, key: str) -> bytes:
    base = 0
    if current is not None:
        try:
            base = int(current.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            raise DistStoreError(f"store add({key!r}): the current value {current[:40]!r} is not "
                                 "an integer counter") from None
    return str(base + int(amount)).encode("ascii")


class Store:
    """Abstract key-value store (torch.distributed.Store's interface)."""

    def __init__(self, timeout=DEFAULT_TIMEOUT):
        self._timeout = to_timedelta(timeout)

    # ---- the interface -------------------------------------------------------------------
    def set(self, key: str, value) -> None:
        """Set ``key`` to ``value`` and wake every rank waiting for it.

        Args:
            key: the key (a non-empty str).
            value: bytes, or a str (stored UTF-8 encoded).

        Raises:
            DistStoreError: the store cannot be reached.
        """
        raise NotImplementedError

    def get(self, key: str) -> bytes:
        """The value of ``key``; blocks until it is set or the store timeout passes.

        Args:
            key: the key.

        Returns:
            bytes: the value.

        Raises:
            DistStoreError: the key was not set within the timeout (the message names it).
        """
        raise NotImplementedError

    def add(self, key: str, amount: int) -> int:
        """Add ``amount`` to the integer counter ``key`` (0 when absent), atomically.

        Args:
            key: the key.
            amount: the increment (may be negative or 0, to read the counter).

        Returns:
            int: the new value.

        Raises:
            DistStoreError: ``key`` holds something that is not an integer counter.
        """
        raise NotImplementedError

    def compare_set(self, key: str, expected, desired) -> bytes:
        """Set ``key`` to ``desired`` if it holds ``expected`` (or is absent and ``expected``
        is empty), atomically, as torch's ``Store.compare_set``.

        Args:
            key: the key.
            expected: the value it must hold (bytes or str).
            desired: the value to write.

        Returns:
            bytes: the value after the call (``desired`` when written, else the current one,
            or ``expected`` for an absent key).
        """
        raise NotImplementedError

    def wait(self, keys: list[str], timeout=None) -> None:
        """Block until every key in ``keys`` is set.

        Args:
            keys: the keys.
            timeout: a ``timedelta`` or seconds; None: the store's timeout.

        Raises:
            DistStoreError: a key was still missing at the timeout (the message names them).
        """
        raise NotImplementedError

    def check(self, keys: list[str]) -> bool:
        """Whether every key in ``keys`` is set, without waiting.

        Args:
            keys: the keys.

        Returns:
            bool: True when all are set.
        """
        raise NotImplementedError

    def delete_key(self, key: str) -> bool:
        """Delete ``key``.

        Args:
            key: the key.

        Returns:
            bool: whether it existed.
        """
        raise NotImplementedError

    def num_keys(self) -> int:
        """The number of keys set (the store's own bookkeeping keys not counted).

        Returns:
            int: the count.
        """
        raise NotImplementedError

    # ---- shared conveniences ---------------------------------------------------------------
    @property
    def timeout(self) -> timedelta:
        """The default timeout of ``get`` and ``wait`` (a ``timedelta``)."""
        return self._timeout

    def set_timeout(self, timeout) -> None:
        """Change the default timeout of ``get`` and ``wait``.

        Args:
            timeout: a ``timedelta`` or seconds.
        """
        self._timeout = to_timedelta(timeout)

    def multi_set(self, keys: list[str], values: list) -> None:
        """Set each of ``keys`` to the matching one of ``values``.

        Args:
            keys: the keys.
            values: as many values (bytes or str).

        Raises:
            ValueError: the two lists differ in length.
        """
        if len(keys) != len(values):
            raise ValueError(f"multi_set: {len(keys)} keys but {len(values)} values")
        for k, v in zip(keys, values):
            self.set(k, v)

    def multi_get(self, keys: list[str]) -> list[bytes]:
        """The values of ``keys``, each waited for as ``get`` does.

        Args:
            keys: the keys.

        Returns:
            list[bytes]: the values, in the order of ``keys``.
        """
        return [self.get(k) for k in keys]

    def describe(self) -> str:
        """How errors name this store (its address or file)."""
        return type(self).__name__

    def close(self) -> None:
        """Release connections/files. Safe to call twice."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class HashStore(Store):
    """An in-process, thread-safe store (a dict and a condition variable).

    Useful for tests and for several "ranks" living as threads in one process.
    """

    def __init__(self, timeout=DEFAULT_TIMEOUT):
        super().__init__(timeout)
        self._data: dict[str, bytes] = {}
        self._cond = threading.Condition()

    def describe(self) -> str:
        return f"HashStore at {id(self):#x}"

    def set(self, key, value):
        key, value = check_key(key), to_bytes(value)
        with self._cond:
            self._data[key] = value
            self._cond.notify_all()

    def get(self, key):
        key = check_key(key)
        self.wait([key])
        with self._cond:
            return self._data[key]

    def add(self, key, amount):
        key = check_key(key)
        with self._cond:
            new = add_rule(self._data.get(key), amount, key)
            self._data[key] = new
            self._cond.notify_all()
            return int(new)

    def compare_set(self, key, expected, desired):
        key = check_key(key)
        expected, desired = to_bytes(expected, "expected"), to_bytes(desired, "desired")
        with self._cond:
            result, write = compare_set_rule(self._data.get(key), expected, desired)
            if write:
                self._data[key] = desired
                self._cond.notify_all()
            return result

    def wait(self, keys, timeout=None):
        keys = [check_key(k) for k in keys]
        td = self._timeout if timeout is None else to_timedelta(timeout)
        deadline = time.monotonic() + td.total_seconds()
        with self._cond:
            while True:
                missing = [k for k in keys if k not in self._data]
                if not missing:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DistStoreError(wait_timeout_message(missing, td, self.describe()))
                self._cond.wait(left)

    def check(self, keys):
        with self._cond:
            return all(check_key(k) in self._data for k in keys)

    def delete_key(self, key):
        with self._cond:
            return self._data.pop(check_key(key), None) is not None

    def num_keys(self):
        with self._cond:
            return sum(1 for k in self._data if not k.startswith(INTERNAL_PREFIX))


def wait_timeout_message(missing: Iterable[str], timeout: timedelta, where: str) -> str:
    missing = list(missing)
    shown = ", ".join(repr(k) for k in missing[:8]) + (" ..." if len(missing) > 8 else "")
    return (f"timed out after {fmt_timeout(timeout)} waiting for key(s) {shown} on {where}; "
            "the rank(s) expected to set them did not (crashed, slower, or using another "
            "store/prefix?)")


class PrefixStore(Store):
    """Every key of ``store`` seen through ``prefix + "/"`` (torch.distributed.PrefixStore)."""

    def __init__(self, prefix: str, store: Store):
        if not isinstance(store, Store):
            raise TypeError(f"PrefixStore needs a Store, got {type(store).__name__}")
        super().__init__(store.timeout)
        self.prefix = check_key(prefix)
        self.underlying_store = store

    def _k(self, key: str) -> str:
        return f"{self.prefix}/{check_key(key)}"

    @property
    def timeout(self):
        """The underlying store's timeout."""
        return self.underlying_store.timeout

    def set_timeout(self, timeout):
        self.underlying_store.set_timeout(timeout)

    def describe(self):
        return f"{self.underlying_store.describe()} (prefix {self.prefix!r})"

    def set(self, key, value):
        self.underlying_store.set(self._k(key), value)

    def get(self, key):
        return self.underlying_store.get(self._k(key))

    def add(self, key, amount):
        return self.underlying_store.add(self._k(key), amount)

    def compare_set(self, key, expected, desired):
        return self.underlying_store.compare_set(self._k(key), expected, desired)

    def wait(self, keys, timeout=None):
        self.underlying_store.wait([self._k(k) for k in keys], timeout)

    def check(self, keys):
        return self.underlying_store.check([self._k(k) for k in keys])

    def delete_key(self, key):
        return self.underlying_store.delete_key(self._k(key))

    def num_keys(self):
        # torch returns the underlying store's count; so do we (a prefix has no cheap count).
        return self.underlying_store.num_keys()

    def multi_get(self, keys):
        return self.underlying_store.multi_get([self._k(k) for k in keys])

    def multi_set(self, keys, values):
        self.underlying_store.multi_set([self._k(k) for k in keys], values)
