"""``tb.onnx.operators``: the two size helpers torch keeps for export code; they run eagerly
and an export records them as ``Shape`` and ``Reshape``.
"""
from __future__ import annotations

from typing import Any


def shape_as_tensor(x: Any) -> Any:
    """The shape of ``x`` as a 1-D int64 tensor (torch's ``onnx.operators.shape_as_tensor``).

    Args:
        x: a tensor.

    >>> import tensorbrain as tb
    >>> shape_as_tensor(tb.zeros(2, 3))
    tensor([2, 3])
    """
    import tensorbrain as tb
    return tb.tensor(list(x.shape), dtype=tb.int64)


def reshape_from_tensor_shape(x: Any, shape: Any) -> Any:
    """``x`` reshaped to the sizes held in the 1-D tensor ``shape`` (torch's
    ``onnx.operators.reshape_from_tensor_shape``).

    Args:
        x: a tensor.
        shape: a 1-D integer tensor of sizes (one may be -1).

    Raises:
        RuntimeError: ``shape`` is not a 1-D integer tensor, or does not fit ``x``'s size.
    """
    import numpy as np
    if getattr(shape, "ndim", None) != 1 or np.dtype(shape.dtype).kind not in "iu":
        raise RuntimeError(f"reshape_from_tensor_shape: shape must be a 1-D integer tensor, got "
                           f"{getattr(shape, 'ndim', '?')}-D {getattr(shape, 'dtype', type(shape))}")
    return x.reshape(tuple(int(s) for s in shape.tolist()))
