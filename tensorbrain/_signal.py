"""Signal helpers of the torch namespace: the windows (``hann_window``, ``hamming_window``,
``blackman_window``, ``bartlett_window``, ``kaiser_window``, periodic by default as torch's)
and ``stft``, the short-time Fourier transform written from ``unfold`` and ``tb.fft`` (so it is
differentiable), as ``torch.stft``.
"""
from __future__ import annotations

import numpy as np

from . import _dtype
from ._factories import tensor as _tensor
from ._ops import combine as CB
from ._ops import elementwise as E
from ._ops import shape as S
from ._tensor_base import TensorBase as Tensor
from ._xp import get_array_module


def _window(name, fn):
    def window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False,
               layout=None, **params):
        n = int(window_length)
        if n == 0:
            arr = np.zeros(0)
        elif n == 1:
            arr = np.ones(1)
        else:
            arr = fn(n + 1, **params)[:-1] if periodic else fn(n, **params)
        t = _tensor(arr.astype(dtype or _dtype.get_default_dtype()), device=device)
        return t.requires_grad_(True) if requires_grad else t
    window.__name__ = window.__qualname__ = name
    window.__doc__ = (f"The {name.split('_')[0].capitalize()} window of ``window_length`` "
                      f"points (periodic: one point of a window one longer, for spectral "
                      f"analysis), as ``torch.{name}``.\n\nArgs:\n    window_length: the "
                      f"length.\n    periodic: periodic (True) or symmetric.\n    dtype: the "
                      f"dtype.\n    device: the device.\n    requires_grad: whether autograd "
                      f"records operations on the result.\n    layout: accepted.\n"
                      f"    **params: the window's parameter (``beta`` for Kaiser).\n\n"
                      f"Returns:\n    Tensor: 1-D.\n\nExample:\n    >>> import tensorbrain as tb\n"
                      f"    >>> tb.{name}(1).tolist()\n    [1.0]\n")
    return window


hann_window = _window("hann_window", lambda n: np.hanning(n))
hamming_window = _window("hamming_window", lambda n: np.hamming(n))
blackman_window = _window("blackman_window", lambda n: np.blackman(n))
bartlett_window = _window("bartlett_window", lambda n: np.bartlett(n))
kaiser_window = _window("kaiser_window", lambda n, beta=12.0: np.kaiser(n, beta))


def _reflect(x, pad, mode):
    """``x`` padded by ``pad`` on both ends of its last dimension (reflect/replicate/constant),
    as an index gather so gradients flow."""
    n = x.shape[-1]
    np_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(mode)
    if np_mode is None:
        zeros = Tensor._wrap(get_array_module(x._data).zeros(x.shape[:-1] + (pad,),
                                                             dtype=x._data.dtype))
        return S.cat([zeros, x, zeros], -1)
    idx = np.pad(np.arange(n), (pad, pad), mode=np_mode)
    xp = get_array_module(x._data)
    return S.index_select(x, x.ndim - 1, Tensor._wrap(xp.asarray(idx)))


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None,
         align_to_window=None):
    """The short-time Fourier transform of a 1-D signal or a batch ``(B, L)``, as
    ``torch.stft``: frames of ``n_fft`` samples every ``hop_length``, times ``window``, each
    transformed.

    Args:
        input: ``(L,)`` or ``(B, L)``.
        n_fft: the frame (and transform) size.
        hop_length: the step between frames (default ``n_fft // 4``).
        win_length: the window's length, centred in the frame (default ``n_fft``).
        window: a ``(win_length,)`` tensor (default ones).
        center: pad ``n_fft // 2`` on both ends so frame ``t`` is centred at ``t * hop``.
        pad_mode: the padding (``"reflect"``, ``"constant"``, ``"replicate"``, ``"circular"``).
        normalized: multiply by ``n_fft ** -0.5``.
        onesided: keep the ``n_fft // 2 + 1`` non-negative frequencies (default for real input).
        return_complex: must be True for real inputs, as torch now requires.
        align_to_window: accepted as None.

    Returns:
        Tensor: complex ``(B?, freqs, frames)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.stft(tb.ones(64), 16, return_complex=True).shape
        tb.Size([9, 17])

    Raises:
        RuntimeError: ``return_complex`` not given (torch's rule) or False.
    """
    from . import fft as F
    if not return_complex:
        raise RuntimeError("stft requires the return_complex parameter be given for real inputs, "
                           "and will further require that return_complex=True in a future "
                           "PyTorch release.")
    hop = hop_length or n_fft // 4
    win_length = win_length or n_fft
    x = S.unsqueeze(input, 0) if input.ndim == 1 else input
    if center:
        x = _reflect(x, n_fft // 2, pad_mode)
    frames = CB.unfold(x, -1, n_fft, hop)                       # (B, T, n_fft)
    if window is not None or win_length < n_fft:
        w = window if window is not None else Tensor._wrap(
            get_array_module(x._data).ones(win_length, dtype=x._data.dtype))
        left = (n_fft - win_length) // 2
        if win_length < n_fft:
            xp = get_array_module(w._data)
            z1 = Tensor._wrap(xp.zeros(left, dtype=w._data.dtype))
            z2 = Tensor._wrap(xp.zeros(n_fft - win_length - left, dtype=w._data.dtype))
            w = S.cat([z1, w, z2])
        frames = E.mul(frames, w)
    one = (input._data.dtype.kind != "c") if onesided is None else onesided
    spec = F.rfft(frames, dim=-1) if one else F.fft(frames, dim=-1)
    if normalized:
        spec = E.mul(spec, n_fft ** -0.5)
    spec = S.transpose(spec, -1, -2)                            # (B, freqs, T)
    return S.squeeze(spec, 0) if input.ndim == 1 else spec
