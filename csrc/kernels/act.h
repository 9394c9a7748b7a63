// Activation functions over contiguous float32 buffers for the fused kernels (lstm.cpp): tanh
// in place. Two bodies: the baseline calls std::tanh per value; act_avx2.cpp evaluates it 8
// values at a time (Cephes' tanhf: a polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above, with
// Cephes' expf), within 2 ulp of std::tanh (tests/nn/test_rnn_native.py checks against NumPy's).
// std::tanh costs ~10 ns a value here, as much as NumPy's float32 tanh: an LSTM step's gates
// spent more time in tanh than in their GEMM.
#pragma once

#include <cstddef>

namespace tb::kernels {

void tanh_inplace(float *x, std::size_t n);   // picks the AVX2 body when the CPU has it

namespace avx2 {
bool tanh_inplace(float *x, std::size_t n);   // false when not built with AVX2
}  // namespace avx2

}  // namespace tb::kernels
