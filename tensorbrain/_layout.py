"""torch's layouts and memory formats: ``tb.strided``, ``tb.sparse_coo``, ``tb.contiguous_format``,
``tb.channels_last``... (``torch.layout`` and ``torch.memory_format`` objects).

TensorBrain's dense tensors are strided (``t.layout is tb.strided``) and its sparse ones COO
(``tb.sparse_coo``; see ``tensorbrain/sparse.py``) or 2-D CSR / CSC (``tb.sparse_csr``,
``tb.sparse_csc``: ``tensorbrain/_sparse_compressed.py``); the block layouts are names only.
Memory formats are accepted where torch takes them: ``contiguous_format`` and
``preserve_format`` are what every TensorBrain op gives; ``channels_last`` is refused where it
would change a result's layout (``Module.to(memory_format=...)``), as NHWC is not supported.

>>> import tensorbrain as tb
>>> tb.ones(2).layout, tb.channels_last
(torch.strided, torch.channels_last)
"""
from __future__ import annotations


class layout:
    """A tensor layout (``torch.layout``); compare with ``is`` or ``==``.

    Args:
        name: torch's name, e.g. ``"strided"``.
    """

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __reduce__(self):
        return self.name   # pickles as the module attribute of that name


class memory_format:
    """A memory format (``torch.memory_format``).

    Args:
        name: torch's name, e.g. ``"channels_last"``.
    """

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __reduce__(self):
        return self.name


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
sparse_csc = layout("sparse_csc")
sparse_bsr = layout("sparse_bsr")
sparse_bsc = layout("sparse_bsc")
_mkldnn = layout("_mkldnn")
jagged = layout("jagged")

contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")

__all__ = ["channels_last", "channels_last_3d", "contiguous_format", "jagged", "layout",
           "memory_format", "preserve_format", "sparse_bsc", "sparse_bsr", "sparse_coo",
           "sparse_csc", "sparse_csr", "strided"]
