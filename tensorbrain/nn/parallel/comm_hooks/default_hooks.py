"""Built-in DDP communication hooks: plain all_reduce and fp16 / bf16 compression.

Each hook has PyTorch's signature ``hook(process_group, bucket) -> Future`` (the state is the
process group, None for the default group) and is registered with
``ddp.register_comm_hook(process_group, hook)``. With a hook registered the reducer does not
pre-divide gradients, so every hook divides by the world size itself.

bfloat16: NumPy and CuPy have no bfloat16 dtype. ``bf16_compress_hook`` therefore rounds the
float32 values to bfloat16 precision (8 exponent bits, 7 mantissa bits; round-to-nearest-even on
the uint32 bit pattern, exactly what a float32 -> bfloat16 cast does) before and after the
reduction, and reduces the rounded values as float32. The numerics match a bfloat16 all_reduce
whose additions are exact; the bytes on the wire are not halved (there is no bfloat16 sum to
run on them). Use ``fp16_compress_hook`` when the point is bandwidth.

>>> import numpy as np
>>> bf16_round(np.array([1.0, 1.00390625, 1.01171875, 3.14159265], dtype=np.float32)).tolist()
[1.0, 1.0, 1.015625, 3.140625]
"""
from __future__ import annotations

import numpy as np

from ...._xp import get_array_module
from ....tensor import Tensor
from .._future import Future

__all__ = ["allreduce_hook", "bf16_compress_hook", "bf16_compress_wrapper", "bf16_round",
           "fp16_compress_hook", "fp16_compress_wrapper"]


def _dist():
    from .... import distributed
    return distributed


def _allreduce_fut(process_group, tensor) -> Future:
    """Average ``tensor`` in place over the group; the Future's value is ``tensor``."""
    dist = _dist()
    world = dist.get_world_size(process_group)
    tensor._data *= 1.0 / world
    work = dist.all_reduce(tensor, group=process_group, async_op=True)
    return Future.from_work(work, tensor)


def allreduce_hook(process_group, bucket) -> Future:
    """The default behaviour as a hook: divide by the world size, all_reduce (SUM).

    >>> ddp.register_comm_hook(None, allreduce_hook)   # doctest: +SKIP
    """
    return _allreduce_fut(process_group, bucket.buffer())


def fp16_compress_hook(process_group, bucket) -> Future:
    """Halve the bytes on the wire: divide, cast to float16, all_reduce, cast back.

    The division happens in the bucket's own precision *before* the cast (PyTorch divides
    after), so a gradient up to 65504 x world_size still fits in float16.
    """
    dist = _dist()
    buf = bucket.buffer()
    world = dist.get_world_size(process_group)
    compressed = (buf._data * (1.0 / world)).astype(np.float16)
    work = dist.all_reduce(Tensor._wrap(compressed), group=process_group, async_op=True)

    def decompress():
        work.wait()
        buf._data[...] = compressed  # casts back to the bucket's dtype
        return buf
    return Future(decompress)


def bf16_round(x):
    """``x`` (float32) rounded to the nearest bfloat16 value, ties to even, returned as float32.

    NaN stays NaN; values beyond bfloat16's range round to +-inf, as a real cast does.
    """
    xp = get_array_module(x)
    x = xp.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    # Add 0x7FFF plus the lowest kept bit, then drop the 16 low bits: round half to even.
    rounded = (u + (((u >> 16) & 1) + np.uint32(0x7FFF))) & np.uint32(0xFFFF0000)
    out = rounded.view(np.float32)
    nan = xp.isnan(x)
    if nan.any():
        out = xp.where(nan, x, out)
    return out


def bf16_compress_hook(process_group, bucket) -> Future:
    """bfloat16 numerics (see the module docstring: emulated, the wire carries float32)."""
    dist = _dist()
    buf = bucket.buffer()
    if buf.dtype != np.float32:
        raise TypeError(f"bf16_compress_hook emulates bfloat16 on float32 buckets; this bucket "
                        f"is {buf.dtype}")
    world = dist.get_world_size(process_group)
    compressed = bf16_round(buf._data) * np.float32(1.0 / world)
    compressed = bf16_round(compressed)
    work = dist.all_reduce(Tensor._wrap(compressed), group=process_group, async_op=True)

    def decompress():
        work.wait()
        buf._data[...] = bf16_round(compressed)
        return buf
    return Future(decompress)


class _CastBucket:
    """A GradBucket whose ``buffer()`` is a compressed copy (what a wrapped hook reduces)."""

    def __init__(self, bucket, buffer: Tensor) -> None:
        self._bucket, self._buffer = bucket, buffer

    def buffer(self) -> Tensor:
        return self._buffer

    def __getattr__(self, name):
        return getattr(self._bucket, name)


def _compress_wrapper(hook, compress, name: str):
    def wrapped(hook_state, bucket) -> Future:
        buf = bucket.buffer()
        fut = hook(hook_state, _CastBucket(bucket, Tensor._wrap(compress(buf._data))))

        def decompress(f):
            value = f.value()
            buf._data[...] = compress(value._data if isinstance(value, Tensor) else value)
            return buf
        return fut.then(decompress)
    wrapped.__name__ = wrapped.__qualname__ = f"{name}_hook"
    return wrapped


def fp16_compress_wrapper(hook):
    """Run ``hook`` on a float16 copy of the bucket and cast its result back (PyTorch's
    ``fp16_compress_wrapper``): ``register_comm_hook(state, fp16_compress_wrapper(powerSGD_hook))``.

    Args:
        hook: a communication hook ``hook(state, bucket) -> Future``.

    Returns:
        The wrapped hook.
    """
    return _compress_wrapper(hook, lambda a: a.astype(np.float16), "fp16_compress_wrapper")


def bf16_compress_wrapper(hook):
    """Run ``hook`` on the bucket rounded to bfloat16 precision and round its result again
    (PyTorch's ``bf16_compress_wrapper``; the values are bfloat16's, kept in the bucket's
    dtype: see the module docstring).

    Args:
        hook: a communication hook ``hook(state, bucket) -> Future``.

    Returns:
        The wrapped hook.
    """
    return _compress_wrapper(hook, bf16_round, "bf16_compress_wrapper")
