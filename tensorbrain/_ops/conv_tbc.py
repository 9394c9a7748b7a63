"""``torch.conv_tbc``: a 1-D convolution in fairseq's time-batch-channel layout, as ``conv1d``
on the transposed input (so values and gradients are conv1d's)."""
from __future__ import annotations

from .convnd import conv1d


def conv_tbc(input, weight, bias, pad: int = 0):
    """1-D convolution over ``(T, B, C_in)`` with a ``(K, C_in, C_out)`` weight.

    Args:
        input: ``(time, batch, in_channels)``.
        weight: ``(kernel, in_channels, out_channels)``.
        bias: ``(out_channels,)``.
        pad: zeros added at both ends of the time axis.

    Returns:
        ``(time + 2 * pad - kernel + 1, batch, out_channels)``.

    Raises:
        RuntimeError: shapes that do not fit, as torch's.

    Example:
        >>> import tensorbrain as tb
        >>> tb.conv_tbc(tb.ones(5, 2, 3), tb.ones(3, 3, 4), tb.zeros(4), 1).shape
        tb.Size([5, 2, 4])
    """
    if input.dim() != 3 or weight.dim() != 3 or bias.dim() != 1:
        raise RuntimeError(f"conv_tbc: input must be 3-D (got {input.dim()}-D), weight 3-D "
                           f"(got {weight.dim()}-D) and bias 1-D (got {bias.dim()}-D)")
    if input.shape[2] != weight.shape[1] or bias.shape[0] != weight.shape[2]:
        raise RuntimeError(f"conv_tbc: input channels {input.shape[2]} must match weight "
                           f"{tuple(weight.shape)}[1], and bias {tuple(bias.shape)} its "
                           f"output channels")
    out = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


__all__ = ["conv_tbc"]
