"""The fused float32 kernels on the GPU: CuPy's RawModule/ElementwiseKernel/ReductionKernel
versions of ``tensorbrain._C``'s fused kernels (csrc/kernels/fused.cpp), under the same names and
signatures, so an op asks ``_fused_module(x)`` once and runs either.

Why: on CuPy every array expression is one kernel launch of about 20-90 us of host time (an H200
machine's CPU, measured), and a training step there is bound by the host. The twins in
``tensorbrain/_ops`` take 10-25 launches for a layer norm or batch norm forward and backward;
these take 1-4. Figures: docs/gpu.md.

Every function takes C-contiguous float32 CuPy arrays (``_fused_module`` checks that) and mirrors
its NumPy twin's order of operations where it can; tests/test_cuda_fused.py compares each with
its twin on the GPU. Kernels compile once per process, on first use (NVRTC, through CuPy).
"""
from __future__ import annotations

import functools

import numpy as np

from .._xp import cupy as _cupy

_NT = 256  # threads per block of the row and channel kernels (block_sum below assumes <= 1024)

_SOURCE = r"""
#define NT 256
#define NEG_INF (__int_as_float(0xff800000))
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// The sum (max) over the block, returned to every thread; sh holds 32 floats. The leading
// __syncthreads lets a second call reuse sh after every thread read the first call's result.
__device__ float block_sum(float v, float* sh) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = lane < (NT >> 5) ? sh[lane] : 0.f;
        v = warp_sum(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}
__device__ float block_max(float v, float* sh) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = lane < (NT >> 5) ? sh[lane] : NEG_INF;
        v = warp_max(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

// ---- layer norm over rows of D ----
extern "C" __global__ void ln_fwd(const float* __restrict__ x, const float* __restrict__ w,
        const float* __restrict__ b, float* __restrict__ out, float* __restrict__ mean,
        float* __restrict__ rstd, long long D, float eps, int has_w, int has_b) {
    __shared__ float sh[32];
    const float* xr = x + blockIdx.x * D;
    float* o = out + blockIdx.x * D;
    float s = 0.f;
    for (long long i = threadIdx.x; i < D; i += NT) s += xr[i];
    float mu = block_sum(s, sh) / (float)D;
    float v = 0.f;
    for (long long i = threadIdx.x; i < D; i += NT) { float d = xr[i] - mu; v += d * d; }
    float rs = 1.f / sqrtf(block_sum(v, sh) / (float)D + eps);
    for (long long i = threadIdx.x; i < D; i += NT) {
        float y = (xr[i] - mu) * rs;
        if (has_w) y *= w[i];
        if (has_b) y += b[i];
        o[i] = y;
    }
    if (threadIdx.x == 0) { mean[blockIdx.x] = mu; rstd[blockIdx.x] = rs; }
}
// gx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)), gh = g * w
extern "C" __global__ void ln_bwd(const float* __restrict__ x, const float* __restrict__ mean,
        const float* __restrict__ rstd, const float* __restrict__ w, const float* __restrict__ g,
        float* __restrict__ gx, long long D, int has_w) {
    __shared__ float sh[32];
    const float* xr = x + blockIdx.x * D;
    const float* gr = g + blockIdx.x * D;
    float* o = gx + blockIdx.x * D;
    float mu = mean[blockIdx.x], rs = rstd[blockIdx.x];
    float s1 = 0.f, s2 = 0.f;
    for (long long i = threadIdx.x; i < D; i += NT) {
        float gh = has_w ? gr[i] * w[i] : gr[i];
        s1 += gh;
        s2 += gh * ((xr[i] - mu) * rs);
    }
    float m1 = block_sum(s1, sh) / (float)D;
    float m2 = block_sum(s2, sh) / (float)D;
    for (long long i = threadIdx.x; i < D; i += NT) {
        float gh = has_w ? gr[i] * w[i] : gr[i];
        o[i] = rs * (gh - m1 - ((xr[i] - mu) * rs) * m2);
    }
}

// ---- batch norm over (N, C, HW): one block per channel ----
extern "C" __global__ void bn_stats(const float* __restrict__ x, float* __restrict__ mean,
        float* __restrict__ var, long long N, long long C, long long HW) {
    __shared__ float sh[32];
    long long c = blockIdx.x, total = N * HW;
    float s = 0.f;
    for (long long k = threadIdx.x; k < total; k += NT) {
        long long n = k / HW;
        s += x[(n * C + c) * HW + (k - n * HW)];
    }
    float mu = block_sum(s, sh) / (float)total;
    float v = 0.f;
    for (long long k = threadIdx.x; k < total; k += NT) {
        long long n = k / HW;
        float d = x[(n * C + c) * HW + (k - n * HW)] - mu;
        v += d * d;
    }
    v = block_sum(v, sh) / (float)total;
    if (threadIdx.x == 0) { mean[c] = mu; var[c] = v; }
}
// per channel: sg = sum(g), sgx = sum(g * xhat)
extern "C" __global__ void bn_bwd_sums(const float* __restrict__ g, const float* __restrict__ x,
        const float* __restrict__ mean, const float* __restrict__ rstd, float* __restrict__ sg,
        float* __restrict__ sgx, long long N, long long C, long long HW) {
    __shared__ float sh[32];
    long long c = blockIdx.x, total = N * HW;
    float mu = mean[c], rs = rstd[c], s1 = 0.f, s2 = 0.f;
    for (long long k = threadIdx.x; k < total; k += NT) {
        long long n = k / HW;
        long long at = (n * C + c) * HW + (k - n * HW);
        s1 += g[at];
        s2 += g[at] * ((x[at] - mu) * rs);
    }
    s1 = block_sum(s1, sh);
    s2 = block_sum(s2, sh);
    if (threadIdx.x == 0) { sg[c] = s1; sgx[c] = s2; }
}

// ---- softmax over rows of S, in place; causal keeps column j <= i of row i of each (L, S) ----
extern "C" __global__ void softmax_fwd(float* __restrict__ s, long long S, long long L,
        float scale, int causal) {
    __shared__ float sh[32];
    float* row = s + blockIdx.x * S;
    long long lim = S;
    if (causal) { long long i = blockIdx.x % L; lim = i + 1 < S ? i + 1 : S; }
    float m = NEG_INF;
    for (long long j = threadIdx.x; j < lim; j += NT) m = fmaxf(m, row[j] * scale);
    m = block_max(m, sh);
    float t = 0.f;
    for (long long j = threadIdx.x; j < lim; j += NT) {
        float e = expf(row[j] * scale - m);
        row[j] = e;
        t += e;
    }
    t = block_sum(t, sh);
    for (long long j = threadIdx.x; j < S; j += NT) row[j] = j < lim ? row[j] / t : 0.f;
}
// g = scale * p * (g - rowsum(g * p)), in place
extern "C" __global__ void softmax_bwd(float* __restrict__ g, const float* __restrict__ p,
        long long S, float scale) {
    __shared__ float sh[32];
    float* gr = g + blockIdx.x * S;
    const float* pr = p + blockIdx.x * S;
    float d = 0.f;
    for (long long j = threadIdx.x; j < S; j += NT) d += gr[j] * pr[j];
    d = block_sum(d, sh);
    for (long long j = threadIdx.x; j < S; j += NT) gr[j] = ((gr[j] - d) * pr[j]) * scale;
}

// ---- log_softmax over rows of C, into out ----
extern "C" __global__ void log_softmax_fwd(const float* __restrict__ x, float* __restrict__ out,
        long long C) {
    __shared__ float sh[32];
    const float* xr = x + blockIdx.x * C;
    float* o = out + blockIdx.x * C;
    float m = NEG_INF;
    for (long long j = threadIdx.x; j < C; j += NT) m = fmaxf(m, xr[j]);
    m = block_max(m, sh);
    if (!isfinite(m)) m = 0.f;     // the twin's where(isfinite(m), m, 0)
    float t = 0.f;
    for (long long j = threadIdx.x; j < C; j += NT) t += expf(xr[j] - m);
    float ls = logf(block_sum(t, sh));
    for (long long j = threadIdx.x; j < C; j += NT) o[j] = (xr[j] - m) - ls;
}
"""


