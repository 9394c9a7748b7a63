"""``tb.device``: where a tensor lives. 'cpu' means NumPy, 'cuda[:N]' means CuPy on GPU N, 'meta'
a shape and a dtype without values (``_xp.MetaArray``).

``with tb.device("meta"):`` (or ``tb.set_default_device``) makes it the device of tensors
created without a ``device=`` argument, as torch's device context does: the FSDP2 idiom builds a
large model that way, shards it, then gives it storage with ``Module.to_empty``.
"""
from __future__ import annotations


class device:
    """A device, as ``torch.device``.

    >>> device("cuda:1").index, device("cpu").type
    (1, 'cpu')
    """

    __slots__ = ("type", "index")
    type: str
    index: int | None

    def __init__(self, spec="cpu", index: int | None = None):
        if isinstance(spec, device):
            self.type, self.index = spec.type, spec.index
            return
        if isinstance(spec, int):  # torch accepts a bare ordinal for a CUDA device
            spec, index = "cuda", spec
        if not isinstance(spec, str):
            raise TypeError(f"device must be a string like 'cpu' or 'cuda:0', got {spec!r}")
        kind, _, ordinal = spec.partition(":")
        if kind not in ("cpu", "cuda", "meta"):
            from ._config import did_you_mean
            hint = " did you mean cuda?" if kind.lower() in ("gpu", "cuda0") else \
                did_you_mean(kind.lower(), ("cpu", "cuda", "meta"), 0.5)
            raise ValueError(f"unknown device {spec!r}:{hint} expected 'cpu', 'cuda', 'cuda:N' "
                             f"or 'meta'")
        if ordinal:
            if index is not None:
                raise ValueError(f"device {spec!r} already names an index; do not pass index={index}")
            if not ordinal.isdigit():
                raise ValueError(f"bad device index in {spec!r}")
            index = int(ordinal)
        # torch accepts 'cpu:N' and keeps N; there is one host memory, so every cpu index is it
        self.type = kind
        self.index = index

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        if not isinstance(other, device):
            return NotImplemented
        if self.type != other.type:
            return False
        # 'cuda' (current device) equals 'cuda:N' for the current N, as a tensor's device is
        # always concrete; compare indices only when both name one.
        return self.index is None or other.index is None or self.index == other.index

    def __hash__(self):
        return hash(self.type)

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type='{self.type}'" + ("" if self.index is None else f", index={self.index}") + ")"

    def __enter__(self):
        _DEFAULT.append(self)
        return self

    def __exit__(self, *exc):
        _DEFAULT.pop()
        return False


CPU = device("cpu")
META = device("meta")
#: the default device stack: ``with device(...)`` pushes, ``set_default_device`` sets the base
_DEFAULT: list = [CPU]


def get_default_device() -> device:
    """The device of tensors created without ``device=`` (torch's ``get_default_device``).

    Example:
        >>> with device("meta"):
        ...     get_default_device()
        device(type='meta')
    """
    return _DEFAULT[-1]


def set_default_device(spec) -> None:
    """Make ``spec`` the device of tensors created without ``device=`` (None: the CPU), as
    torch's ``set_default_device``.

    Args:
        spec: a device, a string such as ``"meta"`` or ``"cuda:0"``, or None.
    """
    _DEFAULT[0] = CPU if spec is None else (spec if isinstance(spec, device) else device(spec))


def as_device(spec) -> device:
    """A ``device`` from a user's device argument.

    Args:
        spec: a ``device``, a str such as ``"cuda:1"``, an int GPU index, or None (the default
            device: the CPU unless a ``with device(...)`` block or ``set_default_device`` says
            otherwise).

    Returns:
        device: the device.
    """
    if spec is None:
        return _DEFAULT[-1]
    return spec if isinstance(spec, device) else device(spec)
