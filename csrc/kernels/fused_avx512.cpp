// AVX-512 bodies of the row kernels that dominate a transformer's and an LSTM's step outside the
// GEMMs (fused.cpp's GELU, attention softmax and layer norm, lstm.cpp's cell): 16 values per register,
// the row sums in vector lanes instead of one dependent chain. CMakeLists.txt compiles
// *_avx512.cpp with -mavx512f -ffp-contract=off; fused.cpp and lstm.cpp call these only where
// use_avx512() (reduce.cpp) says so.
//
// Numerics: every value meets the same float32 operations as in the baseline and AVX2 bodies (exp
// is act_avx2.cpp's Cephes function and erf its rational, the same operations 16 lanes wide:
// GELU's forward matches the NumPy twin bit for bit, as the AVX2 one does); only the order of
// the row sums differs (lanes, then across lanes), as in the AVX2 exp_sum. Layer norm's
// statistics are summed in double, as in the baseline. The exception is tanh (the LSTM cell's),
// written for speed with fused multiply-adds: see tanh_ps.
#include "kernels/act.h"
#include "kernels/lstm_cell.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace tb::kernels::avx512 {
namespace {

inline __mmask16 head(std::size_t k) {   // lanes j < k (k <= 16)
    return k >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << k) - 1u);
}

// act_avx2.cpp's exp_ps, 16 lanes.
inline __m512 exp_ps(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    x = _mm512_min_ps(x, _mm512_set1_ps(88.3762626647949f));
    x = _mm512_max_ps(x, _mm512_set1_ps(-88.3762626647949f));
    __m512 fx = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _mm512_set1_ps(0.5f));
    fx = _mm512_roundscale_ps(fx, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    x = _mm512_sub_ps(x, _mm512_mul_ps(fx, _mm512_set1_ps(0.693359375f)));
    x = _mm512_sub_ps(x, _mm512_mul_ps(fx, _mm512_set1_ps(-2.12194440e-4f)));
    const __m512 z = _mm512_mul_ps(x, x);
    __m512 y = _mm512_set1_ps(1.9875691500E-4f);
    y = _mm512_add_ps(_mm512_mul_ps(y, x), _mm512_set1_ps(1.3981999507E-3f));
    y = _mm512_add_ps(_mm512_mul_ps(y, x), _mm512_set1_ps(8.3334519073E-3f));
    y = _mm512_add_ps(_mm512_mul_ps(y, x), _mm512_set1_ps(4.1665795894E-2f));
    y = _mm512_add_ps(_mm512_mul_ps(y, x), _mm512_set1_ps(1.6666665459E-1f));
    y = _mm512_add_ps(_mm512_mul_ps(y, x), _mm512_set1_ps(5.0000001201E-1f));
    y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(y, z), x), one);
    __m512i n = _mm512_cvttps_epi32(fx);
    n = _mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(y, _mm512_castsi512_ps(n));
}

// tanh on 16 lanes: Cephes' odd polynomial below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) above,
// as act_avx2.cpp's tanh_ps, but with fused multiply-adds, exp's power of two by scalef, and |x|
// clamped to 10 first (tanh is 1.0f from 9.1 on). About 30 instead of 57 operations a vector,
// and no infinity inside: the unclamped exp(2|x|) overflowed from |x| = 44 on, which made a
// vector of such values take five times as long. Within 2 ulp of the exact tanh
// (tests/nn/test_rnn_native.py); the rounding differs from the AVX2 body's by up to an ulp.
inline __m512 tanh_ps(__m512 x) {
    const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    const __m512 ax = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(x)));
    const __m512 z = _mm512_mul_ps(x, x);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(-5.70498872745E-3f), z, _mm512_set1_ps(2.06390887954E-2f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-5.37397155531E-2f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(1.33314422036E-1f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-3.33332819422E-1f));
    const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), x, x);
    // exp(a), a = 2 min(|x|, 10) in [0, 20]: a = n ln2 + r, |r| <= ln2 / 2, exp(r) by Cephes' polynomial
    const __m512 a = _mm512_add_ps(_mm512_min_ps(ax, _mm512_set1_ps(10.0f)), _mm512_min_ps(ax, _mm512_set1_ps(10.0f)));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), a);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500E-4f), r, _mm512_set1_ps(1.3981999507E-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073E-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894E-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459E-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201E-1f));
    y = _mm512_add_ps(_mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    const __m512 e = _mm512_scalef_ps(y, n);
    __m512 big = _mm512_sub_ps(_mm512_set1_ps(1.0f),
                               _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    big = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(big),
                                              _mm512_and_si512(sign, _mm512_castps_si512(x))));
    const __mmask16 use_small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_LT_OQ);
    const __m512 res = _mm512_mask_blend_ps(use_small, big, small);
    // NaN in, NaN out (the comparisons above would turn it into +-1)
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), res, x);
}

