"""``torch.distributed.elastic.utils.api``: ``macros``, the ``${local_rank}`` macro in worker arguments
(tbrun substitutes it the same way)."""
from __future__ import annotations

from string import Template

__all__ = ["macros"]


class macros:
    """Macros a launcher substitutes in each worker's arguments.

    Example:
        >>> from tensorbrain.distributed.elastic.utils import macros
        >>> macros.substitute(["--rank", macros.local_rank], "3")
        ['--rank', '3']
    """

    local_rank = "${local_rank}"

    @staticmethod
    def substitute(args: list, local_rank: str) -> list:
        """``args`` with ``${local_rank}`` replaced by ``local_rank``.

        Args:
            args: the arguments (non-strings are kept).
            local_rank: the worker's local rank.
        """
        return [Template(a).safe_substitute(local_rank=local_rank) if isinstance(a, str) else a
                for a in args]
