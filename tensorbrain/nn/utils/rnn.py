"""Variable-length sequences, as ``torch.nn.utils.rnn``: ``PackedSequence`` and the functions
that pad, pack and unpack.

A ``PackedSequence`` holds the sequences of a batch interleaved step by step: ``data`` has
``sum(lengths)`` rows, step ``t`` owns ``batch_sizes[t]`` of them (the sequences still running,
longest first). The recurrent layers (``tb.nn.LSTM``, ``GRU``, ``RNN``) accept it and run each
step on its own rows only, so padding never enters the computation.

>>> import tensorbrain as tb
>>> from tensorbrain.nn.utils.rnn import pack_sequence, pad_packed_sequence
>>> packed = pack_sequence([tb.tensor([1., 2., 3.]), tb.tensor([4., 5.])])
>>> packed.data.tolist(), packed.batch_sizes.tolist()
([1.0, 4.0, 2.0, 5.0, 3.0], [2, 2, 1])
>>> padded, lengths = pad_packed_sequence(packed, batch_first=True)
>>> padded.tolist(), lengths.tolist()
([[1.0, 2.0, 3.0], [4.0, 5.0, 0.0]], [3, 2])
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..._ops.core import make
from ..._xp import get_array_module, to_numpy
from ...tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence",
           "pad_sequence", "unpad_sequence", "pack_sequence", "unpack_sequence"]


class _PackedSequenceBase(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedSequenceBase):
    """Packed sequences: ``(data, batch_sizes, sorted_indices, unsorted_indices)``, as torch's.

    Build one with :func:`pack_padded_sequence` or :func:`pack_sequence` rather than directly.
    ``batch_sizes`` is an int64 CPU tensor; ``sorted_indices`` orders the original batch by
    decreasing length (None when it was already sorted) and ``unsorted_indices`` is its inverse.
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            raise ValueError("PackedSequence needs batch_sizes: build it with "
                             "pack_padded_sequence or pack_sequence")
        if not isinstance(batch_sizes, Tensor):
            batch_sizes = Tensor._wrap(np.asarray(batch_sizes, dtype=np.int64))
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """Move/cast ``data`` (indices follow its device; ``batch_sizes`` stays on the CPU)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        idx = [None if t is None else t.to(data.device)
               for t in (self.sorted_indices, self.unsorted_indices)]
        return type(self)(data, self.batch_sizes, *idx)

    def cpu(self):
        """``data`` on the CPU."""
        return self.to("cpu")

    def cuda(self, device=None):
        """``data`` on a CUDA device (CuPy)."""
        return self.to("cuda" if device is None else device)

    def double(self):
        """``data`` as float64."""
        return type(self)(self.data.double(), *self[1:])

    def float(self):
        """``data`` as float32."""
        return type(self)(self.data.float(), *self[1:])

    def half(self):
        """``data`` as float16."""
        return type(self)(self.data.half(), *self[1:])

    @property
    def is_cuda(self) -> bool:
        """Whether ``data`` lives on a CUDA device."""
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        """Always False (no pinned host memory here)."""
        return False


def invert_permutation(permutation):
    """The inverse of a permutation given as an int64 tensor (None stays None)."""
    if permutation is None:
        return None
    p = permutation._data
    xp = get_array_module(p)
    out = xp.empty_like(p)
    out[p] = xp.arange(p.shape[0], dtype=p.dtype)
    return Tensor._wrap(out)


# ***** row gather / scatter with gradients *****
def _take_rows(t, idx):
    """``t[idx]`` along dim 0 (``idx`` distinct), backward scatters into zeros."""
    x = t._data
    xp = get_array_module(x)
    out = x[idx]

    def backward(g):
        gx = xp.zeros(x.shape, dtype=g.dtype)
        gx[idx] = g
        return (gx,)
    return make(out, (t,), backward, "IndexBackward")


def _put_rows(t, idx, n, fill):
    """A new ``(n, *t.shape[1:])`` array holding ``fill`` with ``t``'s rows at ``idx``."""
    x = t._data
    xp = get_array_module(x)
    out = xp.full((n,) + x.shape[1:], fill, dtype=x.dtype)
    out[idx] = x
    return make(out, (t,), lambda g: (g[idx],), "IndexPutBackward")


def _lengths_array(lengths):
    arr = to_numpy(lengths._data) if isinstance(lengths, Tensor) else np.asarray(lengths)
    return arr.astype(np.int64).reshape(-1)


def _packed_rows(lengths, max_len):
    """Flat (t * B + b) positions of the packed rows of a time-major padded batch, and
    batch_sizes; ``lengths`` sorted decreasingly."""
    B = len(lengths)
    batch_sizes = (lengths[None, :] > np.arange(max_len)[:, None]).sum(axis=1)
    batch_sizes = batch_sizes[batch_sizes > 0]
    rows = np.concatenate([t * B + np.arange(bs) for t, bs in enumerate(batch_sizes)])
    return rows, batch_sizes.astype(np.int64)


