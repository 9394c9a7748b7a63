"""``tb.torch_version`` (``torch.torch_version``): :class:`TorchVersion`, a version string that
compares with strings, tuples and ``packaging`` versions by version order.

>>> from tensorbrain.torch_version import TorchVersion
>>> TorchVersion("2.10.0") > "2.9.1", TorchVersion("2.1.0") >= (2, 0)
(True, True)
"""
from __future__ import annotations

import re
from collections.abc import Iterable


class InvalidVersion(ValueError):
    """A string that is not a version (``packaging.version.InvalidVersion`` where it exists)."""


def _key(v) -> tuple:
    """A sortable key: the release numbers, then pre-release/dev before the final release."""
    if not isinstance(v, str):
        if isinstance(v, Iterable):
            v = ".".join(str(x) for x in v)
        else:
            v = str(v)
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)(?:(a|b|rc|alpha|beta|c)(\d*))?(?:\.?post(\d*))?"
                 r"(?:\.?dev(\d*))?(?:\+[\w.]+)?\s*$", v)
    if m is None:
        raise InvalidVersion(f"Invalid version: {v!r}")
    release = [int(x) for x in m.group(1).split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    pre = ({"a": 0, "alpha": 0, "b": 1, "beta": 1, "rc": 2, "c": 2}[m.group(2)],
           int(m.group(3) or 0)) if m.group(2) else (3, 0)
    post = int(m.group(4) or 0) if m.group(4) is not None else -1
    dev = int(m.group(5) or 0) if m.group(5) is not None else float("inf")
    if m.group(5) is not None and not m.group(2) and m.group(4) is None:
        pre = (-1, 0)   # 2.0.dev1 sorts before 2.0a1
    return (tuple(release), pre, post, dev)


class TorchVersion(str):
    """A ``str`` whose comparisons follow version order (``"2.10" > "2.9"``), against strings,
    tuples (``(2, 1)``) or versions; a string that is not a version compares as a string."""

    __slots__ = ()

    def _cmp(self, other, op) -> bool:
        try:
            a, b = _key(str(self)), _key(other if not hasattr(other, "release") else str(other))
        except InvalidVersion:
            return getattr(str, op)(self, other)
        return getattr(tuple, op)((a[0], a[1], a[2], a[3]), (b[0], b[1], b[2], b[3])) \
            if op not in ("__eq__", "__ne__") else getattr(tuple, op)(a, b)

    def __gt__(self, other) -> bool:
        return self._cmp(other, "__gt__")

    def __ge__(self, other) -> bool:
        return self._cmp(other, "__ge__")

    def __lt__(self, other) -> bool:
        return self._cmp(other, "__lt__")

    def __le__(self, other) -> bool:
        return self._cmp(other, "__le__")

    def __eq__(self, other) -> bool:
        return self._cmp(other, "__eq__")

    def __ne__(self, other) -> bool:
        return self._cmp(other, "__ne__")

    __hash__ = str.__hash__


__all__ = ["InvalidVersion", "TorchVersion"]
