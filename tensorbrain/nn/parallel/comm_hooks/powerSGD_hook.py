"""PowerSGD gradient compression (Vogels et al., 2019), PyTorch's ``powerSGD_hook``.

Each gradient matrix ``M`` (n x m; conv kernels are viewed as ``out x rest``) is replaced by a
rank-``r`` approximation ``P Q^T`` found by one step of power iteration, so a rank sends
``(n + m) r`` numbers instead of ``n m``:

1. add the error left over from the last step (error feedback), keep a copy;
2. ``P = M Q`` with ``Q`` from the last step (warm start) or random (same seed on every rank);
3. all_reduce ``P`` -- together with the small tensors that are not worth compressing (biases;
   a layer is compressed only if ``(n + m) r * min_compression_rate < n m``) in ONE message;
4. orthogonalise ``P`` (Gram-Schmidt), ``Q = M^T P``, all_reduce ``Q`` and divide by the world
   size; ``M ~= P Q^T``;
5. the new error is what the approximation missed: ``M_before - M_after``.

So two all_reduces per bucket and step; PyTorch sends the uncompressed tensors in a third.
Before ``start_powerSGD_iter`` steps the hook is a plain all_reduce (PyTorch: "must be > 1",
because DDP rebuilds its buckets after the first iteration and the per-bucket state is kept by
bucket index).

>>> state = PowerSGDState(process_group=None, matrix_approximation_rank=2,
...                       start_powerSGD_iter=10)                        # doctest: +SKIP
>>> ddp.register_comm_hook(state, powerSGD_hook)                         # doctest: +SKIP
"""
from __future__ import annotations

import logging

import numpy as np

from ...._xp import get_array_module
from ....tensor import Tensor
from .._future import Future
from .default_hooks import _allreduce_fut, _dist

__all__ = ["PowerSGDState", "batched_powerSGD_hook", "powerSGD_hook"]

logger = logging.getLogger(__name__)


class PowerSGDState:
    """Options and per-bucket memory of :func:`powerSGD_hook` (PyTorch's names and defaults)."""

    def __init__(self, process_group, matrix_approximation_rank=1, start_powerSGD_iter=1000,
                 min_compression_rate=2, use_error_feedback=True, warm_start=True,
                 orthogonalization_epsilon=0, random_seed=0,
                 compression_stats_logging_frequency=10000, batch_tensors_with_same_shape=False):
        if (use_error_feedback or warm_start) and start_powerSGD_iter <= 1:
            raise ValueError("Expect `start_powerSGD_iter` > 1 if `use_error_feedback` or "
                             "`warm_start` is enabled, because PowerSGD can only be applied after "
                             "the first two iterations in DDP (the buckets are rebuilt after the "
                             "first).")
        if matrix_approximation_rank < 1:
            raise ValueError(f"matrix_approximation_rank must be >= 1, got "
                             f"{matrix_approximation_rank}")
        self.process_group = process_group
        self.matrix_approximation_rank = int(matrix_approximation_rank)
        self.start_powerSGD_iter = int(start_powerSGD_iter)
        self.min_compression_rate = float(min_compression_rate)
        self.use_error_feedback = bool(use_error_feedback)
        self.warm_start = bool(warm_start)
        self.orthogonalization_epsilon = float(orthogonalization_epsilon)
        self.rng = np.random.RandomState(random_seed)
        self.error_dict: dict = {}
        self.p_memory_dict: dict = {}   # bucket index -> [uncompressed tensors | P matrices]
        self.q_memory_dict: dict = {}
        self.iter = 0
        self.total_numel_before_compression = 0
        self.total_numel_after_compression = 0
        self.compression_stats_logging_frequency = max(1, int(compression_stats_logging_frequency))
        self.next_stats_report = 0
        self.batch_tensors_with_same_shape = bool(batch_tensors_with_same_shape)  # accepted

    def maybe_increase_iter(self, bucket):
        """Count one iteration when ``bucket`` is the step's last one.

        Args:
            bucket: the ``GradBucket`` just reduced.
        """
        if bucket.is_last():
            self.iter += 1
            if self.iter == self.start_powerSGD_iter:
                logger.info("Start to apply PowerSGD after %s iterations.", self.iter)

    def compression_stats(self):
        """(compression rate, numel before, numel after) accumulated so far."""
        rate = (self.total_numel_before_compression / self.total_numel_after_compression
                if self.total_numel_after_compression > 0 else 0)
        return rate, self.total_numel_before_compression, self.total_numel_after_compression


