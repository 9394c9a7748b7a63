// Activation functions over contiguous float32 buffers for the fused kernels (lstm.cpp): tanh
// in place. Two bodies: the baseline calls std::tanh per value; act_avx2.cpp evaluates it 8
// values at a time (Cephes' tanhf: a polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above, with
// Cephes' expf), within 2 ulp of std::tanh (tests/nn/test_rnn_native.py checks against NumPy's).
// std::tanh costs ~10 ns a value here, as much as NumPy's float32 tanh: an LSTM step's gates
// spent more time in tanh than in their GEMM.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tb::kernels {

void tanh_inplace(float *x, std::size_t n);   // picks the AVX2 body when the CPU has it

// GELU with the exact (erf) form, float32: out = x * (1 + erf(x / sqrt 2)) / 2, and its
// gradient g * (cdf + x * exp(-x^2 / 2) / sqrt(2 pi)). erf is the float32 rational of
// tensorbrain/_ops/elementwise.py's _erf_f32 (Eigen's and XLA's), evaluated in the same order
// of float32 operations, so the forward matches the NumPy twin bit for bit.
void gelu_erf_forward(const float *x, float *out, std::size_t n);
void gelu_erf_backward(const float *x, const float *g, float *out, std::size_t n);

// Row softmax in place over `rows` rows of `cols` values: x = softmax(scale * x), where with
// `causal` row r keeps only its first (r % causal_rows) + 1 values (the rest become 0): the
// rows of an (L, S) score matrix under a top-left causal mask, causal_rows = L.
void softmax_rows(float *x, std::size_t rows, std::size_t cols, float scale, std::size_t causal_rows);
// Its backward in place: g = scale * p * (g - sum(g * p)) per row.
void softmax_rows_backward(float *g, const float *p, std::size_t rows, std::size_t cols, float scale);

// log_softmax over rows (out = x - max - log(sum(exp(x - max))), a max that is not finite taken
// as 0, a row holding NaN all NaN, like the NumPy twin), and cross-entropy's backward from it:
// g = (exp(logp) - onehot(target)) * r, in one pass per row (loss.py holds the twins).
void log_softmax_rows(const float *x, float *out, std::size_t rows, std::size_t cols);
void cross_entropy_rows_backward(const float *logp, const std::int64_t *target, float *g, std::size_t rows,
                                 std::size_t cols, float r);

namespace avx2 {
bool exp_inplace(float *x, std::size_t n);
// sum of exp(x - shift) over n values (false when not built with AVX2)
bool exp_sum(const float *x, std::size_t n, float shift, float *sum);
// the largest of n values (NaN ignored, -inf when n = 0) and whether any is NaN
bool max_nan(const float *x, std::size_t n, float *m, bool *nan);
// out = exp(x) * r, with exp(x) = 0 below the float32 range
bool exp_scale(const float *x, float *out, std::size_t n, float r);
bool tanh_inplace(float *x, std::size_t n);   // false when not built with AVX2
// An LSTM step's gate math after the recurrent sum, in one pass (lstm.cpp's cell_forward).
bool lstm_cell_forward(float *G, const float *CP, float *Cn, float *TC, float *Hn, std::size_t n, std::size_t gs);
bool gelu_erf_forward(const float *x, float *out, std::size_t n);
bool gelu_erf_backward(const float *x, const float *g, float *out, std::size_t n);
}  // namespace avx2

// AVX-512 bodies (fused_avx512.cpp) of the row kernels above and of the LSTM cell, with the
// contracts of their namesakes; false when this build has none. Callers check use_avx512().
namespace avx512 {
bool gelu_erf_forward(const float *x, float *out, std::size_t n);
bool gelu_erf_backward(const float *x, const float *g, float *out, std::size_t n);
bool softmax_rows(float *x, std::size_t rows, std::size_t cols, float scale, std::size_t causal_rows);
bool softmax_rows_backward(float *g, const float *p, std::size_t rows, std::size_t cols, float scale);
bool layer_norm_rows(const float *x, const float *w, const float *b, float *out, float *mean, float *rstd,
                     std::size_t rows, std::size_t d, double eps);
bool layer_norm_rows_backward_part(const float *x, const float *mean, const float *rstd, const float *w,
                                   const float *g, float *gx, double *sw, double *sb, std::size_t rows, std::size_t d);
bool lstm_cell_forward(float *G, const float *CP, float *Cn, float *TC, float *Hn, std::size_t n, std::size_t gs);
// lstm_cell.h's loops (cell_backward, init_step) compiled for AVX-512.
bool lstm_cell_backward(float *DH, float *DC, const float *GY, const float *G, const float *TC, const float *CP,
                        float *DG, std::ptrdiff_t B, std::ptrdiff_t H, std::ptrdiff_t b0, std::ptrdiff_t b1);
bool lstm_init_step(float *G, std::ptrdiff_t gs, const float *P, const float *BI, std::ptrdiff_t m, std::ptrdiff_t H);
bool tanh_inplace(float *x, std::size_t n);
// One output row of a 2x2 / stride 2 max pooling (pool.cpp), winners included.
bool max_pool2x2_row(const float *r0, const float *r1, float *best, std::int32_t *where, std::int32_t top,
                     std::int32_t w, std::size_t ow);
}  // namespace avx512

// The erf rational's coefficients (shared by both bodies).
inline constexpr float kErfP[7] = {-2.72614225801306e-10f, 2.77068142495902e-08f, -2.10102402082508e-06f,
                                   -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                                   -1.60960333262415e-02f};
inline constexpr float kErfQ[5] = {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                                   -7.37332916720468e-03f, -1.42647390514189e-02f};
inline constexpr float kInvSqrt2 = static_cast<float>(0.70710678118654752440);
inline constexpr float kInvSqrt2Pi = static_cast<float>(0.39894228040143267794);

}  // namespace tb::kernels
