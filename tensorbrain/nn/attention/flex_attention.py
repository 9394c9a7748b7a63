"""``tb.nn.attention.flex_attention`` (``torch.nn.attention.flex_attention``): attention with a
user ``score_mod`` and a ``mask_mod``, computed densely.

torch compiles ``score_mod``/``mask_mod`` into a fused kernel that skips masked blocks;
TensorBrain calls them once on broadcast index tensors (``b (B,1,1,1)``, ``h (1,H,1,1)``,
``q_idx (1,1,L,1)``, ``kv_idx (1,1,1,S)``) to build the full score modification and mask, then
runs plain attention: the same values and gradients, memory ``O(B H L S)``. Rows with every
position masked give zeros, as torch's.

>>> import tensorbrain as tb
>>> from tensorbrain.nn.attention.flex_attention import create_block_mask, flex_attention
>>> causal = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 4, 4)
>>> q = tb.ones(1, 1, 4, 8)
>>> flex_attention(q, q, q, block_mask=causal).shape
tb.Size([1, 1, 4, 8])
"""
from __future__ import annotations

import math
from typing import NamedTuple

from ... import _xp
from ..._factories import arange
from ..._ops import elementwise as E
from ..._ops import reduce as R
from ..._ops import shape as S
from ..._ops.softmax import softmax


def _indices(B, H, L, Sk, device=None):
    return (S.reshape(arange(B, device=device), B, 1, 1, 1),
            S.reshape(arange(H, device=device), 1, H, 1, 1),
            S.reshape(arange(L, device=device), 1, 1, L, 1),
            S.reshape(arange(Sk, device=device), 1, 1, 1, Sk))


def noop_mask(b, h, q_idx, kv_idx):
    """Keep every position.

    Args:
        b: the batch index tensor.
        h: the head index tensor.
        q_idx: the query positions.
        kv_idx: the key positions.
    """
    return E.ge_(q_idx * 0 + kv_idx * 0, 0)


def and_masks(*mask_mods):
    """A mask_mod keeping the positions every one of ``mask_mods`` keeps.

    Args:
        *mask_mods: the masks.
    """
    def mod(b, h, q_idx, kv_idx):
        out = noop_mask(b, h, q_idx, kv_idx)
        for m in mask_mods:
            out = out & m(b, h, q_idx, kv_idx)
        return out
    return mod


def or_masks(*mask_mods):
    """A mask_mod keeping the positions any of ``mask_mods`` keeps.

    Args:
        *mask_mods: the masks.
    """
    def mod(b, h, q_idx, kv_idx):
        out = ~noop_mask(b, h, q_idx, kv_idx)
        for m in mask_mods:
            out = out | m(b, h, q_idx, kv_idx)
        return out
    return mod


class BlockMask:
    """A mask for :func:`flex_attention`, held dense (see the module docstring).

    Args:
        mask_mod: ``(b, h, q_idx, kv_idx) -> bool tensor``.
        shape: ``(B, H, Q_LEN, KV_LEN)``.
        mask: the bool tensor ``mask_mod`` gives, broadcast to ``shape``.
        BLOCK_SIZE: accepted (torch's block size).
    """

    def __init__(self, mask_mod, shape, mask, BLOCK_SIZE=128):  # noqa: N803
        self.mask_mod, self.shape, self.mask = mask_mod, tuple(shape), mask
        self.seq_lengths = self.shape[2:]
        self.BLOCK_SIZE = BLOCK_SIZE

    def to_dense(self):
        """The mask as an int tensor ``(B, H, Q_LEN, KV_LEN)`` (1 where kept)."""
        return self.mask.long()

    def __repr__(self):
        return f"BlockMask(shape={self.shape}, dense)"


