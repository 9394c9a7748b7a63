// The AVX2+F16C copy of the loops in reduce_loops.h. CMakeLists.txt compiles files named
// *_avx2.cpp with -mavx2 -mf16c on x86-64 only; reduce.cpp calls this copy only after
// __builtin_cpu_supports says the CPU has both, so the wheel still runs on any x86-64.
#if defined(__AVX2__) && defined(__F16C__)
#define TB_KERNEL_NS avx2
#include "kernels/reduce_loops.h"
namespace tb::kernels { bool avx2_kernels_built() { return true; } }
#else
#include "kernels/reduce.h"
namespace tb::kernels {
bool avx2_kernels_built() { return false; }
namespace avx2 {
bool reduce_into(void *, const void *, std::size_t, DType, Op) { return false; }
bool scale_into(void *, std::size_t, DType, double) { return false; }
}  // namespace avx2
}  // namespace tb::kernels
#endif