def _orthogonalize(matrix, epsilon=0.0):
    """Gram-Schmidt on the columns of ``matrix`` (n x r), in place. A zero column stays zero."""
    xp = get_array_module(matrix)
    r = matrix.shape[1]
    for i in range(r):
        col = matrix[:, i]
        norm = xp.sqrt(xp.dot(col, col))
        if epsilon == 0:
            if float(norm) > 0:
                col /= norm
        else:
            col /= norm + epsilon
        if i + 1 < r:
            rest = matrix[:, i + 1:]
            rest -= xp.outer(col, col @ rest)


def _should_compress(n, m, r, min_rate):
    return (n + m) * r * min_rate < n * m, n * m, (n + m) * r


def _start(state: PowerSGDState, bucket):
    """Both hooks' start: ``(dist, group, world size, bucket tensor, warm-up Future)``; the
    Future is the plain all_reduce before ``start_powerSGD_iter`` steps, else None."""
    dist = _dist()
    group = state.process_group
    buf_t = bucket.buffer()
    warmup = None
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        warmup = _allreduce_fut(group, buf_t)
    return dist, group, dist.get_world_size(group), buf_t, warmup


def powerSGD_hook(state: PowerSGDState, bucket) -> Future:
    """Rank-``r`` compressed all_reduce of one bucket (see the module docstring)."""
    dist, group, world, buf_t, warmup = _start(state, bucket)
    if warmup is not None:
        return warmup
    buf = buf_t._data
    xp = get_array_module(buf)
    idx = bucket.index()

    # 1. error feedback
    buf_before = None
    if state.use_error_feedback:
        err = state.error_dict.get(idx)
        if err is not None and err.shape == buf.shape:
            buf += err
        else:
            state.error_dict[idx] = xp.zeros_like(buf)
        buf_before = buf.copy()

    # 2. which tensors to compress
    compress, uncompressed = [], []
    for g in bucket.gradients():
        a = g._data
        mat = a.reshape(a.shape[0], -1) if a.ndim >= 1 else a.reshape(1, 1)
        n, m = mat.shape
        r = min(n, m, state.matrix_approximation_rank)
        ok, before, after = _should_compress(n, m, r, state.min_compression_rate)
        state.total_numel_before_compression += before
        if ok and a.ndim > 1:
            compress.append((mat, r))
            state.total_numel_after_compression += after
        else:
            uncompressed.append(a)
            state.total_numel_after_compression += before
    n_unc = sum(a.size for a in uncompressed)
    n_p = sum(mat.shape[0] * r for mat, r in compress)
    n_q = sum(mat.shape[1] * r for mat, r in compress)
    if state.iter >= state.next_stats_report:
        rate, b, a = state.compression_stats()
        logger.info("PowerSGD compression rate %.2f (%d -> %d elements)", rate, b, a)
        state.next_stats_report = state.iter + state.compression_stats_logging_frequency

    first = state.p_memory_dict.get(idx)
    need_random = (not state.warm_start or first is None or first.size != n_unc + n_p
                   or state.q_memory_dict[idx].size != n_q)
    if need_random:
        state.p_memory_dict[idx] = xp.empty(n_unc + n_p, dtype=buf.dtype)
        state.q_memory_dict[idx] = xp.empty(n_q, dtype=buf.dtype)
    first, qmem = state.p_memory_dict[idx], state.q_memory_dict[idx]
    ps, qs, po, qo = [], [], n_unc, 0
    for mat, r in compress:
        n, m = mat.shape
        ps.append(first[po:po + n * r].reshape(n, r))
        qs.append(qmem[qo:qo + m * r].reshape(m, r))
        po, qo = po + n * r, qo + m * r
    if need_random:
        # The same seed on every rank (drawn from the state's own generator, which every rank
        # advances identically), so every rank starts from the same Q.
        seed = state.rng.randint(1_000_000_000)
        gen = np.random.RandomState(seed)
        for q in qs:
            q[...] = xp.asarray(gen.standard_normal(q.shape).astype(buf.dtype))
            _orthogonalize(q, state.orthogonalization_epsilon)
    else:
        for q in qs:
            _orthogonalize(q, state.orthogonalization_epsilon)

    # 3. P = M Q, sent with the uncompressed tensors in one all_reduce
    off = 0
    for a in uncompressed:
        first[off:off + a.size] = a.reshape(-1)
        off += a.size
    for (mat, _), p, q in zip(compress, ps, qs):
        xp.matmul(mat, q, out=p)
    work = dist.all_reduce(Tensor._wrap(first), group=group, async_op=True)

    def finish():
        work.wait()
        inv = 1.0 / world
        off = 0
        for a in uncompressed:
            a[...] = first[off:off + a.size].reshape(a.shape) * inv
            off += a.size
        # 4. orthogonalise P, Q = M^T P, all_reduce Q, M ~= P Q^T
        for p in ps:
            _orthogonalize(p, state.orthogonalization_epsilon)
        for (mat, _), p, q in zip(compress, ps, qs):
            xp.matmul(mat.T, p, out=q)
        if qmem.size:
            dist.all_reduce(Tensor._wrap(qmem), group=group)
            xp.multiply(qmem, inv, out=qmem)
        for (mat, _), p, q in zip(compress, ps, qs):
            xp.matmul(p, q.T, out=mat)
        # 5. error feedback: what the approximation missed
        if state.use_error_feedback:
            xp.subtract(buf_before, buf, out=state.error_dict[idx])
        if not state.warm_start:
            state.p_memory_dict.clear()
            state.q_memory_dict.clear()
        state.maybe_increase_iter(bucket)
        return buf_t
    return Future(finish)


