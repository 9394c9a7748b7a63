// The LSTM cell's backward over a block of batch rows, and the forward's gate initialisation from
// the input products, as plain loops for the compiler to vectorise. lstm.cpp compiles them for
// the baseline ISA; fused_avx512.cpp compiles the same loops with -mavx512f -ffp-contract=off
// (16 values a register, no contraction: the same operations on every value, the same bits).
// `static` on purpose: each translation unit keeps its own copy, built with its own flags (one
// shared inline definition would let the linker hand the AVX-512 copy to baseline callers).
#pragma once

#include <cstddef>

namespace tb::kernels::lstm_loops {

// One batch row of cell_backward (below): restrict-qualified parameters, so that the compiler
// vectorises the loop without alias checks.
static inline void row_backward(float *__restrict dh, float *__restrict dc, const float *__restrict gy,
                                const float *__restrict o, const float *__restrict i, const float *__restrict f,
                                const float *__restrict g, const float *__restrict tc, const float *__restrict cp,
                                float *__restrict dg, std::ptrdiff_t H) {
    float *__restrict di = dg, *__restrict df = dg + H, *__restrict dgg = dg + 2 * H, *__restrict dout = dg + 3 * H;
    for (std::ptrdiff_t j = 0; j < H; ++j) {
        const float d = dh[j] + gy[j];
        dh[j] = d;
        const float t = tc[j];
        const float c = dc[j] + d * (o[j] * (1.0f - t * t));
        di[j] = c * (g[j] * i[j] * (1.0f - i[j]));
        df[j] = c * (cp[j] * f[j] * (1.0f - f[j]));
        dgg[j] = c * (i[j] * (1.0f - g[j] * g[j]));
        dout[j] = d * (t * o[j] * (1.0f - o[j]));
        dc[j] = c * f[j];
    }
}

// Rows [b0, b1) of a (B, H) batch back through one step, from its activated gates G (4, B, H)
// (the cell's order o, i, f, g), tanh(c) and c_prev: dh += gy; dc += dh * o * (1 - tanh(c)^2);
// the gradients of torch's pre-activations into dgates (B, 4H) in torch's order (i, f, g, o),
// unscaled; then dc *= f.
static inline void cell_backward(float *DH, float *DC, const float *GY, const float *G, const float *TC,
                                 const float *CP, float *DG, std::ptrdiff_t B, std::ptrdiff_t H, std::ptrdiff_t b0,
                                 std::ptrdiff_t b1) {
    const std::ptrdiff_t bh = B * H;
    for (std::ptrdiff_t b = b0; b < b1; ++b)
        row_backward(DH + b * H, DC + b * H, GY + b * H, G + b * H, G + bh + b * H, G + 2 * bh + b * H,
                     G + 3 * bh + b * H, TC + b * H, CP + b * H, DG + b * 4 * H, H);
}

// The cell's gate blocks (o, i, f, g) as torch's (i, f, g, o) block kOrder[q] times kScale[q]
// (rnn.py's _GATE_ORDER, _GATE_SCALE: the sigmoid gates pre-scaled by 1/2).
constexpr int kOrder[4] = {3, 0, 1, 2};
constexpr float kScale[4] = {0.5f, 0.5f, 0.5f, 1.0f};

// m rows of one forward step's gates, written from the input products before the recurrent
// product adds to them: gate q of row r = kScale[q] * (P[r, kOrder[q] block] + BI[kOrder[q]
// block]), P (m, 4H) or BI (4H) null for none (not both). G: the block's first row of gate 0,
// the gates gs values apart.
static inline void init_step(float *G, std::ptrdiff_t gs, const float *P, const float *BI, std::ptrdiff_t m,
                             std::ptrdiff_t H) {
    for (int q = 0; q < 4; ++q) {
        const float s = kScale[q];
        const std::ptrdiff_t src = kOrder[q] * H;
        for (std::ptrdiff_t r = 0; r < m; ++r) {
            float *__restrict row = G + q * gs + r * H;
            const float *__restrict p = P != nullptr ? P + r * 4 * H + src : nullptr;
            const float *__restrict b = BI != nullptr ? BI + src : nullptr;
            if (p != nullptr && b != nullptr)
                for (std::ptrdiff_t j = 0; j < H; ++j) row[j] = s * (p[j] + b[j]);
            else if (p != nullptr)
                for (std::ptrdiff_t j = 0; j < H; ++j) row[j] = s * p[j];
            else
                for (std::ptrdiff_t j = 0; j < H; ++j) row[j] = s * b[j];
        }
    }
}

}  // namespace tb::kernels::lstm_loops
