// A small GEMM whose right operand is packed once and reused: C (+)= A @ B for the products an
// LSTM repeats every timestep with the same weight ((20, 200) @ (200, 800) forward, (20, 800) @
// (800, 200) backward, 35 steps per layer). OpenBLAS repacks B on every call, which cost about as
// much as the arithmetic at these sizes (docs/training.md, "At torch's level: issue 31").
//
// B (K, N) is split into `groups` equal blocks of columns (the LSTM's four gates) and each block
// into panels of kGemmNR columns, zero-padded: panel p holds B's K x 16 values row by row, the
// layout the AVX2/FMA micro-kernel (gemm_fma.cpp, 5-6 rows x 16 columns of accumulators) reads
// with two aligned loads per k. C is written block by block as (groups, M, N / groups): with
// groups = 4 it is the LSTM's (4, B, H) gate layout, with groups = 1 plain (M, N).
#pragma once

#include <cstddef>
#include <memory>

namespace tb::kernels {

inline constexpr int kGemmNR = 16;   // columns per panel
inline constexpr int kGemmMR = 6;    // most rows per register tile

struct PackedMatrix {
    int k = 0, n = 0, groups = 1;
    int ng = 0;           // columns per group
    int panels = 0;       // panels per group
    std::unique_ptr<float, void (*)(void *)> data{nullptr, nullptr};   // groups * panels * k * 16

    // From B's (K, N) values at b[i * s0 + j * s1] (strides in elements: a transpose packs too).
    // Group g holds B's column block order[g] times scale[g] (each null: g, 1): an LSTM's gates
    // in its kernels' order, scaled as they need, without a permuted copy of the weight first.
    PackedMatrix(const float *b, std::ptrdiff_t s0, std::ptrdiff_t s1, int k, int n, int groups,
                 const int *order = nullptr, const float *scale = nullptr);
    const float *panel(int g, int p) const { return data.get() + (static_cast<std::size_t>(g) * panels + p) * k * kGemmNR; }
};

// The register tiles of panels [p0, p1) of the flattened (group, panel) list: each panel's rows
// split into equal blocks of at most MR (20 rows -> 4 x 5 with MR = 6: no block is left with
// one or two rows, whose FMA chains would wait on their own latency). Calls
// tile(rows, A, P, C, cols) with the block's first row of A and of C, its panel P and the
// panel's columns (16, or fewer in a group's last panel). C's groups lie cgs values apart
// (m * ng when they are packed; more when the m rows are a slice of a taller (groups, M, ng)
// array). The bodies' shared loop.
template <int MR, typename Tile>
inline void for_each_tile(const float *a, std::ptrdiff_t lda, int m, const PackedMatrix &b, float *c, int p0,
                          int p1, std::ptrdiff_t cgs, Tile tile) {
    const int nblocks = (m + MR - 1) / MR;
    for (int fp = p0; fp < p1; ++fp) {
        const int g = fp / b.panels, p = fp % b.panels;
        const int cols = b.ng - p * kGemmNR < kGemmNR ? b.ng - p * kGemmNR : kGemmNR;
        float *Cg = c + static_cast<std::ptrdiff_t>(g) * cgs + p * kGemmNR;
        int r0 = 0;
        for (int blk = 0; blk < nblocks; ++blk) {
            const int mr = m / nblocks + (blk < m % nblocks ? 1 : 0);
            tile(mr, a + r0 * lda, b.panel(g, p), Cg + static_cast<std::ptrdiff_t>(r0) * b.ng, cols);
            r0 += mr;
        }
    }
}

// C (groups, M, ng) = (or +=, with accumulate) A (M, K; row r at a + r * lda) @ B, on the
// caller's thread; C's groups cgs values apart (< 0: packed, m * ng).
void gemm_packed(const float *a, std::ptrdiff_t lda, int m, const PackedMatrix &b, float *c, bool accumulate,
                 std::ptrdiff_t cgs = -1);

namespace fma {
// The AVX2+FMA body over panels [p0, p1) of the flattened (group, panel) list; false when this
// build has no AVX2/FMA body.
bool gemm_panels(const float *a, std::ptrdiff_t lda, int m, const PackedMatrix &b, float *c, bool accumulate,
                 int p0, int p1, std::ptrdiff_t cgs);
}  // namespace fma
namespace avx512 {
// The AVX-512 body (gemm_avx512.cpp), the same contract; false when this build has none.
bool gemm_panels(const float *a, std::ptrdiff_t lda, int m, const PackedMatrix &b, float *c, bool accumulate,
                 int p0, int p1, std::ptrdiff_t cgs);
}  // namespace avx512

}  // namespace tb::kernels
