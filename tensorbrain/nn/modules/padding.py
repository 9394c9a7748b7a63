"""Padding layers (``torch.nn.modules.padding``): ``ZeroPad1d/2d/3d``, ``ConstantPad*``,
``ReflectionPad*``, ``ReplicationPad*``, ``CircularPad*``, each ``F.pad`` with a mode, made
from the table :data:`PADS` (name -> mode, number of padded dimensions)."""
from __future__ import annotations

from .. import functional as F
from .module import Module

#: class name -> (F.pad's mode, how many trailing dimensions it pads).
PADS = {f"{kind}Pad{nd}d": (mode, nd) for kind, mode in
        (("Zero", "constant"), ("Constant", "constant"), ("Reflection", "reflect"),
         ("Replication", "replicate"), ("Circular", "circular")) for nd in (1, 2, 3)}


class _PadNd(Module):
    """``F.pad(input, padding, mode, value)``; ``padding`` an int (all sides) or
    ``2 * nd`` ints ``(left, right, top, bottom, front, back)``.

    Args:
        padding: the padding.
        value: the fill (Constant pads only).
    """

    mode, nd, has_value = "constant", 1, False

    def __init__(self, padding, value: float = 0.0):
        super().__init__()
        self.padding = (padding,) * (2 * self.nd) if isinstance(padding, int) else tuple(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, self.mode,
                     self.value if self.mode == "constant" else None)

    def extra_repr(self):
        return f"{self.padding}" + (f", value={self.value}" if self.has_value else "")


def _make(name, mode, nd):
    def init_with_value(self, padding, value):
        _PadNd.__init__(self, padding, value)

    def init(self, padding):
        _PadNd.__init__(self, padding)
    __init__ = init_with_value if name.startswith("Constant") else init
    __init__.__name__ = "__init__"
    return type(name, (_PadNd,), {
        "mode": mode, "nd": nd, "has_value": name.startswith("Constant"), "__init__": __init__,
        "__module__": __name__,
        "__doc__": f"Pads the last {nd} dimension(s) with F.pad mode {mode!r} (torch's "
                   f"``nn.{name}``).\n\nArgs:\n    padding: an int or {2 * nd} ints.\n"
                   + ("    value: the fill value.\n" if name.startswith("Constant") else "")})


for _name, (_mode, _nd) in PADS.items():
    globals()[_name] = _make(_name, _mode, _nd)
del _name, _mode, _nd

__all__ = sorted(PADS)