// act_avx2.cpp's erf_ps and cdf_ps (the erf rational of act.h), 16 lanes.
inline __m512 erf_ps(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-4.0f)), _mm512_set1_ps(4.0f));
    const __m512 t = _mm512_mul_ps(x, x);
    __m512 p = _mm512_add_ps(_mm512_mul_ps(t, _mm512_set1_ps(kErfP[0])), _mm512_set1_ps(kErfP[1]));
    for (int i = 2; i < 7; ++i) p = _mm512_add_ps(_mm512_mul_ps(p, t), _mm512_set1_ps(kErfP[i]));
    __m512 q = _mm512_add_ps(_mm512_mul_ps(t, _mm512_set1_ps(kErfQ[0])), _mm512_set1_ps(kErfQ[1]));
    for (int i = 2; i < 5; ++i) q = _mm512_add_ps(_mm512_mul_ps(q, t), _mm512_set1_ps(kErfQ[i]));
    return _mm512_div_ps(_mm512_mul_ps(p, x), q);
}

inline __m512 cdf_ps(__m512 x) {   // (1 + erf(x / sqrt 2)) / 2
    const __m512 e = erf_ps(_mm512_mul_ps(x, _mm512_set1_ps(kInvSqrt2)));
    return _mm512_mul_ps(_mm512_add_ps(e, _mm512_set1_ps(1.0f)), _mm512_set1_ps(0.5f));
}

// Runs f(i, mask) over n values 16 at a time, the tail under a mask.
template <typename F>
inline void map16(std::size_t n, F f) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) f(i, static_cast<__mmask16>(0xFFFF));
    if (i < n) f(i, head(n - i));
}

inline __m512 load(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline void store(float *p, __m512 v, __mmask16 m) { _mm512_mask_storeu_ps(p, m, v); }

// The 8 doubles of lanes [0, 8) and [8, 16) of v.
inline __m512d lo_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
inline __m512d hi_pd(__m512 v) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

}  // namespace

bool gelu_erf_forward(const float *x, float *out, std::size_t n) {
    map16(n, [&](std::size_t i, __mmask16 m) {
        const __m512 v = load(x + i, m);
        store(out + i, _mm512_mul_ps(v, cdf_ps(v)), m);
    });
    return true;
}

bool gelu_erf_backward(const float *x, const float *g, float *out, std::size_t n) {
    map16(n, [&](std::size_t i, __mmask16 m) {
        const __m512 v = load(x + i, m);
        __m512 d = _mm512_mul_ps(_mm512_mul_ps(v, v), _mm512_set1_ps(-0.5f));
        d = _mm512_mul_ps(exp_ps(d), _mm512_set1_ps(kInvSqrt2Pi));
        d = _mm512_add_ps(_mm512_mul_ps(d, v), cdf_ps(v));
        store(out + i, _mm512_mul_ps(d, load(g + i, m)), m);
    });
    return true;
}

bool softmax_rows(float *x, std::size_t rows, std::size_t cols, float scale, std::size_t causal_rows) {
    const __m512 vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    for (std::size_t r = 0; r < rows; ++r) {
        float *row = x + r * cols;
        const std::size_t n = causal_rows ? std::min(cols, r % causal_rows + 1) : cols;
        __m512 mx = ninf;
        map16(n, [&](std::size_t i, __mmask16 m) {
            const __m512 v = _mm512_mul_ps(load(row + i, m), vs);
            store(row + i, v, m);
            mx = _mm512_mask_max_ps(mx, m, v, mx);   // a NaN v gives mx back (as std::fmax)
        });
        const __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
        __m512 sum = _mm512_setzero_ps();
        map16(n, [&](std::size_t i, __mmask16 m) {
            const __m512 e = exp_ps(_mm512_sub_ps(load(row + i, m), vm));
            store(row + i, e, m);
            sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, e));
        });
        const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
        map16(n, [&](std::size_t i, __mmask16 m) { store(row + i, _mm512_mul_ps(load(row + i, m), inv), m); });
        for (std::size_t j = n; j < cols; ++j) row[j] = 0.0f;
    }
    return true;
}

