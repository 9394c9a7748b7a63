"""How tensors print: ``repr(t)`` and ``tb.set_printoptions`` (torch's ``torch/_tensor_str.py``).

Below the Tensor class (``TensorBase.__repr__`` calls :func:`tensor_repr`), so it reads a
tensor only through its attributes and imports nothing of the tensor layer.

>>> import tensorbrain as tb
>>> tb.set_printoptions(precision=2); print(tb.tensor([1 / 3]))
tensor([0.33])
>>> tb.set_printoptions(profile="default")
"""
from __future__ import annotations

import math

import numpy as np

from . import _dtype, _xp

#: The options :func:`tensor_repr` prints with (:func:`set_printoptions` changes them).
PRINT_OPTIONS: dict = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80,
                       "sci_mode": None}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None) -> None:
    """How tensors print, as ``torch.set_printoptions`` (``profile``: ``"default"``,
    ``"short"`` or ``"full"``).

    Args:
        precision: digits after the decimal point (default 4).
        threshold: summarise tensors with more elements (default 1000).
        edgeitems: items shown at each end when summarising (default 3).
        linewidth: characters per line (default 80).
        profile: a preset.
        sci_mode: force scientific notation (True) or not (False); None decides.
    """
    opts = PRINT_OPTIONS
    if profile is not None:
        presets: dict[str, dict] = {
            "default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
            "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
            "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)}
        opts.update(presets[profile])
    for key, value in (("precision", precision), ("threshold", threshold),
                       ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            opts[key] = value
    opts["sci_mode"] = sci_mode


def tensor_repr(t) -> str:
    """``repr(t)``: ``tensor([...], dtype=..., grad_fn=<...>)`` as torch prints it.

    Args:
        t: a tensor (its ``_data``, ``is_cuda``, ``device``, ``grad_fn`` and ``requires_grad``
            are read).
    """
    arr = _xp.to_numpy(t._data)
    if arr.dtype == _dtype.bfloat16:  # NumPy prints ml_dtypes' bfloat16 as integers
        arr = arr.astype(np.float32)
    opts = PRINT_OPTIONS
    threshold = opts["threshold"]
    body = np.array2string(arr, separator=", ", precision=opts["precision"],
                           prefix="tensor(", max_line_width=opts["linewidth"],
                           threshold=int(min(threshold, 2 ** 62)),
                           edgeitems=opts["edgeitems"],
                           floatmode=None if opts["sci_mode"] is None else "maxprec",
                           formatter={"float_kind": "{:e}".format} if opts["sci_mode"]
                           else None)
    extras = []
    if t.is_cuda:
        extras.append(f"device='{t.device}'")
    if t._data.dtype not in (_dtype.float32, _dtype.int64, _dtype.bool_):
        extras.append(f"dtype={t._data.dtype}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"


__all__ = ["PRINT_OPTIONS", "set_printoptions", "tensor_repr"]
