"""The store of torchrun's agent, for TensorBrain workers that torchrun itself launched.

torchrun (``python -m torch.distributed.run``) serves a TCPStore at ``MASTER_ADDR:MASTER_PORT``
and tells its workers ``TORCHELASTIC_USE_AGENT_STORE=True``: every rank, rank 0 included, must
join it as a client, and nobody may listen on that port. The agent's store speaks torch's wire
protocol, so TensorBrain reaches it through torch's own client (``torch.distributed.TCPStore``,
``is_master=False``); torch is installed wherever torchrun runs. Errors from torch's client are
raised as TensorBrain's :class:`DistStoreError` naming the address.
"""
from __future__ import annotations

import time
from datetime import timedelta

from ..errors import DistStoreError
from .base import Store, to_timedelta, wait_timeout_message

__all__ = ["TorchAgentStore"]


_NEEDS_TORCH = ("TORCHELASTIC_USE_AGENT_STORE=True (launched by torchrun): joining torchrun's store "
                "needs the real PyTorch in this interpreter (torch.distributed.TCPStore); install "
                "torch, or launch with tbrun instead")


def _torch_distributed():
    try:
        import torch
        import torch.distributed as td
    except ImportError:
        raise DistStoreError(_NEEDS_TORCH) from None
    if "tensorbrain" in (getattr(torch, "__file__", "") or "") or not hasattr(td, "TCPStore"):
        raise DistStoreError(_NEEDS_TORCH)
    return td


class TorchAgentStore(Store):
    """A client of torchrun's agent store (torch's ``TCPStore(is_master=False)``).

    Args:
        host: ``MASTER_ADDR``.
        port: ``MASTER_PORT``.
        timeout: how long a ``get``/``wait`` may block.
    """

    def __init__(self, host: str, port: int, timeout=timedelta(minutes=30)):
        super().__init__(timeout)
        td = _torch_distributed()
        self._where = f"torchrun's agent store at {host}:{port}"
        try:
            self._s = td.TCPStore(host, int(port), is_master=False, timeout=self.timeout)
        except RuntimeError as exc:
            raise DistStoreError(f"cannot join {self._where}: {exc}") from None

    def describe(self) -> str:
        return self._where

    def _call(self, what, fn, *args):
        try:
            return fn(*args)
        except RuntimeError as exc:  # torch's DistStoreError/DistNetworkError derive from it
            raise DistStoreError(f"{self._where}: {what} failed: {exc}") from None

    @staticmethod
    def _bytes(value) -> bytes:
        return value if isinstance(value, bytes) else str(value).encode()

    def set(self, key, value):
        self._call(f"set({key!r})", self._s.set, key, self._bytes(value))

    def get(self, key):
        self.wait([key])  # a missing key times out in our words, without torch's warnings
        return bytes(self._call(f"get({key!r})", self._s.get, key))

    def add(self, key, amount):
        return int(self._call(f"add({key!r})", self._s.add, key, int(amount)))

    def compare_set(self, key, expected, desired):
        return bytes(self._call(f"compare_set({key!r})", self._s.compare_set, key,
                                self._bytes(expected), self._bytes(desired)))

    def wait(self, keys, timeout=None):
        """Wait for ``keys`` by polling ``check``, not with torch's ``wait``.

        Callers wait in short slices (``_liveness.wait_keys``, 0.25 s) and treat a timeout as
        "not yet"; torch's ``wait`` words its timeout ``wait timeout after 250ms`` (which they
        took for a broken store) and prints two ``[c10d] waitForInput ... timed out`` warnings
        per slice. Polling ``check`` never blocks, so neither happens; a timeout raises the
        same message as TensorBrain's own stores.
        """
        keys = list(keys)
        t = self.timeout if timeout is None else to_timedelta(timeout)
        deadline = time.monotonic() + t.total_seconds()
        pause = 0.001
        while not self.check(keys):
            if time.monotonic() >= deadline:
                missing = [k for k in keys if not self.check([k])]
                raise DistStoreError(wait_timeout_message(missing, t, self._where))
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.02)

    def check(self, keys):
        return bool(self._call("check", self._s.check, list(keys)))

    def delete_key(self, key):
        return bool(self._call(f"delete_key({key!r})", self._s.delete_key, key))

    def num_keys(self):
        return int(self._call("num_keys", self._s.num_keys))

    def set_timeout(self, timeout):
        super().set_timeout(timeout)
        self._s.set_timeout(self.timeout)