def batched_powerSGD_hook(state: PowerSGDState, bucket) -> Future:
    """PyTorch's ``batched_powerSGD_hook``: the whole bucket, zero-padded to the next square
    (side ``ceil(sqrt(numel))``), is compressed as one matrix with one ``P`` and one ``Q``
    (two all_reduces of ``side x r`` each), with the same error feedback and warm start as
    :func:`powerSGD_hook`. Cheaper than the per-layer hook, coarser (PyTorch recommends a
    higher rank with it).

    Args:
        state: the options and per-bucket memory (``PowerSGDState``).
        bucket: the ``GradBucket``.

    Returns:
        A Future holding the bucket's averaged (approximated) buffer.
    """
    dist, group, world, buf_t, warmup = _start(state, bucket)
    if warmup is not None:
        return warmup
    buf = buf_t._data
    xp = get_array_module(buf)
    total = buf.size
    side = int(np.ceil(np.sqrt(total)))
    r = state.matrix_approximation_rank
    state.total_numel_before_compression += total
    state.total_numel_after_compression += side * r * 2
    padded = xp.zeros(side * side, dtype=buf.dtype)
    padded[:total] = buf.reshape(-1)
    idx = bucket.index()
    before = None
    if state.use_error_feedback:
        err = state.error_dict.get(idx)
        if err is not None and err.shape == padded.shape:
            padded += err
        before = padded.copy()
    matrix = padded.reshape(side, side)
    if not state.warm_start or idx not in state.q_memory_dict or \
            state.q_memory_dict[idx].shape != (side, r):
        seed = state.rng.randint(1_000_000_000)   # the same on every rank
        state.q_memory_dict[idx] = xp.asarray(
            np.random.RandomState(seed).standard_normal((side, r)).astype(buf.dtype))
        state.p_memory_dict[idx] = xp.empty((side, r), dtype=buf.dtype)
    p, q = state.p_memory_dict[idx], state.q_memory_dict[idx]
    _orthogonalize(q, state.orthogonalization_epsilon)
    xp.matmul(matrix, q, out=p)
    work_p = dist.all_reduce(Tensor._wrap(p), group=group, async_op=True)

    def finish():
        work_p.wait()
        _orthogonalize(p, state.orthogonalization_epsilon)
        xp.matmul(matrix.T, p, out=q)
        dist.all_reduce(Tensor._wrap(q), group=group)
        q[...] *= 1.0 / world
        approx = p @ q.T
        if before is not None:
            state.error_dict[idx] = before - approx.reshape(-1)
        if not state.warm_start:
            state.p_memory_dict.pop(idx, None)
            state.q_memory_dict.pop(idx, None)
        buf.reshape(-1)[...] = approx.reshape(-1)[:total]
        state.maybe_increase_iter(bucket)
        return buf_t
    return Future(finish)