bool softmax_rows_backward(float *g, const float *p, std::size_t rows, std::size_t cols, float scale) {
    const __m512 vs = _mm512_set1_ps(scale);
    for (std::size_t r = 0; r < rows; ++r) {
        float *gr = g + r * cols;
        const float *pr = p + r * cols;
        __m512 dot = _mm512_setzero_ps();
        map16(cols, [&](std::size_t i, __mmask16 m) {
            dot = _mm512_add_ps(dot, _mm512_mul_ps(load(gr + i, m), load(pr + i, m)));
        });
        const __m512 vd = _mm512_set1_ps(_mm512_reduce_add_ps(dot));
        map16(cols, [&](std::size_t i, __mmask16 m) {
            store(gr + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(load(gr + i, m), vd), load(pr + i, m)), vs), m);
        });
    }
    return true;
}

bool layer_norm_rows(const float *x, const float *w, const float *b, float *out, float *mean, float *rstd,
                     std::size_t rows, std::size_t d, double eps) {
    for (std::size_t r = 0; r < rows; ++r) {
        const float *xr = x + r * d;
        float *o = out + r * d;
        __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
        map16(d, [&](std::size_t i, __mmask16 m) {
            const __m512 v = load(xr + i, m);
            s0 = _mm512_add_pd(s0, lo_pd(v));
            s1 = _mm512_add_pd(s1, hi_pd(v));
        });
        const double mu = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) / static_cast<double>(d);
        const __m512d vmu = _mm512_set1_pd(mu);
        __m512d v0 = _mm512_setzero_pd(), v1 = _mm512_setzero_pd();
        map16(d, [&](std::size_t i, __mmask16 m) {
            const __m512 v = load(xr + i, m);
            // lanes past the row's end are 0 - mu: masked out of the sums
            const __m512d c0 = _mm512_maskz_sub_pd(static_cast<__mmask8>(m), lo_pd(v), vmu);
            const __m512d c1 = _mm512_maskz_sub_pd(static_cast<__mmask8>(m >> 8), hi_pd(v), vmu);
            v0 = _mm512_add_pd(v0, _mm512_mul_pd(c0, c0));
            v1 = _mm512_add_pd(v1, _mm512_mul_pd(c1, c1));
        });
        const double var = _mm512_reduce_add_pd(_mm512_add_pd(v0, v1));
        const float mf = static_cast<float>(mu);
        const float rs = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(d) + eps));
        mean[r] = mf;
        rstd[r] = rs;
        const __m512 vm = _mm512_set1_ps(mf), vr = _mm512_set1_ps(rs);
        map16(d, [&](std::size_t i, __mmask16 m) {
            __m512 y = _mm512_mul_ps(_mm512_sub_ps(load(xr + i, m), vm), vr);
            if (w) y = _mm512_mul_ps(y, load(w + i, m));
            if (b) y = _mm512_add_ps(y, load(b + i, m));
            store(o + i, y, m);
        });
    }
    return true;
}

