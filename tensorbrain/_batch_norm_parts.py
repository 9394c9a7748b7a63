"""torch's five pieces of a synchronised batch norm (``torch.batch_norm_stats``,
``batch_norm_gather_stats_with_counts``, ``batch_norm_elemt``, ``batch_norm_backward_reduce``,
``batch_norm_backward_elemt``), which SyncBatchNorm implementations (Horovod's, apex's) call
around their own all-gathers. Channel is dimension 1; every other dimension is reduced.
torch has them for CUDA only; here they run on any device, written with tb's ops, and give
the full-batch ``batch_norm`` values and gradients when the per-rank pieces are combined
(tests/test_batch_norm_parts.py).
"""
from __future__ import annotations


from .autograd.grad_mode import no_grad


def _per_channel(t, ndim: int):
    return t.reshape((1, -1) + (1,) * (ndim - 2))


def _dims(x) -> tuple[int, ...]:
    if x.dim() < 2:
        raise ValueError(f"batch norm needs an input with a channel dimension (at least 2-D), "
                         f"got shape {tuple(x.shape)}")
    return (0,) + tuple(range(2, x.dim()))


def batch_norm_stats(input, eps: float):
    """Per-channel mean and inverse standard deviation ``1 / sqrt(var + eps)`` (biased var).

    Args:
        input: ``(N, C, ...)``.
        eps: added to the variance.

    Returns:
        ``(mean, invstd)``, each ``(C,)`` in float32 for half inputs, as torch.

    Example:
        >>> import tensorbrain as tb
        >>> tb.batch_norm_stats(tb.tensor([[1.0], [3.0]]), 0.0)[1].tolist()
        [1.0]
    """
    x = input.float() if input.is_floating_point() and input.dtype.itemsize == 2 else input
    dims = _dims(x)
    mean = x.mean(dim=dims)
    var = ((x - _per_channel(mean, x.dim())) ** 2).mean(dim=dims)
    return mean, (var + eps).rsqrt()


def batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var,
                                        momentum: float, eps: float, counts):
    """Combine per-rank statistics into the whole batch's, updating the running ones in place.

    Args:
        input: this rank's input (only its dtype and device are used).
        mean: ``(world, C)``, the ranks' means.
        invstd: ``(world, C)``, the ranks' ``batch_norm_stats`` inverse standard deviations.
        running_mean: ``(C,)`` or None; becomes ``(1 - momentum) * it + momentum * mean``.
        running_var: ``(C,)`` or None; updated with the unbiased variance.
        momentum: the running-stat momentum.
        eps: the epsilon the ranks used.
        counts: ``(world,)``, the number of elements per channel on each rank.

    Returns:
        ``(mean, invstd)`` of the whole batch, each ``(C,)``.
    """
    c = counts.to(mean.dtype).reshape(-1, 1)
    n = c.sum()
    gmean = (mean * c).sum(0) / n
    var_i = invstd ** -2 - eps
    gvar = (c * (var_i + (mean - gmean) ** 2)).sum(0) / n
    with no_grad():
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(momentum * gmean.to(running_mean.dtype))
        if running_var is not None:
            unbiased = gvar * n / (n - 1)
            running_var.mul_(1 - momentum).add_(momentum * unbiased.to(running_var.dtype))
    return gmean, (gvar + eps).rsqrt()


def batch_norm_elemt(input, weight, bias, mean, invstd, eps: float):
    """Normalise with given statistics: ``(input - mean) * invstd * weight + bias``.

    Args:
        input: ``(N, C, ...)``.
        weight: ``(C,)`` or None (1).
        bias: ``(C,)`` or None (0).
        mean: ``(C,)``.
        invstd: ``(C,)``.
        eps: unused (``invstd`` has it), as torch.
    """
    d = input.dim()
    out = (input - _per_channel(mean, d).to(input.dtype)) * _per_channel(invstd, d).to(input.dtype)
    if weight is not None:
        out = out * _per_channel(weight, d)
    if bias is not None:
        out = out + _per_channel(bias, d)
    return out


def batch_norm_backward_reduce(grad_output, input, mean, invstd, weight, input_g: bool,
                               weight_g: bool, bias_g: bool):
    """This rank's per-channel sums for the backward: ``sum(dy)``, ``sum(dy * (x - mean))``,
    and the weight and bias gradients.

    Args:
        grad_output: ``(N, C, ...)``.
        input: the forward input.
        mean: ``(C,)`` of the whole batch.
        invstd: ``(C,)`` of the whole batch.
        weight: ``(C,)`` or None.
        input_g: return ``sum_dy`` and ``sum_dy_xmu`` (else None).
        weight_g: return the weight gradient (else None).
        bias_g: return the bias gradient (else None).

    Returns:
        ``(sum_dy, sum_dy_xmu, grad_weight, grad_bias)``.
    """
    dims = _dims(input)
    sum_dy = grad_output.sum(dim=dims)
    sum_dy_xmu = (grad_output * (input - _per_channel(mean, input.dim()))).sum(dim=dims)
    grad_weight = sum_dy_xmu * invstd if weight_g else None
    return (sum_dy if input_g else None, sum_dy_xmu if input_g else None, grad_weight,
            sum_dy if bias_g else None)


def batch_norm_backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu,
                              count):
    """The input gradient from the all-reduced sums of :func:`batch_norm_backward_reduce`.

    Args:
        grad_out: ``(N, C, ...)``.
        input: the forward input.
        mean: ``(C,)`` of the whole batch.
        invstd: ``(C,)`` of the whole batch.
        weight: ``(C,)`` or None.
        sum_dy: ``(C,)``, summed over the ranks.
        sum_dy_xmu: ``(C,)``, summed over the ranks.
        count: ``(world,)``, the element counts per channel of the ranks.
    """
    d = input.dim()
    n = count.sum().to(sum_dy.dtype)
    scale = invstd if weight is None else invstd * weight
    xmu = input - _per_channel(mean, d)
    g = grad_out - _per_channel(sum_dy / n, d) \
        - xmu * _per_channel(invstd * invstd * sum_dy_xmu / n, d)
    return g * _per_channel(scale, d)


__all__ = ["batch_norm_backward_elemt", "batch_norm_backward_reduce", "batch_norm_elemt",
           "batch_norm_gather_stats_with_counts", "batch_norm_stats"]