# One output element per thread. The column array is (C*KH*KW, N*OH*OW) with ``fold`` (one GEMM
# over the batch reads it), else (N, C*KH*KW, OH*OW); row r = (c*KH + ky)*KW + kx, column
# l = oy*OW + ox of image n. Pixels in the padding read as 0 (im2col) or are dropped (col2im).
# tests/test_cuda_kernels_cpu.py compiles these two bodies with g++ and checks them against the
# NumPy twins on the CPU; tests/test_cuda_fused.py runs them on a GPU.
_IM2COL = r"""
long long nl = oh * ow, nk = nc * kh * kw, b, r, l;
if (fold) { r = i / (nb * nl); long long j = i - r * (nb * nl); b = j / nl; l = j - b * nl; }
else { b = i / (nk * nl); r = (i / nl) % nk; l = i % nl; }
long long ch = r / (kh * kw), ky = (r / kw) % kh, kx = r % kw, oy = l / ow, ox = l % ow;
long long y = oy * sh - ph + ky * dh, xc = ox * sw - pw + kx * dw;
col = (y >= 0 && y < ih && xc >= 0 && xc < iw) ? x[((b * nc + ch) * ih + y) * iw + xc] : 0.f;
"""
_COL2IM = r"""
long long nl = oh * ow, nk = nc * kh * kw;
long long xc = i % iw, y = (i / iw) % ih, ch = (i / (iw * ih)) % nc, b = i / (iw * ih * nc);
float acc = 0.f;
for (long long ky = 0; ky < kh; ++ky) {
    long long ty = y + ph - ky * dh;
    if (ty < 0 || ty % sh != 0 || ty / sh >= oh) continue;
    for (long long kx = 0; kx < kw; ++kx) {
        long long tx = xc + pw - kx * dw;
        if (tx < 0 || tx % sw != 0 || tx / sw >= ow) continue;
        long long r = (ch * kh + ky) * kw + kx, l = (ty / sh) * ow + tx / sw;
        acc += cols[fold ? r * (nb * nl) + b * nl + l : (b * nk + r) * nl + l];
    }
}
img = acc;
"""
_GEOMETRY = ("int64 nb, int64 nc, int64 ih, int64 iw, int64 kh, int64 kw, int64 sh, int64 sw, "
             "int64 ph, int64 pw, int64 dh, int64 dw, int64 oh, int64 ow, int32 fold")


