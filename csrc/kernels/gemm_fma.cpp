// The AVX2+FMA body of gemm.h's packed GEMM. CMakeLists.txt compiles *_fma.cpp with -mavx2 -mfma
// (x86-64 only); gemm.cpp calls it only after __builtin_cpu_supports("fma") and ("avx2").
//
// Register tile: MR rows (at most 6) x 16 columns = 2 * MR accumulators of 8 floats; per k two
// loads of the packed panel, MR broadcasts of A and 2 * MR FMAs (the classic Haswell 6x16 shape:
// 12 accumulators + 2 B vectors + 1 broadcast = 15 of the 16 ymm registers). Rows are split
// into equal blocks by gemm.h's for_each_tile (20 rows -> 4 x 5).
#include "kernels/gemm.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace tb::kernels::fma {
namespace {

inline __m256i lane_mask(int cols) {   // lanes j < cols
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), idx);
}

template <int MR>
inline void tile(int K, const float *A, std::ptrdiff_t lda, const float *P, float *C, std::ptrdiff_t ldc,
                 int cols, bool acc) {
    __m256 c0[MR], c1[MR];
    const float *a[MR];
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
        c0[i] = _mm256_setzero_ps();
        c1[i] = _mm256_setzero_ps();
        a[i] = A + i * lda;
    }
    for (int k = 0; k < K; ++k) {
        const __m256 b0 = _mm256_load_ps(P + kGemmNR * k), b1 = _mm256_load_ps(P + kGemmNR * k + 8);
    #pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
            const __m256 av = _mm256_broadcast_ss(a[i] + k);
            c0[i] = _mm256_fmadd_ps(av, b0, c0[i]);
            c1[i] = _mm256_fmadd_ps(av, b1, c1[i]);
        }
    }
    if (cols == kGemmNR) {
    #pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
            float *c = C + i * ldc;
            if (acc) {
                c0[i] = _mm256_add_ps(c0[i], _mm256_loadu_ps(c));
                c1[i] = _mm256_add_ps(c1[i], _mm256_loadu_ps(c + 8));
            }
            _mm256_storeu_ps(c, c0[i]);
            _mm256_storeu_ps(c + 8, c1[i]);
        }
        return;
    }
    const __m256i m0 = lane_mask(cols), m1 = lane_mask(cols - 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
        float *c = C + i * ldc;
        if (acc) {
            c0[i] = _mm256_add_ps(c0[i], _mm256_maskload_ps(c, m0));
            c1[i] = _mm256_add_ps(c1[i], _mm256_maskload_ps(c + 8, m1));
        }
        _mm256_maskstore_ps(c, m0, c0[i]);
        _mm256_maskstore_ps(c + 8, m1, c1[i]);
    }
}

}  // namespace

bool gemm_panels(const float *a, std::ptrdiff_t lda, int m, const PackedMatrix &b, float *c, bool accumulate,
                 int p0, int p1, std::ptrdiff_t cgs) {
    for_each_tile<kGemmMR>(a, lda, m, b, c, p0, p1, cgs, [&](int mr, const float *A, const float *P, float *C, int cols) {
        switch (mr) {
            case 6: tile<6>(b.k, A, lda, P, C, b.ng, cols, accumulate); break;
            case 5: tile<5>(b.k, A, lda, P, C, b.ng, cols, accumulate); break;
            case 4: tile<4>(b.k, A, lda, P, C, b.ng, cols, accumulate); break;
            case 3: tile<3>(b.k, A, lda, P, C, b.ng, cols, accumulate); break;
            case 2: tile<2>(b.k, A, lda, P, C, b.ng, cols, accumulate); break;
            default: tile<1>(b.k, A, lda, P, C, b.ng, cols, accumulate); break;
        }
    });
    return true;
}

}  // namespace tb::kernels::fma
#else
namespace tb::kernels::fma {
bool gemm_panels(const float *, std::ptrdiff_t, int, const PackedMatrix &, float *, bool, int, int, std::ptrdiff_t) {
    return false;
}
}  // namespace tb::kernels::fma
#endif
