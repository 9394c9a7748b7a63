"""``parameters_to_vector`` / ``vector_to_parameters``: one flat tensor for all parameters."""
from __future__ import annotations

from ...tensor import Tensor


def parameters_to_vector(parameters) -> Tensor:
    """All parameters flattened and concatenated (a new tensor, differentiable)."""
    from ... import cat
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Copy consecutive slices of ``vec`` into the parameters' arrays in place."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected a Tensor, got {type(vec).__name__}")
    flat = vec._data.reshape(-1)
    offset = 0
    for p in parameters:
        n = p.numel()
        if offset + n > flat.size:
            raise ValueError(f"vector of {flat.size} elements is too short for the parameters "
                             f"(needs at least {offset + n})")
        p._data[...] = flat[offset:offset + n].reshape(p._data.shape)
        p._version[0] += 1
        offset += n
