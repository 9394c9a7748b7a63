"""Key-value stores for rendezvous: TCPStore, FileStore, HashStore, PrefixStore.

Same names and semantics as ``torch.distributed``'s stores; see ``docs/stores.md`` for the user
guide, the wire format's caps and the optional shared secret (``TB_STORE_SECRET``).

>>> from tensorbrain.distributed.store import HashStore
>>> s = HashStore(); s.set("k", "v"); s.get("k")
b'v'
"""
from ._store.base import DEFAULT_TIMEOUT, HashStore, PrefixStore, Store
from ._store.file import FileStore
from ._store.tcp import TCPStore

__all__ = ["Store", "TCPStore", "FileStore", "HashStore", "PrefixStore", "DEFAULT_TIMEOUT"]
