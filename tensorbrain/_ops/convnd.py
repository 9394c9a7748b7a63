"""N-d convolution and transposed convolution (1-d, 2-d, 3-d) by im2col/col2im and BLAS GEMMs.

One implementation serves ``conv1d/2d/3d`` and ``conv_transpose1d/2d/3d``; the spatial rank is
the weight's rank minus 2. The strided windows, ``im2col`` and its adjoint ``col2im`` are in
``windows.py``; im2col's column array is multiplied by the weight in one batched ``matmul`` (a
GEMM per image and group; the output comes out channel-first, no transpose after it).

A convolution is im2col + GEMM forward and GEMM + col2im (input gradient) + GEMM with the
columns forward kept (weight gradient; rebuilt by im2col when they are large) backward. A
transposed convolution is the same two halves the other way round: GEMM + col2im forward, and
im2col of the output gradient shared by input and weight gradients backward (two GEMMs).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .. import _gemm
from .._xp import get_array_module, matmul
from ..amp.autocast_mode import autocast_op  # PyTorch's autocast lists: tensorbrain/amp/_lists.py
from .conv_columns import (_KEEP_COLS_BYTES, _columns_module, _conv2d_columns,  # noqa: F401
                           _conv_transpose2d_folded, _limit, col2im2d, im2col2d)
from . import winograd
from .core import make, sum_axes
from .windows import _col2im, _im2col, _out_size, _pad, _padding, _windows, ntuple


def _flat_input_grad(xp, g, w3, padded_shape, ks, ds, outs, groups):
    """Input gradient of a stride-1 convolution, col2im done on the flattened padded grid.

    With stride 1, output position ``o`` and kernel position ``k`` read flat index
    ``sum((o_i + k_i d_i) * st_i)`` of the padded input (``st`` its row-major strides), so every
    kernel position is one *contiguous* shift when the outputs are laid out on the padded grid
    (``O_0 x Sp_1 x ... x Sp_last``, the extra columns holding a zero gradient). col2im is then
    one long contiguous add per kernel position instead of an add over short strided rows, for
    a GEMM a little wider than the output.

    The GEMM and the adds run a few images at a time (about 1 MiB of columns, so they are
    still in cache when added; the weight is reordered kernel-position-major so each position's
    rows are one block): 17.2 ms against 25.0 ms for all images at once (32x32x32x32 input, 64
    3x3 filters), where the 40 MB column array went out to memory between the GEMM and the adds.
    """
    n, oc = g.shape[:2]
    c = padded_shape[1]
    sp = padded_shape[2:]
    nd = len(ks)
    P, cg, ocg = math.prod(ks), c // groups, oc // groups
    st = [math.prod(sp[i + 1:]) for i in range(nd)]
    ext = (n, oc, outs[0]) + tuple(sp[1:])
    g_ext = xp.zeros(ext, dtype=g.dtype)
    g_ext[(slice(None), slice(None), slice(None)) + tuple(slice(0, o) for o in outs[1:])] = g
    lx = outs[0] * st[0]
    g_ext = g_ext.reshape(n, groups, ocg, lx)
    # (G, P * C/G, OC/G): the rows of kernel position p are block p.
    wp = xp.ascontiguousarray(w3.reshape(groups, ocg, cg, P).transpose(0, 3, 2, 1))
    wp = wp.reshape(groups, P * cg, ocg)
    offs = [sum(q * d * t for q, d, t in zip(pos, ds, st, strict=True))
            for pos in itertools.product(*(range(k) for k in ks))]
    total = math.prod(sp)
    img = xp.zeros((n, groups, cg, total + offs[-1]), dtype=g.dtype)
    chunk = max(1, _limit(xp, _FLAT_CHUNK_BYTES) // (P * c * lx * g.dtype.itemsize))
    for i in range(0, n, chunk):
        gc = matmul(wp, g_ext[i:i + chunk]).reshape(-1, groups, P, cg, lx)
        im = img[i:i + chunk]
        for p, off in enumerate(offs):
            im[..., off:off + lx] += gc[:, :, p]
    return img.reshape(n, c, -1)[:, :, :total].reshape(padded_shape)


def _batched(name, x, nd):
    """``(x with a batch dim, unbatched)``; an input of rank nd+1 gains a batch of 1."""
    if x.ndim == nd + 1:
        return x[None], True
    if x.ndim != nd + 2:
        raise RuntimeError(f"{name}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) "
                           f"input, got shape {tuple(x.shape)}")
    return x, False


def _check(name, input, weight, nd):
    x, w = input._data, weight._data
    if w.ndim != nd + 2:
        raise RuntimeError(f"{name}: weight must be {nd + 2}-D, got shape {tuple(w.shape)}")
    if type(x) is not type(w):
        raise RuntimeError(f"{name}: input is on {input.device} but weight is on {weight.device}")
    if x.dtype != w.dtype:
        raise RuntimeError(f"{name}: input dtype {x.dtype} and weight dtype {w.dtype} differ "
                           f"(cast one with .to(dtype))")


# ***** convolution *****
def _taps_on_input(size, k, s, d, lo, out):
    """``(first, end)``: the kernel taps along one dim that meet the input (not only padding) at
    some output position, widened at the front while needed so that the padding before them,
    ``lo - first * d``, stays >= 0; ``(0, k)`` when every tap does, or none."""
    meet = []
    for t in range(k):
        p0 = t * d - lo                          # where tap t reads for output 0
        o = 0 if p0 >= 0 else (-p0 + s - 1) // s   # the first output where it reads at >= 0
        if p0 <= size - 1 and o <= out - 1 and p0 + o * s <= size - 1:
            meet.append(t)
    if not meet:
        return 0, k
    return min(meet[0], lo // d), meet[-1] + 1


_ONE_GEMM_MAX = 64      # see one_gemm in conv()
_FLAT_MAX_EXTRA = 1.25  # see flat_ok in conv()
_FLAT_CHUNK_BYTES = 1 << 20    # the flat input gradient's columns per GEMM (see _flat_input_grad)
def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, name="conv"):
    """N-d convolution (cross-correlation, as PyTorch); ``nd = weight.ndim - 2``."""
    nd = weight._data.ndim - 2
    _check(name, input, weight, nd)
    x, w = input._data, weight._data
    x, unbatched = _batched(name, x, nd)
    n, c = x.shape[:2]
    size = x.shape[2:]
    oc, cg = w.shape[:2]
    ks = w.shape[2:]
    if groups < 1 or c != cg * groups or oc % groups:
        raise RuntimeError(
            f"{name}: input of shape {tuple(input.shape)} has {c} channels but weight of shape "
            f"{tuple(w.shape)} with groups={groups} expects {cg * groups} (and out_channels "
            f"divisible by groups)")
    ss = ntuple(stride, nd, "stride")
    ds = ntuple(dilation, nd, "dilation")
    lo, hi = _padding(name, padding, ks, ss, ds)
    outs = tuple(_out_size(s, k, st, d, a + b)
                 for s, k, st, d, a, b in zip(size, ks, ss, ds, lo, hi, strict=True))
    if any(o <= 0 for o in outs):
        raise RuntimeError(f"{name}: kernel {tuple(ks)} (dilation {ds}) is larger than the padded "
                           f"input {tuple(s + a + b for s, a, b in zip(size, lo, hi, strict=True))} "
                           f"(input shape {tuple(input.shape)})")
    taps = [_taps_on_input(*a) for a in zip(size, ks, ss, ds, lo, outs, strict=True)]
    if any(t != (0, k) for t, k in zip(taps, ks, strict=True)):
        # Kernel taps that only ever meet the zero padding add nothing: a ResNet's last 3x3
        # convolutions on 1x1 inputs (32x32 images) use one tap of nine. The kernel shrinks to
        # the taps that meet the input (its gradient is zero elsewhere, through the slice) and
        # the padding before moves with it.
        weight = weight[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in taps)]
        w = weight._data
        ks = w.shape[2:]
        lo = tuple(p - a * d for p, (a, _), d in zip(lo, taps, ds, strict=True))
        hi = tuple(max(0, (o - 1) * st + d * (k - 1) + 1 - sz - p)
                   for o, st, d, k, sz, p in zip(outs, ss, ds, ks, size, lo, strict=True))
    W = winograd.transforms_for(x, oc, n * winograd.half(outs[0]) * winograd.half(outs[1])) \
        if nd == 2 and groups == 1 and tuple(ks) == (3, 3) and ss == (1, 1) and ds == (1, 1) else None
    if W is not None:   # 2.25x fewer multiplications (_ops/winograd.py)
        return winograd.conv2d(W, input, weight, bias, x, unbatched, lo, hi)
    pointwise = all(k == 1 for k in ks) and all(s == 1 for s in ss) and not any(lo) and not any(hi)
    C = _columns_module(x) if nd == 2 and groups == 1 and not pointwise else None
    if C is not None:
        geom = (ks[0], ks[1], ss[0], ss[1], lo[0], lo[1], ds[0], ds[1], outs[0], outs[1])
        return _conv2d_columns(C, input, weight, bias, x, unbatched, geom)
    xp = get_array_module(x)
    xpad = _pad(xp, x, lo, hi)
    interior = (slice(None), slice(None)) + tuple(
        slice(a, a + s) for a, s in zip(lo, size, strict=True))   # the unpadded input in xpad
    kg, ocg, L = cg * math.prod(ks), oc // groups, math.prod(outs)
    w3 = w.reshape(groups, ocg, kg)
    # 1x1 stride-1 convolutions need no columns at all: the input is already (N, C, L).
    # With small outputs (L = prod(O) <= 64, a ResNet's last stages on 32x32 inputs) the
    # per-image GEMMs are too thin for BLAS; one (OC x K)@(K x N*L) GEMM is then faster (0.71x
    # the time at L=16; at L=64 a conv step took 16.1 ms against 17.0 ms; 1.5x slower at
    # L=1024), the transpose folded into the im2col copy.
    one_gemm = groups == 1 and (L <= _ONE_GEMM_MAX or xp is not np)   # a GPU: always one GEMM

    # Stride-1 convolutions take their input gradient on the flattened padded grid (see
    # _flat_input_grad) when its extra columns cost at most a quarter more GEMM work.
    flat_ok = not pointwise and all(s == 1 for s in ss) and \
        outs[0] * math.prod(xpad.shape[3:]) <= _FLAT_MAX_EXTRA * L

    def columns():
        if pointwise and not one_gemm:
            return xp.ascontiguousarray(xpad).reshape(n, groups, kg, L)
        cols = _im2col(xp, xpad, ks, ss, ds, outs, one_gemm)   # (K, N*L) when one_gemm
        return cols if one_gemm else cols.reshape(n, groups, kg, L)

    if one_gemm:
        cols = columns()
        out = xp.ascontiguousarray((w3[0] @ cols).reshape(oc, n, L).transpose(1, 0, 2))
    elif pointwise:
        cols = columns()
        out = matmul(w3, cols)   # a GEMM per image and group
    else:
        # A GEMM per image and group, each few images' columns copied just before their GEMM
        # reads them (about 1 MiB at a time, still in cache): 4.4 against 5.0 ms for im2col and
        # GEMM at 32x32x16x16, 64 3x3 filters.
        cols = xp.empty((n, groups, kg, L), dtype=x.dtype)
        out = xp.empty((n, groups, ocg, L), dtype=x.dtype)
        win = _windows(xp, xpad, ks, ss, ds, outs)
        chunk = max(1, _limit(xp, _FLAT_CHUNK_BYTES) // (c * math.prod(ks) * L * x.dtype.itemsize))
        for i in range(0, n, chunk):
            part = cols[i:i + chunk]
            part.reshape(win[i:i + chunk].shape)[...] = win[i:i + chunk]
            matmul(w3, part, out=out[i:i + chunk])
    # The weight gradient needs the columns again: keep them when they are small enough (a
    # ResNet-18 3x3 conv at batch 32 has 231 MB of them; then backward rebuilds them, a copy
    # that costs about a tenth of the GEMM that follows).
    kept = cols if weight.requires_grad and cols.nbytes <= _limit(xp, _KEEP_COLS_BYTES) else None
    del cols
    out = out.reshape((n, oc) + outs)
    if bias is not None:
        out += bias._data.reshape((1, oc) + (1,) * nd)
    if unbatched:
        out = out[0]

    def backward(g):
        if unbatched:
            g = g[None]
        # g may be a stride-0 broadcast (from sum's backward): NumPy's matmul then skips BLAS
        # and runs ~10x slower, so make it contiguous first.
        g = xp.ascontiguousarray(g)
        if one_gemm:
            g4 = xp.ascontiguousarray(g.reshape(n, oc, L).transpose(1, 0, 2)).reshape(oc, n * L)
        else:
            g4 = g.reshape(n, groups, ocg, L)
        gx = gw = gb = None
        if bias is not None and bias.requires_grad:
            gb = sum_axes(g, (0,) + tuple(range(2, 2 + nd)))
        if weight.requires_grad:
            cols = kept if kept is not None else columns()
            if one_gemm:
                # Not (cols @ g4.T).T: 3.3 against 3.6 ms at 32x64x8x8 with 128 3x3 filters,
                # but 4x slower with 512 channels at 1x1 (a 4608x512 result to transpose).
                gw = (g4 @ cols.T).reshape(w.shape)
            else:
                # A GEMM per image, (K, L) @ (L, OC/G), and a sum of the partials: OpenBLAS runs
                # this orientation faster than (OC/G, L) @ (L, K) (15.6 against 18.4 ms for a
                # 32x32x32x32 input and 64 3x3 filters; 4.6 against 5.5 ms at 16x16), and as
                # fast as one GEMM over the batch without its two transposing copies.
                gw = matmul(cols, g4.swapaxes(-1, -2)).sum(axis=0)     # (G, K, OC/G)
                gw = xp.ascontiguousarray(gw.swapaxes(-1, -2)).reshape(w.shape)
        if input.requires_grad and flat_ok:
            gx = _flat_input_grad(xp, g, w3, xpad.shape, ks, ds, outs, groups)
            gx = gx[interior]
            if unbatched:
                gx = gx[0]
        elif input.requires_grad:
            if one_gemm:
                gc = (w3[0].T @ g4).reshape(kg, n, L).transpose(1, 0, 2)
            else:
                gc = matmul(w3.swapaxes(-1, -2), g4)
            if pointwise:
                gx = gc.reshape(x.shape)
            else:
                gxp = _col2im(xp, gc.reshape((n, c) + tuple(ks) + outs), xpad.shape, ks, ss, ds, outs)
                gx = gxp[interior]
            if unbatched:
                gx = gx[0]
        return gx, gw, gb
    return make(out, (input, weight, bias), backward, "ConvolutionBackward", (input, weight))


# ***** transposed convolution *****
_FOLD_MAX = 256   # inputs with at most this many positions fold the batch into one GEMM


def _conv_transpose_projection(input, weight, bias, x, unbatched):
    """A transposed convolution of a 1x1 (1x1x1, 1) input whose output is exactly one kernel (a
    DCGAN generator's first layer, "project and reshape") is a product: ``out (N, Cout*K) = x
    (N, Cin) @ W (Cin, Cout*K)``, with no columns to scatter (the folded 2-D path made ``(Cout*K,
    N)`` columns and scattered them one value at a time: 0.40 ms of col2im and 0.34 of im2col for
    DCGAN's 100 -> 256x4x4 at B=16; the product's forward 1.16 -> 0.52 ms, backward 0.94 -> 0.75,
    docs/training.md "The conv net on an AMD EPYC")."""
    n, w = x.shape[0], weight._data
    x2 = x.reshape(n, -1)                                  # (N, Cin)
    w2 = w.reshape(w.shape[0], -1)                         # (Cin, Cout*K)
    out = _gemm.mm(x2, w2).reshape((n,) + w.shape[1:])
    if bias is not None:
        out += bias._data.reshape((1, -1) + (1,) * (w.ndim - 2))
    if unbatched:
        out = out[0]

    def backward(g):
        if unbatched:
            g = g[None]
        g2 = get_array_module(g).ascontiguousarray(g, dtype=x.dtype).reshape(n, -1)
        gx = gw = gb = None
        if bias is not None and bias.requires_grad:
            gb = sum_axes(g2.reshape(n, w.shape[1], -1), (0, 2))
        if input.requires_grad:
            gx = _gemm.mm(g2, w2.T).reshape(x.shape)
            if unbatched:
                gx = gx[0]
        if weight.requires_grad:
            gw = _gemm.mm(x2.T, g2).reshape(w.shape)
        return gx, gw, gb
    return make(out, (input, weight, bias), backward, "ConvolutionBackward", (input, weight))


def conv_transpose(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                   dilation=1, name="conv_transpose"):
    """N-d transposed convolution (the input-gradient of ``conv``), as PyTorch's
    ``conv_transpose{1,2,3}d``; weight ``(C_in, C_out // groups, *K)``."""
    nd = weight._data.ndim - 2
    _check(name, input, weight, nd)
    x, w = input._data, weight._data
    x, unbatched = _batched(name, x, nd)
    n, c = x.shape[:2]
    size = x.shape[2:]
    cin, ocg = w.shape[:2]
    ks = w.shape[2:]
    if groups < 1 or c != cin or cin % groups:
        raise RuntimeError(
            f"{name}: input of shape {tuple(input.shape)} has {c} channels but weight of shape "
            f"{tuple(w.shape)} expects {cin} (weight is (in_channels, out_channels/groups, *kernel),"
            f" in_channels divisible by groups={groups})")
    if isinstance(padding, str):
        raise ValueError(f"{name}: string padding {padding!r} is not supported for transposed "
                         f"convolutions (as in PyTorch); give ints")
    ss = ntuple(stride, nd, "stride")
    ds = ntuple(dilation, nd, "dilation")
    ps = ntuple(padding, nd, "padding")
    ops = ntuple(output_padding, nd, "output_padding")
    for op, s, d in zip(ops, ss, ds, strict=True):
        if op >= max(s, d):
            raise ValueError(f"{name}: output padding {ops} must be smaller than either stride "
                             f"{ss} or dilation {ds}")
    oc = ocg * groups
    cg = cin // groups
    full = tuple((i - 1) * s + d * (k - 1) + 1 + op
                 for i, s, d, k, op in zip(size, ss, ds, ks, ops, strict=True))
    outs = tuple(f - 2 * p for f, p in zip(full, ps, strict=True))
    if any(o <= 0 for o in outs):
        raise RuntimeError(f"{name}: padding {ps} leaves an empty output {outs} for input of "
                           f"shape {tuple(input.shape)} and kernel {tuple(ks)}")
    if groups == 1 and all(i == 1 for i in size) and not any(ps) and outs == tuple(ks):
        return _conv_transpose_projection(input, weight, bias, x, unbatched)
    C = _columns_module(x) if nd == 2 and groups == 1 else None
    if C is not None:
        geom = (ks[0], ks[1], ss[0], ss[1], ps[0], ps[1], ds[0], ds[1], size[0], size[1])
        return _conv_transpose2d_folded(C, input, weight, bias, x, unbatched, geom, outs)
    xp = get_array_module(x)
    kg, L = ocg * math.prod(ks), math.prod(size)
    w3 = w.reshape(groups, cg, kg)                 # (G, Cin/G, Cout/G * K)
    crop = (slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(ps, outs, strict=True))
    # Small inputs (L = prod(size) <= _FOLD_MAX, the first layers of a DCGAN generator) make
    # the per-image GEMMs thin, and the weight gradient's per-image partials (N, Cin, Cout*K)
    # huge (128 MB for 512->256 channels 4x4 at B=16): fold the batch into one GEMM instead.
    fold = groups == 1 and L <= _FOLD_MAX
    if fold:
        x4 = xp.ascontiguousarray(x.reshape(n, c, L).transpose(1, 0, 2)).reshape(c, n * L)
        cols = (w3[0].T @ x4).reshape((oc,) + tuple(ks) + (n,) + size)   # (Cout*K, N*L)
        cols = cols.transpose((nd + 1,) + tuple(range(nd + 1)) + tuple(range(nd + 2, 2 * nd + 2)))
    else:
        x4 = xp.ascontiguousarray(x).reshape(n, groups, cg, L)
        cols = matmul(w3.swapaxes(-1, -2), x4)      # (N, G, Cout/G * K, L): a GEMM per image
        cols = cols.reshape((n, oc) + tuple(ks) + size)
    img = _col2im(xp, cols, (n, oc) + full, ks, ss, ds, size)
    # A cropped result is copied once (with the bias, when there is one) so that the ops after
    # it (batch norm, activations) read a contiguous array.
    if bias is not None:
        b = bias._data.reshape((1, oc) + (1,) * nd)
        if any(ps):
            out = img[crop] + b
        else:
            out = img
            out += b
    else:
        out = xp.ascontiguousarray(img[crop]) if any(ps) else img
    if unbatched:
        out = out[0]

    def backward(g):
        if unbatched:
            g = g[None]
        gx = gw = gb = None
        if bias is not None and bias.requires_grad:
            gb = sum_axes(g, (0,) + tuple(range(2, 2 + nd)))
        if input.requires_grad or weight.requires_grad:
            # im2col of the output gradient, on the uncropped (full) grid: window i of it holds
            # every output position input pixel i was added into.
            tail = tuple(f - p - o for f, p, o in zip(full, ps, outs, strict=True))
            gfull = _pad(xp, xp.ascontiguousarray(g), ps, tail)
            gcols = _im2col(xp, gfull, ks, ss, ds, size, fold)
            if fold:                                           # gcols (Cout*K, N*L)
                if input.requires_grad:
                    gx = (w3[0] @ gcols).reshape(c, n, L).transpose(1, 0, 2).reshape(x.shape)
                if weight.requires_grad:
                    gw = (x4 @ gcols.T).reshape(w.shape)
            else:
                gcols = gcols.reshape(n, groups, kg, L)
                if input.requires_grad:
                    gx = matmul(w3, gcols).reshape(x.shape)     # (N, G, Cin/G, L)
                if weight.requires_grad:
                    gw = matmul(x4, gcols.swapaxes(-1, -2)).sum(axis=0).reshape(w.shape)
            if gx is not None and unbatched:
                gx = gx[0]
        return gx, gw, gb
    return make(out, (input, weight, bias), backward, "ConvolutionBackward", (input, weight))


# ***** the public functions (tb.nn.functional re-exports them; torch's signatures) *****
# Args, Returns and Raises, once for the convolutions and once for the transposed ones:
_CONV_SECTIONS = """
    Args:
        input: ``(N, C_in, *spatial)`` or unbatched ``(C_in, *spatial)``.
        weight: ``(C_out, C_in // groups, *kernel)``.
        bias: optional ``(C_out,)``.
        stride, dilation: an int or one int per spatial dim.
        padding: an int, one int per spatial dim, ``'valid'`` or ``'same'`` (stride 1 only).
        groups: input and output channels are split into this many independent groups.

    Returns:
        ``(N, C_out, *out)`` with ``out = (in + 2 * padding - dilation * (k - 1) - 1) // stride + 1``.

    Raises:
        RuntimeError: channel/weight/rank/device/dtype mismatches, naming the shapes.
        ValueError: a bad padding string or ``'same'`` with a stride.
"""
_TRANSPOSE_SECTIONS = """
    Args:
        input: ``(N, C_in, *spatial)`` or unbatched ``(C_in, *spatial)``.
        weight: ``(C_in, C_out // groups, *kernel)``.
        bias: optional ``(C_out,)``.
        stride, padding, output_padding, dilation: an int or one int per spatial dim;
            ``output_padding`` must be smaller than stride or dilation.
        groups: input and output channels are split into this many independent groups.

    Returns:
        ``(N, C_out, *out)`` with
        ``out = (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.

    Raises:
        RuntimeError: channel/weight/rank/device/dtype mismatches, naming the shapes.
        ValueError: a string padding or a too large ``output_padding``.
"""


def _sections(text):
    def add(fn):
        fn.__doc__ = fn.__doc__.rstrip() + "\n" + text
        return fn
    return add


def _checked(name, weight, nd):
    if weight._data.ndim != nd + 2:
        raise RuntimeError(f"{name}: weight must be {nd + 2}-D, got shape {tuple(weight._data.shape)}")


@autocast_op("conv1d")
@_sections(_CONV_SECTIONS)
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution over ``(N, C_in, L)``; weight ``(C_out, C_in // groups, k)``.

    >>> import tensorbrain as tb
    >>> tb.nn.functional.conv1d(tb.ones(1, 2, 5), tb.ones(3, 2, 3)).shape
    tb.Size([1, 3, 3])
    """
    _checked("conv1d", weight, 1)
    return conv(input, weight, bias, stride, padding, dilation, groups, "conv1d")


@autocast_op("conv3d")
@_sections(_CONV_SECTIONS)
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution over ``(N, C_in, D, H, W)``; weight ``(C_out, C_in // groups, kD, kH, kW)``.

    >>> import tensorbrain as tb
    >>> tb.nn.functional.conv3d(tb.ones(1, 1, 4, 4, 4), tb.ones(2, 1, 3, 3, 3), padding=1).shape
    tb.Size([1, 2, 4, 4, 4])
    """
    _checked("conv3d", weight, 3)
    return conv(input, weight, bias, stride, padding, dilation, groups, "conv3d")


@autocast_op("conv_transpose1d")
@_sections(_TRANSPOSE_SECTIONS)
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-D transposed convolution; weight ``(C_in, C_out // groups, k)``.

    >>> import tensorbrain as tb
    >>> x, w = tb.ones(1, 2, 4), tb.ones(2, 3, 4)
    >>> tb.nn.functional.conv_transpose1d(x, w, stride=2, padding=1).shape
    tb.Size([1, 3, 8])
    """
    _checked("conv_transpose1d", weight, 1)
    return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation,
                          "conv_transpose1d")


@autocast_op("conv_transpose2d")
@_sections(_TRANSPOSE_SECTIONS)
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-D transposed convolution; weight ``(C_in, C_out // groups, kH, kW)``. Output size per
    dim: ``(in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.

    >>> import tensorbrain as tb
    >>> x, w = tb.ones(1, 4, 8, 8), tb.ones(4, 2, 4, 4)
    >>> tb.nn.functional.conv_transpose2d(x, w, stride=2, padding=1).shape
    tb.Size([1, 2, 16, 16])
    """
    _checked("conv_transpose2d", weight, 2)
    return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation,
                          "conv_transpose2d")


@autocast_op("conv_transpose3d")
@_sections(_TRANSPOSE_SECTIONS)
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-D transposed convolution; weight ``(C_in, C_out // groups, kD, kH, kW)``.

    >>> import tensorbrain as tb
    >>> x, w = tb.ones(1, 2, 2, 2, 2), tb.ones(2, 1, 2, 2, 2)
    >>> tb.nn.functional.conv_transpose3d(x, w, stride=2).shape
    tb.Size([1, 1, 4, 4, 4])
    """
    _checked("conv_transpose3d", weight, 3)
    return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation,
                          "conv_transpose3d")