def create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device="cpu"):  # noqa: N803
    """The dense bool mask of ``mask_mod``, ``(B, H, Q_LEN, KV_LEN)`` (None sizes are 1).

    Args:
        mask_mod: the mask function.
        B: the batch size or None.
        H: the head count or None.
        Q_LEN: the query length.
        KV_LEN: the key length.
        device: ``"cuda"`` (torch's default) moves to a GPU when one is usable.
    """
    B, H = B or 1, H or 1
    dev = None if device in (None, "cpu") or (str(device).startswith("cuda") and not
                                               _xp.cuda_available()) else device
    b, h, q, kv = _indices(B, H, Q_LEN, KV_LEN, dev)
    mask = mask_mod(b, h, q, kv)
    return S.expand(mask, B, H, Q_LEN, KV_LEN)


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device="cuda", BLOCK_SIZE=128,  # noqa: N803
                      _compile=False):
    """A :class:`BlockMask` from ``mask_mod``, as ``torch...create_block_mask`` (without a GPU
    the mask is made on the CPU, where TensorBrain's attention will run).

    Args:
        mask_mod: ``(b, h, q_idx, kv_idx) -> bool tensor``.
        B: the batch size, or None (one mask for all).
        H: the head count, or None.
        Q_LEN: the query length.
        KV_LEN: the key length.
        device: where to build it.
        BLOCK_SIZE: accepted.
        _compile: accepted.

    Returns:
        BlockMask: the mask.
    """
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    return BlockMask(mask_mod, (B or 1, H or 1, Q_LEN, KV_LEN), mask, BLOCK_SIZE)


class AuxRequest(NamedTuple):
    """Which auxiliary outputs :func:`flex_attention` returns (``return_aux=``), as torch's.

    Args:
        lse: the log-sum-exp of each query's scores.
        max_scores: the largest score of each query.
    """
    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """The auxiliary outputs of :func:`flex_attention`: None where not requested."""
    lse: object = None
    max_scores: object = None


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                   enable_gqa=False, return_lse=False, kernel_options=None, *,
                   return_aux=None):
    """``softmax(score_mod(q k^T * scale)) v`` over the positions ``block_mask`` keeps, as
    ``torch.nn.attention.flex_attention.flex_attention``.

    Args:
        query: ``(B, Hq, L, E)``.
        key: ``(B, Hkv, S, E)``.
        value: ``(B, Hkv, S, Ev)``.
        score_mod: ``(score, b, h, q_idx, kv_idx) -> score``, or None.
        block_mask: a :class:`BlockMask`, or None.
        scale: the scores' factor (default ``1 / sqrt(E)``).
        enable_gqa: share each key/value head among ``Hq / Hkv`` query heads.
        return_lse: also return the log-sum-exp of the scores per query.
        kernel_options: accepted.
        return_aux: an :class:`AuxRequest`: then ``(out, AuxOutput(lse, max_scores))`` is
            returned, each ``(B, Hq, L)`` or None where not requested.

    Returns:
        Tensor ``(B, Hq, L, Ev)``, or ``(out, lse)`` with ``return_lse``, or ``(out,
        AuxOutput)`` with ``return_aux``.

    Raises:
        ValueError: head counts that do not match without ``enable_gqa``; both ``return_lse``
            and ``return_aux`` (torch's error).
    """
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is "
                         "deprecated, please use return_aux=AuxRequest(lse=True) instead.")
    B, Hq, L, E_ = query.shape
    Hkv, Sk = key.shape[1], key.shape[2]
    if Hkv != Hq:
        if not enable_gqa or Hq % Hkv:
            raise ValueError(f"flex_attention: query has {Hq} heads and key {Hkv}; set "
                             f"enable_gqa=True when the key heads are shared")
        from ..._ops.rearrange import repeat_interleave
        key = repeat_interleave(key, Hq // Hkv, 1)
        value = repeat_interleave(value, Hq // Hkv, 1)
    scores = E.mul(S.matmul(query, S.transpose(key, -2, -1)),
                   1.0 / math.sqrt(E_) if scale is None else scale)
    if score_mod is not None:
        scores = score_mod(scores, *_indices(B, Hq, L, Sk, None if not query.is_cuda
                                             else query.device))
    keep = None
    if block_mask is not None:
        keep = block_mask.mask
        scores = E.where(keep, scores, float("-inf"))
    lse = R.logsumexp(scores, -1)
    probs = softmax(scores, -1)
    if keep is not None:   # a row with nothing kept: zeros, as torch's
        any_kept = R.any(keep, -1, True)
        probs = E.where(any_kept, probs, 0.0)
    out = S.matmul(probs, value)
    if return_aux is not None:
        return out, AuxOutput(lse if return_aux.lse else None,
                              R.amax(scores, -1) if return_aux.max_scores else None)
    return (out, lse) if return_lse else out


__all__ = ["AuxOutput", "AuxRequest", "BlockMask", "and_masks", "create_block_mask", "create_mask", "flex_attention",
           "noop_mask", "or_masks"]