@functools.cache
def _module():
    return _cupy().RawModule(code=_SOURCE, options=("--std=c++17",))


def _kernel(name: str):
    return _function(name, _cupy().cuda.runtime.getDevice())


@functools.cache
def _function(name: str, device: int):
    """The kernel ``name`` as loaded on ``device`` (``get_function`` took ~5 us a launch)."""
    return _module().get_function(name)


@functools.cache
def _elementwise(name: str):
    """The ElementwiseKernel/ReductionKernel ``name``, built on first use."""
    cp = _cupy()
    k = {
        "bn_out": lambda: cp.ElementwiseKernel(
            "float32 x, float32 mu, float32 rs, float32 w, float32 b", "float32 y",
            "y = (x - mu) * rs * w + b", "tb_bn_out"),
        "bn_gx": lambda: cp.ElementwiseKernel(
            "float32 g, float32 x, float32 mu, float32 rs, float32 w, float32 sg, float32 sgx, "
            "float32 k", "float32 gx",
            "float s = rs * w; gx = g * s - s * (sg / k) - ((x - mu) * rs) * (s * (sgx / k))",
            "tb_bn_gx"),
        "ln_gw": lambda: cp.ReductionKernel(
            "float32 x, float32 mu, float32 rs, float32 g", "float32 y",
            "g * ((x - mu) * rs)", "a + b", "y = a", "0", "tb_ln_gw"),
        "gelu_fwd": lambda: cp.ElementwiseKernel(
            "float32 x", "float32 y", "y = x * ((erff(x * 0.70710678118654752f) + 1.f) * 0.5f)",
            "tb_gelu_fwd"),
        "gelu_bwd": lambda: cp.ElementwiseKernel(
            "float32 x, float32 g", "float32 y",
            "float cdf = (erff(x * 0.70710678118654752f) + 1.f) * 0.5f;"
            "y = ((expf(x * x * -0.5f) * 0.39894228040143268f) * x + cdf) * g", "tb_gelu_bwd"),
        "ce_bwd": lambda: cp.ElementwiseKernel(
            "raw float32 logp, raw int64 t, float32 r, int64 ncls", "float32 y",
            "long long row = i / ncls;"
            "y = (expf(logp[i]) - ((i - row * ncls) == t[row] ? 1.f : 0.f)) * r",
            "tb_ce_bwd"),
        "sgd": lambda: cp.ElementwiseKernel(
            "float32 g, float32 lr, float32 mu, float32 damp, float32 wd, int32 nesterov, "
            "int32 maximize, int32 first", "float32 p, float32 buf",
            "float d = maximize ? -g : g;"
            "if (wd != 0.f) d += wd * p;"
            "if (mu != 0.f) { float v = first ? d : buf * mu + damp * d; buf = v;"
            "                 d = nesterov ? d + mu * v : v; }"
            "p -= lr * d", "tb_sgd"),
        "im2col2d": lambda: cp.ElementwiseKernel(
            "raw float32 x, " + _GEOMETRY, "float32 col", _IM2COL, "tb_im2col2d"),
        "col2im2d": lambda: cp.ElementwiseKernel(
            "raw float32 cols, " + _GEOMETRY, "float32 img", _COL2IM, "tb_col2im2d"),
        "sgd_plain": lambda: cp.ElementwiseKernel(
            "float32 g, float32 lr, float32 wd, int32 maximize", "float32 p",
            "float d = maximize ? -g : g; if (wd != 0.f) d += wd * p; p -= lr * d",
            "tb_sgd_plain"),
    }[name]
    return k()