bool layer_norm_rows_backward_part(const float *x, const float *mean, const float *rstd, const float *w,
                                   const float *g, float *gx, double *sw, double *sb, std::size_t rows, std::size_t d) {
    std::vector<float> xhv(d), ghv(d);
    float *xh = xhv.data(), *gh = ghv.data();
    for (std::size_t r = 0; r < rows; ++r) {
        const float *xr = x + r * d, *gr = g + r * d;
        const __m512 vm = _mm512_set1_ps(mean[r]), vr = _mm512_set1_ps(rstd[r]);
        __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd(), c0 = _mm512_setzero_pd(),
                c1 = _mm512_setzero_pd();
        map16(d, [&](std::size_t i, __mmask16 m) {
            const __m512 h = _mm512_mul_ps(_mm512_sub_ps(load(xr + i, m), vm), vr);
            __m512 q = load(gr + i, m);
            if (w) q = _mm512_mul_ps(q, load(w + i, m));
            store(xh + i, h, m);
            store(gh + i, q, m);
            const __m512d q0 = lo_pd(q), q1 = hi_pd(q);   // 0 past the row's end (masked loads)
            a0 = _mm512_add_pd(a0, q0);
            a1 = _mm512_add_pd(a1, q1);
            c0 = _mm512_add_pd(c0, _mm512_mul_pd(q0, lo_pd(h)));
            c1 = _mm512_add_pd(c1, _mm512_mul_pd(q1, hi_pd(h)));
        });
        const float a = static_cast<float>(_mm512_reduce_add_pd(_mm512_add_pd(a0, a1)) / static_cast<double>(d));
        const float c = static_cast<float>(_mm512_reduce_add_pd(_mm512_add_pd(c0, c1)) / static_cast<double>(d));
        if (gx) {
            float *o = gx + r * d;
            const __m512 va = _mm512_set1_ps(a), vc = _mm512_set1_ps(c);
            map16(d, [&](std::size_t i, __mmask16 m) {
                const __m512 t = _mm512_sub_ps(_mm512_sub_ps(load(gh + i, m), va), _mm512_mul_ps(load(xh + i, m), vc));
                store(o + i, _mm512_mul_ps(vr, t), m);
            });
        }
        if (sw || sb)
            map16(d, [&](std::size_t i, __mmask16 m) {
                const __m512 q = load(gr + i, m), h = load(xh + i, m);
                const __mmask8 m0 = static_cast<__mmask8>(m), m1 = static_cast<__mmask8>(m >> 8);
                if (sw) {
                    _mm512_mask_storeu_pd(sw + i, m0, _mm512_add_pd(_mm512_maskz_loadu_pd(m0, sw + i),
                                                                   _mm512_mul_pd(lo_pd(q), lo_pd(h))));
                    _mm512_mask_storeu_pd(sw + i + 8, m1, _mm512_add_pd(_mm512_maskz_loadu_pd(m1, sw + i + 8),
                                                                       _mm512_mul_pd(hi_pd(q), hi_pd(h))));
                }
                if (sb) {
                    _mm512_mask_storeu_pd(sb + i, m0, _mm512_add_pd(_mm512_maskz_loadu_pd(m0, sb + i), lo_pd(q)));
                    _mm512_mask_storeu_pd(sb + i + 8, m1,
                                          _mm512_add_pd(_mm512_maskz_loadu_pd(m1, sb + i + 8), hi_pd(q)));
                }
            });
    }
    return true;
}

// lstm.cpp's cell_forward after its `G += R`, as act_avx2.cpp's lstm_cell_forward 16 columns at a
// time (the same operations per value: the same results).
bool lstm_cell_forward(float *G, const float *CP, float *Cn, float *TC, float *Hn, std::size_t n, std::size_t gs) {
    float *o = G, *i = G + gs, *f = G + 2 * gs, *g = G + 3 * gs;
    const __m512 half = _mm512_set1_ps(0.5f);
    map16(n, [&](std::size_t j, __mmask16 m) {
        const __m512 vo = _mm512_add_ps(_mm512_mul_ps(tanh_ps(load(o + j, m)), half), half);
        const __m512 vi = _mm512_add_ps(_mm512_mul_ps(tanh_ps(load(i + j, m)), half), half);
        const __m512 vf = _mm512_add_ps(_mm512_mul_ps(tanh_ps(load(f + j, m)), half), half);
        const __m512 vg = tanh_ps(load(g + j, m));
        const __m512 vc = _mm512_add_ps(_mm512_mul_ps(vf, load(CP + j, m)), _mm512_mul_ps(vi, vg));
        const __m512 vt = tanh_ps(vc);
        store(o + j, vo, m);
        store(i + j, vi, m);
        store(f + j, vf, m);
        store(g + j, vg, m);
        store(Cn + j, vc, m);
        store(TC + j, vt, m);
        store(Hn + j, _mm512_mul_ps(vo, vt), m);
    });
    return true;
}

bool lstm_cell_backward(float *DH, float *DC, const float *GY, const float *G, const float *TC, const float *CP,
                        float *DG, std::ptrdiff_t B, std::ptrdiff_t H, std::ptrdiff_t b0, std::ptrdiff_t b1) {
    lstm_loops::cell_backward(DH, DC, GY, G, TC, CP, DG, B, H, b0, b1);
    return true;
}

bool lstm_init_step(float *G, std::ptrdiff_t gs, const float *P, const float *BI, std::ptrdiff_t m, std::ptrdiff_t H) {
    lstm_loops::init_step(G, gs, P, BI, m, H);
    return true;
}

