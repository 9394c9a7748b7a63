"""``tb.device``: where a tensor lives. 'cpu' means NumPy, 'cuda[:N]' means CuPy on GPU N."""
from __future__ import annotations


class device:
    """A device, as ``torch.device``.

    >>> device("cuda:1").index, device("cpu").type
    (1, 'cpu')
    """

    __slots__ = ("type", "index")

    def __init__(self, spec="cpu", index: int | None = None):
        if isinstance(spec, device):
            self.type, self.index = spec.type, spec.index
            return
        if isinstance(spec, int):  # torch accepts a bare ordinal for a CUDA device
            spec, index = "cuda", spec
        if not isinstance(spec, str):
            raise TypeError(f"device must be a string like 'cpu' or 'cuda:0', got {spec!r}")
        kind, _, ordinal = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            from ._config import did_you_mean
            hint = " did you mean cuda?" if kind.lower() in ("gpu", "cuda0") else \
                did_you_mean(kind.lower(), ("cpu", "cuda"), 0.5)
            raise ValueError(f"unknown device {spec!r}:{hint} expected 'cpu', 'cuda' or 'cuda:N'")
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


CPU = device("cpu")


def as_device(spec) -> device:
    """A ``device`` from a user's device argument.

    Args:
        spec: a ``device``, a str such as ``"cuda:1"``, an int GPU index, or None (the CPU).

    Returns:
        device: the device.
    """
    if spec is None:
        return CPU
    return spec if isinstance(spec, device) else device(spec)
