"""``tb.nn.attention.varlen`` (``torch.nn.attention.varlen``): attention over packed
variable-length sequences, described by cumulative sequence offsets (``cu_seq_q``/``cu_seq_k``).

torch runs Flash Attention's varlen kernel (CUDA only); TensorBrain runs plain attention per
sequence, with the same window (``window_size=(left, right)``, causal as ``(-1, 0)``,
bottom-right aligned when a sequence has more keys than queries), grouped-query heads, the
key-cache options (``seqused_k``, a paged ``block_table``) and the log-sum-exp: the same values
and gradients, one sequence at a time.

>>> import tensorbrain as tb
>>> from tensorbrain.nn.attention.varlen import varlen_attn
>>> q = tb.ones(5, 2, 8)                       # two sequences packed: 2 and 3 tokens
>>> cu = tb.tensor([0, 2, 5], dtype=tb.int32)
>>> varlen_attn(q, q, q, cu, cu, 3, 3).shape
tb.Size([5, 2, 8])
"""
from __future__ import annotations

import math
from typing import NamedTuple

from ..._factories import arange
from ..._ops import elementwise as E
from ..._ops import reduce as R
from ..._ops import shape as S
from ..._ops.softmax import softmax


class AuxRequest(NamedTuple):
    """Which auxiliary outputs :func:`varlen_attn` returns (``return_aux=``), as torch's.

    Args:
        lse: the log-sum-exp of each query's scores, ``(T_q, H_q)``.
    """
    lse: bool = False


def _offsets(cu, name: str) -> list[int]:
    vals = [int(v) for v in cu.tolist()]
    if len(vals) < 2 or any(b < a for a, b in zip(vals, vals[1:])) or vals[0] != 0:
        raise ValueError(f"varlen_attn: {name} must be non-decreasing offsets starting at 0, "
                         f"shape (N + 1,); got {vals}")
    return vals


