// The AVX2 body of act.h's tanh_inplace (CMakeLists.txt compiles *_avx2.cpp with -mavx2 -mf16c;
// the caller checks the CPU first). No FMA: the CPUs with AVX2 but without FMA are few, but the
// flag set is the one all *_avx2.cpp files share.
#include "kernels/act.h"

#if defined(__AVX2__)
#include <immintrin.h>

#include <cmath>

namespace tb::kernels::avx2 {
namespace {

// Cephes expf for x in [-88, 88]: x = n ln2 + r, e^r by a degree-6 polynomial, times 2^n.
inline __m256 exp_ps(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    x = _mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f));
    x = _mm256_max_ps(x, _mm256_set1_ps(-88.3762626647949f));
    __m256 fx = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _mm256_set1_ps(0.5f));
    fx = _mm256_floor_ps(fx);
    x = _mm256_sub_ps(x, _mm256_mul_ps(fx, _mm256_set1_ps(0.693359375f)));
    x = _mm256_sub_ps(x, _mm256_mul_ps(fx, _mm256_set1_ps(-2.12194440e-4f)));
    __m256 z = _mm256_mul_ps(x, x);
    __m256 y = _mm256_set1_ps(1.9875691500E-4f);
    y = _mm256_add_ps(_mm256_mul_ps(y, x), _mm256_set1_ps(1.3981999507E-3f));
    y = _mm256_add_ps(_mm256_mul_ps(y, x), _mm256_set1_ps(8.3334519073E-3f));
    y = _mm256_add_ps(_mm256_mul_ps(y, x), _mm256_set1_ps(4.1665795894E-2f));
    y = _mm256_add_ps(_mm256_mul_ps(y, x), _mm256_set1_ps(1.6666665459E-1f));
    y = _mm256_add_ps(_mm256_mul_ps(y, x), _mm256_set1_ps(5.0000001201E-1f));
    y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(y, z), x), one);
    __m256i n = _mm256_cvttps_epi32(fx);
    n = _mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(n));
}

// Cephes tanhf: |x| < 0.625 by an odd polynomial, else 1 - 2 / (e^{2|x|} + 1) with x's sign.
// The exponent is taken of 2 min(|x|, 10): the same results (1.0f from |x| = 9.1 on either
// way), but exp no longer overflows to infinity from |x| = 44 on, which made such vectors about
// ten times slower.
inline __m256 tanh_ps(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 ax = _mm256_andnot_ps(sign, x);
    const __m256 z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(-5.70498872745E-3f);
    p = _mm256_add_ps(_mm256_mul_ps(p, z), _mm256_set1_ps(2.06390887954E-2f));
    p = _mm256_add_ps(_mm256_mul_ps(p, z), _mm256_set1_ps(-5.37397155531E-2f));
    p = _mm256_add_ps(_mm256_mul_ps(p, z), _mm256_set1_ps(1.33314422036E-1f));
    p = _mm256_add_ps(_mm256_mul_ps(p, z), _mm256_set1_ps(-3.33332819422E-1f));
    const __m256 small = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, z), x), x);
    const __m256 ac = _mm256_min_ps(ax, _mm256_set1_ps(10.0f));
    const __m256 e = exp_ps(_mm256_add_ps(ac, ac));
    __m256 big = _mm256_sub_ps(_mm256_set1_ps(1.0f),
                               _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    big = _mm256_or_ps(big, _mm256_and_ps(sign, x));
    const __m256 use_small = _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ);
    __m256 r = _mm256_blendv_ps(big, small, use_small);
    // NaN in, NaN out (the comparisons above would turn it into +-1)
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    return _mm256_blendv_ps(r, x, nan);
}

// erf(x) by the rational of act.h, in the twin's order of operations.
inline __m256 erf_ps(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-4.0f)), _mm256_set1_ps(4.0f));
    const __m256 t = _mm256_mul_ps(x, x);
    __m256 p = _mm256_add_ps(_mm256_mul_ps(t, _mm256_set1_ps(kErfP[0])), _mm256_set1_ps(kErfP[1]));
    for (int i = 2; i < 7; ++i) p = _mm256_add_ps(_mm256_mul_ps(p, t), _mm256_set1_ps(kErfP[i]));
    __m256 q = _mm256_add_ps(_mm256_mul_ps(t, _mm256_set1_ps(kErfQ[0])), _mm256_set1_ps(kErfQ[1]));
    for (int i = 2; i < 5; ++i) q = _mm256_add_ps(_mm256_mul_ps(q, t), _mm256_set1_ps(kErfQ[i]));
    return _mm256_div_ps(_mm256_mul_ps(p, x), q);
}

inline __m256 cdf_ps(__m256 x) {   // (1 + erf(x / sqrt 2)) / 2
    const __m256 e = erf_ps(_mm256_mul_ps(x, _mm256_set1_ps(kInvSqrt2)));
    return _mm256_mul_ps(_mm256_add_ps(e, _mm256_set1_ps(1.0f)), _mm256_set1_ps(0.5f));
}

// Runs f over n values 8 at a time, the tail through a zero-padded vector.
template <typename F>
inline void map8(std::size_t n, F f) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) f(i, 8);
    if (i < n) f(i, n - i);
}

inline __m256 load(const float *p, std::size_t k) {
    if (k == 8) return _mm256_loadu_ps(p);
    alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (std::size_t j = 0; j < k; ++j) buf[j] = p[j];
    return _mm256_load_ps(buf);
}

