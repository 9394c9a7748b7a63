"""Staging: the contiguous host buffers a CPU transport communicates through, for arrays it
cannot use directly (:func:`stage`; :func:`stage_in`, the read-only form; :func:`finisher`)."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .base import Array

#: copies a staged result back into the caller's array
Finish = Callable[[], None]


def stage(array: Array, copy_in: bool = True) -> tuple[np.ndarray, Finish]:
    """``(host, finish)``: a C-contiguous host array to communicate through, and ``finish()``
    copying it back into ``array`` (the backend runs it before the op's Work completes).

    ``host`` is ``array`` itself when it already is a contiguous NumPy array (``finish`` then
    does nothing); otherwise a host copy (CuPy arrays are copied device-to-host after the device
    is synchronised, since CPU transports cannot read device memory), holding ``array``'s values
    when ``copy_in`` (False for outputs only written).
    """
    if type(array) is np.ndarray and array.flags.c_contiguous:
        return array, _noop
    from ... import _xp
    if _xp.is_cupy_array(array):
        cp = _xp.cupy()
        if copy_in:
            cp.cuda.get_current_stream().synchronize()
            host = np.ascontiguousarray(cp.asnumpy(array))
        else:
            host = np.empty(array.shape, dtype=array.dtype)

        def to_device() -> None:
            array[...] = cp.asarray(host)
            cp.cuda.get_current_stream().synchronize()
        return host, to_device
    host = np.ascontiguousarray(array) if copy_in else np.empty(array.shape, array.dtype)

    def finish() -> None:
        np.copyto(array, host)
    return host, finish


def stage_in(array: Array) -> np.ndarray:
    """:func:`stage`'s host buffer of an input that is only read (``array`` itself when it
    already is contiguous on the host)."""
    return stage(array)[0]


def finisher(staged: Iterable[tuple[Array, Finish | None]]) -> Finish | None:
    """One ``finish()`` for :func:`stage`'s ``(host, finish)`` pairs (or a backend's own, with
    None for no copy-back), or None when none copies back."""
    fins = [f for _, f in staged if f is not None and f is not _noop]
    if not fins:
        return None

    def finish() -> None:
        for f in fins:
            f()
    return finish


def _noop() -> None:
    return None
