"""torch.distributed.elastic.multiprocessing's ``errors`` (``record``, ``ErrorHandler``) and
:class:`Std` (which streams of which local ranks to redirect or tee, as ``tbrun``'s
``--redirects`` / ``--tee`` take them). ``start_processes`` is missing: ``tbrun`` starts
workers."""
from __future__ import annotations

import enum
import re

_VALUE_REGEX = r"^[0-3]$"
_MAPPING_REGEX = r"^(\d:[0-3],)*(\d:[0-3])$"


class Std(enum.IntFlag):
    """Standard streams: NONE, OUT, ERR, ALL (torch's)."""

    NONE = 0
    OUT = 1
    ERR = 2
    ALL = OUT | ERR

    @classmethod
    def from_str(cls, vm: str) -> Std | dict[int, Std]:
        """``"1"`` -> ``Std.OUT``; ``"0:3,1:0"`` -> ``{0: Std.ALL, 1: Std.NONE}``.

        Args:
            vm: a value, or ``local_rank:value`` pairs.

        Raises:
            ValueError: anything else, as torch's.
        """
        if re.match(_VALUE_REGEX, vm):
            return cls(int(vm))
        if re.match(_MAPPING_REGEX, vm):
            return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
        raise ValueError(f"{vm} does not match: <{_VALUE_REGEX}> or <{_MAPPING_REGEX}>")


__all__ = ["Std"]