# ***** public functions *****
def pack_padded_sequence(input, lengths, batch_first: bool = False, enforce_sorted: bool = True):
    """Pack a padded batch ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) of sequences of
    the given ``lengths``.

    Args:
        input: the padded batch.
        lengths: list or 1-D tensor of the sequence lengths (each >= 1).
        batch_first: whether ``input`` is ``(B, T, *)``.
        enforce_sorted: when True, ``lengths`` must be non-increasing; when False the batch is
            sorted here and the order is kept in ``sorted_indices``.

    Returns:
        a :class:`PackedSequence`.

    Raises:
        RuntimeError: unsorted lengths with ``enforce_sorted=True``, a zero length, or a
            length longer than the padded batch.
    """
    lens = _lengths_array(lengths)
    b_dim = 0 if batch_first else 1
    if input.dim() < 2 or len(lens) != input.shape[b_dim]:
        want = input.shape[b_dim] if input.dim() > 1 else "?"
        raise RuntimeError(f"pack_padded_sequence: expected {want} lengths for an input of "
                           f"shape {tuple(input.shape)} (batch_first={batch_first}), got "
                           f"{len(lens)}")
    if len(lens) and lens.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element "
                           f"in 'lengths' that is <= 0 (lengths {lens.tolist()})")
    sorted_indices = None
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise RuntimeError(f"`lengths` array must be sorted in decreasing order when "
                               f"`enforce_sorted` is True (got {lens.tolist()}). You can pass "
                               f"`enforce_sorted=False` to pack_padded_sequence and/or "
                               f"pack_sequence to sidestep this requirement if you do not need "
                               f"ONNX exportability.")
    else:
        order = np.argsort(-lens, kind="stable")
        lens = lens[order]
        xp = get_array_module(input._data)
        sorted_indices = Tensor._wrap(xp.asarray(order.astype(np.int64)))
        input = input.index_select(b_dim, sorted_indices)
    if batch_first:
        input = input.transpose(0, 1)
    T, B = input.shape[0], input.shape[1]
    if len(lens) and lens[0] > T:
        raise RuntimeError(f"pack_padded_sequence: a length ({int(lens[0])}) exceeds the padded "
                           f"sequence length {T}")
    rows, batch_sizes = _packed_rows(lens, T)
    flat = input.reshape(T * B, *input.shape[2:])
    data = _take_rows(flat, get_array_module(input._data).asarray(rows))
    return PackedSequence(data, Tensor._wrap(batch_sizes), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None):
    """Undo :func:`pack_padded_sequence`: returns ``(padded, lengths)``, the batch in its
    original order and ``lengths`` an int64 CPU tensor.

    Raises:
        ValueError: ``total_length`` shorter than the longest sequence.
    """
    data, batch_sizes = sequence.data, to_numpy(sequence.batch_sizes._data).astype(np.int64)
    T, B = len(batch_sizes), int(batch_sizes[0])
    if total_length is not None:
        if total_length < T:
            raise ValueError(f"Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {T}")
        T_out = total_length
    else:
        T_out = T
    lens = (batch_sizes[None, :] > np.arange(B)[:, None]).sum(axis=1)
    rows, _ = _packed_rows(lens, T)
    xp = get_array_module(data._data)
    flat = _put_rows(data, xp.asarray(rows), T_out * B, padding_value)
    padded = flat.reshape(T_out, B, *data.shape[1:])
    lengths = lens
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = lens[to_numpy(sequence.unsorted_indices._data)]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, Tensor._wrap(np.asarray(lengths, dtype=np.int64))


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right"):
    """Stack tensors of shape ``(L_i, *)`` into one padded batch, as torch's.

    Args:
        sequences: a list (or a tensor, split along dim 0) of tensors ``(L_i, *)`` with the
            same trailing shape.
        batch_first: give ``(B, max L, *)`` instead of ``(max L, B, *)``.
        padding_value: the value of the padded positions.
        padding_side: ``'right'`` (default) or ``'left'``.

    Returns:
        A new contiguous tensor (``.view`` works on it, as on torch's), differentiable with
        respect to every sequence.
    """
    if padding_side not in ("right", "left"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}")
    if isinstance(sequences, Tensor):
        sequences = [sequences[i] for i in range(sequences.shape[0])]
    if not sequences:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    lens = [s.shape[0] for s in sequences]
    T, B = max(lens), len(sequences)
    trail = tuple(sequences[0].shape[1:])
    for s in sequences:
        if tuple(s.shape[1:]) != trail:
            raise RuntimeError(f"pad_sequence: every sequence must have trailing shape {trail}, "
                               f"got {tuple(s.shape)}")
    from ..._ops.shape import cat
    flat = cat(sequences, 0)
    rows = []
    for b, n in enumerate(lens):
        t = np.arange(n) if padding_side == "right" else np.arange(T - n, T)
        # batch_first fills (B, T) rows directly, so the result is contiguous as torch's is
        # (a transposed time-major result made ``.view(-1)`` on it fail)
        rows.append(b * T + t if batch_first else t * B + b)
    index = np.concatenate(rows)
    xp = get_array_module(flat._data)
    shape = (B, T) if batch_first else (T, B)
    return _put_rows(flat, xp.asarray(index), T * B, padding_value).reshape(*shape, *trail)


def unpad_sequence(padded_sequences, lengths, batch_first: bool = False):
    """Split a padded batch back into a list of tensors of the given ``lengths``."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[i, :int(n)] for i, n in enumerate(_lengths_array(lengths))]


def pack_sequence(sequences, enforce_sorted: bool = True):
    """Pack a list of tensors ``(L_i, *)`` (see :func:`pack_padded_sequence`)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of tensors a :class:`PackedSequence` holds, in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
