"""Placements: how a DTensor is laid out along one dimension of its DeviceMesh (torch's
``torch.distributed.tensor.placement_types``).

``Shard(d)`` splits tensor dimension ``d`` across the mesh dimension's ranks the way
``torch.chunk`` does: every rank gets ``ceil(size / n)`` rows except the last ones, which get the
remainder (possibly none). ``Replicate()`` gives every rank the whole tensor; ``Partial(op)`` gives
every rank a summand (or a max/min candidate) of the value, to be reduced later.

>>> from tensorbrain.distributed.tensor import Shard, Replicate
>>> Shard(0), Replicate(), Shard(0) == Shard(0)
(Shard(dim=0), Replicate(), True)
>>> Shard(0).local_range(10, 4, 3)      # rows of a 10-row tensor held by rank 3 of 4
(9, 10)
"""
from __future__ import annotations

__all__ = ["Partial", "Placement", "Replicate", "Shard"]   # and _StridedShard (private, as torch)


class Placement:
    """Base class of the placement types."""

    def is_shard(self, dim: int | None = None) -> bool:
        """True for ``Shard`` (on ``dim`` when given).

        Args:
            dim: a tensor dimension to compare with, or None for any.
        """
        return False

    def is_replicate(self) -> bool:
        """True for ``Replicate``."""
        return False

    def is_partial(self) -> bool:
        """True for ``Partial``."""
        return False


class Shard(Placement):
    """Split tensor dimension ``dim`` across the ranks of one mesh dimension (torch.chunk rule).

    Args:
        dim: the tensor dimension to split (negative counts from the end, resolved against the
            tensor's rank when the DTensor is built).
    """

    def __init__(self, dim: int = 0):
        self.dim = int(dim)

    def is_shard(self, dim: int | None = None) -> bool:
        """Whether this placement shards (dimension ``dim``, when given).

        Args:
            dim: a tensor dimension to compare with, or None for any.

        Returns:
            A bool.
        """
        return dim is None or dim == self.dim

    @staticmethod
    def chunk_size(size: int, num_chunks: int) -> int:
        """Rows per chunk under ``torch.chunk``: ``ceil(size / num_chunks)``.

        Args:
            size: the dimension's length.
            num_chunks: the number of chunks.
        """
        return -(-size // num_chunks) if num_chunks else 0

    @staticmethod
    def local_range(size: int, num_chunks: int, index: int) -> tuple:
        """``(start, stop)`` of chunk ``index``; empty ranges at the end when size is small.

        Args:
            size: the dimension's length.
            num_chunks: the number of chunks.
            index: the chunk's index.
        """
        c = Shard.chunk_size(size, num_chunks)
        start = min(index * c, size)
        return start, min(start + c, size)

    def __eq__(self, other) -> bool:
        return type(other) is Shard and other.dim == self.dim

    def __hash__(self) -> int:
        return hash(("Shard", self.dim))

    def __repr__(self) -> str:
        return f"Shard(dim={self.dim})"


class _StridedShard(Shard):
    """``Shard(dim)`` applied *after* the mesh dimensions to its right that shard the same
    tensor dimension (torch's private ``_StridedShard``): what FSDP produces when it shards a
    tensor-parallel ``Shard(0)`` parameter's local rows over the data-parallel mesh dimension.

    On a ``(dp, tp)`` mesh, ``(_StridedShard(0, split_factor=tp), Shard(0))`` means: rank
    ``(d, t)`` holds chunk ``d`` (over dp) of chunk ``t`` (over tp) of the rows, where plain
    ``(Shard(0), Shard(0))`` would mean chunk ``t`` of chunk ``d``.

    Args:
        dim: the tensor dimension.
        split_factor: the number of chunks the later mesh dimensions cut ``dim`` into first.
    """

    def __init__(self, dim: int = 0, split_factor: int = 1):
        super().__init__(dim)
        self.split_factor = int(split_factor)

    def __eq__(self, other) -> bool:
        return (isinstance(other, _StridedShard) and other.dim == self.dim
                and other.split_factor == self.split_factor)

    def __hash__(self) -> int:
        return hash(("_StridedShard", self.dim, self.split_factor))

    def __repr__(self) -> str:
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"


class Replicate(Placement):
    """Every rank of the mesh dimension holds the whole tensor."""

    def is_replicate(self) -> bool:
        """Always True: this placement replicates.

        Returns:
            True.
        """
        return True

    def __eq__(self, other) -> bool:
        return isinstance(other, Replicate)

    def __hash__(self) -> int:
        return hash("Replicate")

    def __repr__(self) -> str:
        return "Replicate()"


_PARTIAL_OPS = ("sum", "avg", "max", "min")


class Partial(Placement):
    """Each rank holds a partial value; the tensor is their reduction by ``reduce_op``.

    Args:
        reduce_op: ``"sum"`` (default), ``"avg"``, ``"max"`` or ``"min"``.

    Raises:
        ValueError: an unknown reduce op.
    """

    def __init__(self, reduce_op: str = "sum"):
        op = str(getattr(reduce_op, "value", reduce_op)).lower()
        if op not in _PARTIAL_OPS:
            raise ValueError(f"Partial: reduce_op {reduce_op!r} is not supported; use one of "
                             f"{_PARTIAL_OPS}")
        self.reduce_op = op

    def is_partial(self) -> bool:
        """Always True: this placement holds partial values still to be reduced.

        Returns:
            True.
        """
        return True

    def __eq__(self, other) -> bool:
        return isinstance(other, Partial) and other.reduce_op == self.reduce_op

    def __hash__(self) -> int:
        return hash(("Partial", self.reduce_op))

    def __repr__(self) -> str:
        return f"Partial({self.reduce_op})"