inline void store(float *p, __m256 v, std::size_t k) {
    if (k == 8) return _mm256_storeu_ps(p, v);
    alignas(32) float buf[8];
    _mm256_store_ps(buf, v);
    for (std::size_t j = 0; j < k; ++j) p[j] = buf[j];
}

}  // namespace

bool gelu_erf_forward(const float *x, float *out, std::size_t n) {
    map8(n, [&](std::size_t i, std::size_t k) {
        const __m256 v = load(x + i, k);
        store(out + i, _mm256_mul_ps(v, cdf_ps(v)), k);
    });
    return true;
}

bool gelu_erf_backward(const float *x, const float *g, float *out, std::size_t n) {
    map8(n, [&](std::size_t i, std::size_t k) {
        const __m256 v = load(x + i, k);
        __m256 d = _mm256_mul_ps(_mm256_mul_ps(v, v), _mm256_set1_ps(-0.5f));
        d = _mm256_mul_ps(exp_ps(d), _mm256_set1_ps(kInvSqrt2Pi));
        d = _mm256_add_ps(_mm256_mul_ps(d, v), cdf_ps(v));
        store(out + i, _mm256_mul_ps(d, load(g + i, k)), k);
    });
    return true;
}

bool exp_inplace(float *x, std::size_t n) {
    map8(n, [&](std::size_t i, std::size_t k) { store(x + i, exp_ps(load(x + i, k)), k); });
    return true;
}

bool exp_sum(const float *x, std::size_t n, float shift, float *sum) {
    const __m256 s = _mm256_set1_ps(shift);
    __m256 acc = _mm256_setzero_ps();
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    float total = 0.0f;
    for (float v : lanes) total += v;
    for (; i < n; ++i) total += std::exp(x[i] - shift);
    *sum = total;
    return true;
}

bool max_nan(const float *x, std::size_t n, float *m, bool *nan) {
    __m256 acc = _mm256_set1_ps(-INFINITY), un = _mm256_setzero_ps();
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        un = _mm256_or_ps(un, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        acc = _mm256_max_ps(v, acc);   // a NaN v gives acc back
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    float best = -INFINITY;
    for (float v : lanes) best = std::fmax(best, v);
    bool any = _mm256_movemask_ps(un) != 0;
    for (; i < n; ++i) {
        any |= std::isnan(x[i]);
        best = std::fmax(best, x[i]);
    }
    *m = best;
    *nan = any;
    return true;
}

bool exp_scale(const float *x, float *out, std::size_t n, float r) {
    const __m256 vr = _mm256_set1_ps(r), lo = _mm256_set1_ps(-88.3762626647949f);
    map8(n, [&](std::size_t i, std::size_t k) {
        const __m256 v = load(x + i, k);
        const __m256 e = _mm256_and_ps(exp_ps(v), _mm256_cmp_ps(v, lo, _CMP_GT_OQ));   // 0 at -inf
        store(out + i, _mm256_mul_ps(e, vr), k);
    });
    return true;
}

// lstm.cpp's cell_forward after its `G += R` as one pass 8 columns at a time (each value meets the
// same float32 operations in the same order as there: the results are identical), instead of
// five passes over the (4, B, H) gates and the states.
bool lstm_cell_forward(float *G, const float *CP, float *Cn, float *TC, float *Hn, std::size_t n, std::size_t gs) {
    float *o = G, *i = G + gs, *f = G + 2 * gs, *g = G + 3 * gs;
    const __m256 half = _mm256_set1_ps(0.5f);
    map8(n, [&](std::size_t j, std::size_t k) {
        const __m256 vo = _mm256_add_ps(_mm256_mul_ps(tanh_ps(load(o + j, k)), half), half);
        const __m256 vi = _mm256_add_ps(_mm256_mul_ps(tanh_ps(load(i + j, k)), half), half);
        const __m256 vf = _mm256_add_ps(_mm256_mul_ps(tanh_ps(load(f + j, k)), half), half);
        const __m256 vg = tanh_ps(load(g + j, k));
        const __m256 vc = _mm256_add_ps(_mm256_mul_ps(vf, load(CP + j, k)), _mm256_mul_ps(vi, vg));
        const __m256 vt = tanh_ps(vc);
        store(o + j, vo, k);
        store(i + j, vi, k);
        store(f + j, vf, k);
        store(g + j, vg, k);
        store(Cn + j, vc, k);
        store(TC + j, vt, k);
        store(Hn + j, _mm256_mul_ps(vo, vt), k);
    });
    return true;
}

bool tanh_inplace(float *x, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, tanh_ps(_mm256_loadu_ps(x + i)));
    if (i < n) {   // the tail through a zero-padded vector: the same function for every value
        alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (std::size_t j = i; j < n; ++j) buf[j - i] = x[j];
        _mm256_store_ps(buf, tanh_ps(_mm256_load_ps(buf)));
        for (std::size_t j = i; j < n; ++j) x[j] = buf[j - i];
    }
    return true;
}

}  // namespace tb::kernels::avx2
#else
namespace tb::kernels::avx2 {
bool tanh_inplace(float *, std::size_t) { return false; }
bool exp_inplace(float *, std::size_t) { return false; }
bool exp_sum(const float *, std::size_t, float, float *) { return false; }
bool exp_scale(const float *, float *, std::size_t, float) { return false; }
bool max_nan(const float *, std::size_t, float *, bool *) { return false; }
bool lstm_cell_forward(float *, const float *, float *, float *, float *, std::size_t, std::size_t) { return false; }
bool gelu_erf_forward(const float *, float *, std::size_t) { return false; }
bool gelu_erf_backward(const float *, const float *, float *, std::size_t) { return false; }
}  // namespace tb::kernels::avx2
#endif