bool tanh_inplace(float *x, std::size_t n) {
    map16(n, [&](std::size_t i, __mmask16 m) { store(x + i, tanh_ps(load(x + i, m)), m); });
    return true;
}

// pool.cpp's 2x2 / stride 2 max pooling of one output row, 16 outputs at a time: rows r0 and r1
// (2 * ow values each), window values in pool.cpp's order (r0 even, r0 odd, r1 even, r1 odd),
// the first maximum winning and a NaN over a number, as pool.cpp's window_pass; winners as flat
// indices from `top` (r0's first index), r1 being `w` further on.
bool max_pool2x2_row(const float *r0, const float *r1, float *best, std::int32_t *where, std::int32_t top,
                     std::int32_t w, std::size_t ow) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i one = _mm512_set1_epi32(1), down = _mm512_set1_epi32(w);
    for (std::size_t ox = 0; ox < ow; ox += 16) {
        const std::size_t n = ow - ox < 16 ? ow - ox : 16;
        const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
        // the 2n inputs of each row as two vectors of 16 (the second partly or wholly masked)
        const __mmask16 lo = n >= 8 ? 0xFFFF : static_cast<__mmask16>((1u << (2 * n)) - 1u);
        const __mmask16 hi = n > 8 ? static_cast<__mmask16>((1u << (2 * n - 16)) - 1u) : 0;
        const __m512 a0 = _mm512_maskz_loadu_ps(lo, r0 + 2 * ox), a1 = _mm512_maskz_loadu_ps(hi, r0 + 2 * ox + 16);
        const __m512 b0 = _mm512_maskz_loadu_ps(lo, r1 + 2 * ox), b1 = _mm512_maskz_loadu_ps(hi, r1 + 2 * ox + 16);
        __m512 v = _mm512_permutex2var_ps(a0, even, a1);
        __m512i at = _mm512_add_epi32(_mm512_set1_epi32(top + 2 * static_cast<std::int32_t>(ox)), even);
        const __m512i first = at;
        auto take = [&](__m512 x, __m512i k) {
            const __mmask16 t = _mm512_cmp_ps_mask(x, v, _CMP_GT_OQ) |
                                (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q));
            v = _mm512_mask_blend_ps(t, v, x);
            at = _mm512_mask_blend_epi32(t, at, k);
        };
        take(_mm512_permutex2var_ps(a0, odd, a1), _mm512_add_epi32(first, one));
        take(_mm512_permutex2var_ps(b0, even, b1), _mm512_add_epi32(first, down));
        take(_mm512_permutex2var_ps(b0, odd, b1), _mm512_add_epi32(_mm512_add_epi32(first, down), one));
        _mm512_mask_storeu_ps(best + ox, m, v);
        _mm512_mask_storeu_epi32(where + ox, m, at);
    }
    return true;
}

}  // namespace tb::kernels::avx512
#else
namespace tb::kernels::avx512 {
bool gelu_erf_forward(const float *, float *, std::size_t) { return false; }
bool gelu_erf_backward(const float *, const float *, float *, std::size_t) { return false; }
bool softmax_rows(float *, std::size_t, std::size_t, float, std::size_t) { return false; }
bool softmax_rows_backward(float *, const float *, std::size_t, std::size_t, float) { return false; }
bool layer_norm_rows(const float *, const float *, const float *, float *, float *, float *, std::size_t,
                     std::size_t, double) { return false; }
bool layer_norm_rows_backward_part(const float *, const float *, const float *, const float *, const float *,
                                   float *, double *, double *, std::size_t, std::size_t) { return false; }
bool lstm_cell_forward(float *, const float *, float *, float *, float *, std::size_t, std::size_t) { return false; }
bool lstm_cell_backward(float *, float *, const float *, const float *, const float *, const float *, float *,
                        std::ptrdiff_t, std::ptrdiff_t, std::ptrdiff_t, std::ptrdiff_t) { return false; }
bool lstm_init_step(float *, std::ptrdiff_t, const float *, const float *, std::ptrdiff_t, std::ptrdiff_t) { return false; }
bool tanh_inplace(float *, std::size_t) { return false; }
bool max_pool2x2_row(const float *, const float *, float *, std::int32_t *, std::int32_t, std::int32_t, std::size_t) {
    return false;
}
}  // namespace tb::kernels::avx512
#endif