def _one(q, k, v, scale, window, enable_gqa):
    """Attention of one sequence: q ``(Lq, Hq, D)``, k/v ``(Lk, Hkv, D)`` -> out, lse."""
    Lq, Hq, D = q.shape
    Lk, Hkv = k.shape[0], k.shape[1]
    if Hkv != Hq:
        from ..._ops.rearrange import repeat_interleave
        k, v = repeat_interleave(k, Hq // Hkv, 1), repeat_interleave(v, Hq // Hkv, 1)
    qh, kh, vh = (S.transpose(t, 0, 1) for t in (q, k, v))     # (H, L, D)
    scores = E.mul(S.matmul(qh, S.transpose(kh, -2, -1)), scale)
    left, right = window
    if left >= 0 or right >= 0:
        # bottom-right alignment: query i sits at key position i + Lk - Lq
        rel = (arange(Lk, device=q.device).reshape(1, Lk)
               - arange(Lq, device=q.device).reshape(Lq, 1) - (Lk - Lq))
        keep = (rel >= -left) if left >= 0 else (rel <= right)
        if left >= 0 and right >= 0:
            keep = keep & (rel <= right)
        scores = E.where(keep, scores, float("-inf"))
        any_kept = R.any(keep, -1, True)
    else:
        any_kept = None
    lse = R.logsumexp(scores, -1)                                 # (H, Lq)
    probs = softmax(scores, -1)
    if any_kept is not None:
        probs = E.where(any_kept, probs, 0.0)
    out = S.matmul(probs, vh)                                     # (H, Lq, D)
    return S.transpose(out, 0, 1), S.transpose(lse, 0, 1)


def varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None,
                scale=None, window_size=(-1, -1), enable_gqa=False, seqused_k=None,
                block_table=None, num_splits=None):
    """Attention over packed sequences, as ``torch.nn.attention.varlen.varlen_attn``.

    Args:
        query: ``(T_q, H_q, D)``, the sequences' queries one after another.
        key: ``(T_k, H_kv, D)``, or pages ``(total_pages, page_size, H_kv, D)`` with
            ``block_table``.
        value: shaped as ``key``.
        cu_seq_q: ``(N + 1,)`` offsets of the sequences in ``query``.
        cu_seq_k: ``(N + 1,)`` offsets in ``key``/``value`` (None with ``block_table``).
        max_q: the longest query sequence (accepted; the offsets give the lengths).
        max_k: the longest key sequence (accepted).
        return_aux: an :class:`AuxRequest`; with ``lse=True`` the result is ``(out, lse)``.
        scale: the scores' factor (default ``1 / sqrt(D)``).
        window_size: ``(left, right)`` key positions each query sees around its own (-1:
            unbounded); ``(-1, 0)`` is causal.
        enable_gqa: allow ``H_kv`` to divide ``H_q`` (grouped-query attention).
        seqused_k: ``(N,)``: only the first ``seqused_k[i]`` keys of sequence i take part.
        block_table: ``(N, max_pages)`` page numbers of each sequence's keys (needs
            ``seqused_k``).
        num_splits: accepted (one sequence at a time gives the same bits either way).

    Returns:
        ``(T_q, H_q, D)``, or ``(out, lse)`` with ``lse`` ``(T_q, H_q)``.

    Raises:
        ValueError: head counts that do not divide, without ``enable_gqa``; bad offsets;
            ``block_table`` without ``seqused_k``.
    """
    Hq, D = query.shape[1], query.shape[-1]
    Hkv = key.shape[-2]
    if Hkv != Hq and (not enable_gqa or Hq % Hkv):
        raise ValueError(f"varlen_attn: query has {Hq} heads and key {Hkv}; set "
                         f"enable_gqa=True when the key heads are shared")
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    qs = _offsets(cu_seq_q, "cu_seq_q")
    used = [int(v) for v in seqused_k.tolist()] if seqused_k is not None else None
    if block_table is not None:
        if used is None:
            raise ValueError("varlen_attn: block_table needs seqused_k (the valid tokens of "
                             "each sequence)")
        pages = block_table.tolist()
        ks = None
    else:
        ks = _offsets(cu_seq_k, "cu_seq_k")
        if len(ks) != len(qs):
            raise ValueError(f"varlen_attn: cu_seq_q has {len(qs) - 1} sequences and cu_seq_k "
                             f"{len(ks) - 1}")
    outs, lses = [], []
    for i in range(len(qs) - 1):
        q = query[qs[i]:qs[i + 1]]
        if ks is None:
            k = S.reshape(key[pages[i]], -1, Hkv, D)
            v = S.reshape(value[pages[i]], -1, Hkv, value.shape[-1])
        else:
            k, v = key[ks[i]:ks[i + 1]], value[ks[i]:ks[i + 1]]
        if used is not None:
            k, v = k[:used[i]], v[:used[i]]
        if q.shape[0] == 0:
            continue
        o, lse = _one(q, k, v, scale, tuple(window_size), enable_gqa)
        outs.append(o)
        lses.append(lse)
    out = S.cat(outs, 0) if outs else query.new_zeros((0, Hq, value.shape[-1]))
    if return_aux is not None and return_aux.lse:
        return out, (S.cat(lses, 0) if lses else query.new_zeros((0, Hq)))
    return out


def varlen_attn_out(out, query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *,
                    return_aux=None, scale=None, window_size=(-1, -1), enable_gqa=False,
                    seqused_k=None, block_table=None, num_splits=None):
    """:func:`varlen_attn` written into ``out`` (``(T_q, H_q, D)``), as
    ``torch.nn.attention.varlen.varlen_attn_out``; returns ``out`` (and the lse).

    Args:
        out: the tensor to write.
        query: see :func:`varlen_attn`.
        key: see :func:`varlen_attn`.
        value: see :func:`varlen_attn`.
        cu_seq_q: see :func:`varlen_attn`.
        cu_seq_k: see :func:`varlen_attn`.
        max_q: see :func:`varlen_attn`.
        max_k: see :func:`varlen_attn`.
        return_aux: see :func:`varlen_attn`.
        scale: see :func:`varlen_attn`.
        window_size: see :func:`varlen_attn`.
        enable_gqa: see :func:`varlen_attn`.
        seqused_k: see :func:`varlen_attn`.
        block_table: see :func:`varlen_attn`.
        num_splits: see :func:`varlen_attn`.

    Returns:
        ``out``, or ``(out, lse)``.
    """
    res = varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, return_aux=return_aux,
                      scale=scale, window_size=window_size, enable_gqa=enable_gqa,
                      seqused_k=seqused_k, block_table=block_table, num_splits=num_splits)
    values = res[0] if isinstance(res, tuple) else res
    out.copy_(values)
    return (out, res[1]) if isinstance(res, tuple) else out


__all__ = ["AuxRequest", "varlen_attn", "varlen_attn_out"]
