// The AVX-512 body of gemm.h's packed GEMM. CMakeLists.txt compiles *_avx512.cpp with -mavx512f
// -mfma (x86-64 only); gemm.cpp calls it only where use_avx512() (reduce.cpp) says the CPU
// has AVX-512F and no test forced another path.
//
// A 16-column panel is one 512-bit register, so the register tile is MR rows (at most 12) x 16
// columns: MR accumulators, one load of the panel per k and MR FMAs with A's value broadcast
// from memory. Rows are split into equal blocks by gemm.h's for_each_tile (20 rows -> 2 x 10),
// each keeping enough independent FMA chains to cover the FMA latency. On an Intel Xeon (Emerald Rapids)
// the AVX2 body ran the LSTM's (20, 200) @ (200, 800) at 80 GFLOP/s, OpenBLAS (repacking B each
// call) at 103; this one at about twice the AVX2 body (docs/training.md).
#include "kernels/gemm.h"

#if defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>

#include <array>
#include <utility>

namespace tb::kernels::avx512 {
namespace {

constexpr int kMR = 12;

template <int MR>
inline void tile(int K, const float *A, std::ptrdiff_t lda, const float *P, float *C, std::ptrdiff_t ldc,
                 int cols, bool acc) {
    __m512 c[MR];
    const float *a[MR];
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
        c[i] = _mm512_setzero_ps();
        a[i] = A + i * lda;
    }
    for (int k = 0; k < K; ++k) {
        const __m512 b = _mm512_load_ps(P + kGemmNR * k);
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i) c[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i][k]), b, c[i]);
    }
    const __mmask16 m = cols == kGemmNR ? static_cast<__mmask16>(0xFFFF)
                                        : static_cast<__mmask16>((1u << cols) - 1u);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
        float *row = C + i * ldc;
        if (acc) c[i] = _mm512_add_ps(c[i], _mm512_maskz_loadu_ps(m, row));
        _mm512_mask_storeu_ps(row, m, c[i]);
    }
}

using Tile = void (*)(int, const float *, std::ptrdiff_t, const float *, float *, std::ptrdiff_t, int, bool);
template <int... R>
constexpr auto tiles(std::integer_sequence<int, R...>) {
    return std::array<Tile, sizeof...(R)>{&tile<R + 1>...};
}
constexpr auto kTiles = tiles(std::make_integer_sequence<int, kMR>{});

}  // namespace

bool gemm_panels(const float *a, std::ptrdiff_t lda, int m, const PackedMatrix &b, float *c, bool accumulate,
                 int p0, int p1, std::ptrdiff_t cgs) {
    for_each_tile<kMR>(a, lda, m, b, c, p0, p1, cgs, [&](int mr, const float *A, const float *P, float *C, int cols) {
        kTiles[mr - 1](b.k, A, lda, P, C, b.ng, cols, accumulate);
    });
    return true;
}

}  // namespace tb::kernels::avx512
namespace tb::kernels { bool avx512_kernels_built() { return true; } }
#else
namespace tb::kernels { bool avx512_kernels_built() { return false; } }
namespace tb::kernels::avx512 {
bool gemm_panels(const float *, std::ptrdiff_t, int, const PackedMatrix &, float *, bool, int, int, std::ptrdiff_t) {
    return false;
}
}  // namespace tb::kernels::avx512
#endif