def _rows(x) -> tuple[int, int]:
    d = x.shape[-1] if x.ndim else 1
    return (x.size // d if d else 0), d


def _launch(name: str, rows: int, args) -> None:
    if rows:
        _kernel(name)((rows,), (_NT,), args)


# ***** the names of tensorbrain._C's fused kernels *****
def layer_norm_rows_forward(x, weight, bias, eps):
    """``(out, mean, rstd)``: layer norm over the rows of a 2-D ``x`` (one block per row)."""
    cp = _cupy()
    r, d = x.shape
    out = cp.empty_like(x)
    mean, rstd = cp.empty(r, cp.float32), cp.empty(r, cp.float32)
    _launch("ln_fwd", r, (x, x if weight is None else weight, x if bias is None else bias, out,
                          mean, rstd, np.int64(d), np.float32(eps), np.int32(weight is not None),
                          np.int32(bias is not None)))
    return out, mean, rstd


def layer_norm_rows_backward(x, mean, rstd, weight, g, need_x, need_weight, need_bias):
    """``(gx, gweight, gbias)`` of :func:`layer_norm_rows_forward`, None where not needed."""
    cp = _cupy()
    r, d = x.shape
    gx = gw = gb = None
    if need_x:
        gx = cp.empty_like(x)
        _launch("ln_bwd", r, (x, mean, rstd, x if weight is None else weight, g, gx,
                              np.int64(d), np.int32(weight is not None)))
    if need_weight:
        gw = _elementwise("ln_gw")(x, mean[:, None], rstd[:, None], g, axis=0)
    if need_bias:
        gb = g.sum(axis=0)
    return gx, gw, gb


def _nchw(x):
    n, c = x.shape[:2]
    return n, c, x.size // (n * c) if n * c else 0


def batch_norm_train_forward(x, weight, bias, eps):
    """``(out, mean, var)`` of batch norm over dim 1 of ``x`` (N, C, ...) with its batch
    statistics (``var`` biased): one block per channel for the statistics, one elementwise pass."""
    cp = _cupy()
    n, c, hw = _nchw(x)
    mean, var = cp.empty(c, cp.float32), cp.empty(c, cp.float32)
    _launch("bn_stats", c, (x, mean, var, np.int64(n), np.int64(c), np.int64(hw)))
    b3 = (1, c, 1)
    rs = 1 / cp.sqrt(var + np.float32(eps))
    one, zero = np.float32(1), np.float32(0)
    out = _elementwise("bn_out")(
        x.reshape(n, c, hw), mean.reshape(b3), rs.reshape(b3),
        one if weight is None else weight.reshape(b3), zero if bias is None else bias.reshape(b3))
    return out.reshape(x.shape), mean, var


def batch_norm_train_backward(g, x, mean, rstd, weight, need_x, need_weight, need_bias):
    """``(gx, gweight, gbias)`` of :func:`batch_norm_train_forward` from the saved input."""
    cp = _cupy()
    n, c, hw = _nchw(x)
    sg, sgx = cp.empty(c, cp.float32), cp.empty(c, cp.float32)
    _launch("bn_bwd_sums", c, (g, x, mean, rstd, sg, sgx, np.int64(n), np.int64(c), np.int64(hw)))
    gx = None
    if need_x:
        b3 = (1, c, 1)
        gx = _elementwise("bn_gx")(
            g.reshape(n, c, hw), x.reshape(n, c, hw), mean.reshape(b3), rstd.reshape(b3),
            np.float32(1) if weight is None else weight.reshape(b3), sg.reshape(b3),
            sgx.reshape(b3), np.float32(n * hw)).reshape(x.shape)
    return gx, sgx if need_weight else None, sg if need_bias else None


def softmax_rows_forward(s, scale, causal):
    """``s = softmax(scale * s)`` over the last dim in place (``causal``: torch's top-left mask)."""
    rows, d = _rows(s)
    L = s.shape[-2] if s.ndim >= 2 else 1
    _launch("softmax_fwd", rows, (s, np.int64(d), np.int64(L), np.float32(scale),
                                  np.int32(bool(causal))))


def softmax_rows_backward(g, p, scale):
    """``g = scale * p * (g - rowsum(g * p))`` in place."""
    rows, d = _rows(g)
    _launch("softmax_bwd", rows, (g, p, np.int64(d), np.float32(scale)))


def log_softmax_rows_forward(x):
    """log_softmax over the last axis, as a new array (one block per row)."""
    out = _cupy().empty_like(x)
    rows, d = _rows(x)
    _launch("log_softmax_fwd", rows, (x, out, np.int64(d)))
    return out


def cross_entropy_rows_backward(logp, target, r):
    """``(exp(logp) - onehot(target)) * r`` for (M, C) log-probabilities, one pass; ``r`` a
    float or a 0-d device array (no host synchronisation)."""
    r = r if hasattr(r, "shape") else np.float32(r)
    return _elementwise("ce_bwd")(logp, target, r, np.int64(logp.shape[1]),
                                  _cupy().empty_like(logp))


def gelu_erf_forward(x):
    """``x * (1 + erf(x / sqrt 2)) / 2`` in one pass."""
    return _elementwise("gelu_fwd")(x)


def gelu_erf_backward(x, g):
    """``g * (cdf(x) + x * pdf(x))`` in one pass."""
    return _elementwise("gelu_bwd")(x, g)


def embedding_rows_add(target, idx, rows):
    """``target[idx[i]] += rows[i]`` for every i (repeats accumulate): CuPy's atomic scatter-add."""
    import cupyx  # type: ignore

    cupyx.scatter_add(target, idx, rows)


def _geometry(n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, fold):
    return tuple(np.int64(v) for v in (n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)) + \
        (np.int32(bool(fold)),)


def im2col2d(x, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, fold):
    """The columns of ``x`` (N, C, H, W) with zero padding: ``(C*KH*KW, N*OH*OW)`` with
    ``fold``, else ``(N, C*KH*KW, OH*OW)``; one launch, no padded copy."""
    x = _cupy().ascontiguousarray(x)
    n, c, h, w = x.shape
    k, L = c * kh * kw, oh * ow
    cols = _cupy().empty((k, n * L) if fold else (n, k, L), np.float32)
    return _elementwise("im2col2d")(
        x, *_geometry(n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, fold), cols)


def col2im2d(cols, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, fold):
    """The adjoint of :func:`im2col2d`: the (N, C, H, W) sums of the columns at their pixels,
    gathered (one launch, no atomics: each pixel adds its kernel positions in order)."""
    cols = _cupy().ascontiguousarray(cols)
    img = _cupy().empty((n, c, h, w), np.float32)
    return _elementwise("col2im2d")(
        cols, *_geometry(n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, fold), img)


def sgd_step(p, g, buf, lr, momentum, dampening, weight_decay, nesterov, maximize):
    """One ``torch.optim.SGD`` step of ``p`` in place, one launch; returns the momentum buffer
    (a new one on the first step when ``momentum`` is not 0, else ``buf``)."""
    if momentum == 0:
        _elementwise("sgd_plain")(g, np.float32(lr), np.float32(weight_decay),
                                  np.int32(bool(maximize)), p)
        return buf
    first = buf is None
    if first:
        buf = _cupy().empty_like(p)
    _elementwise("sgd")(g, np.float32(lr), np.float32(momentum), np.float32(1 - dampening),
                        np.float32(weight_decay), np.int32(bool(nesterov)),
                        np.int32(bool(maximize)), np.int32(first), p, buf)
    return buf
