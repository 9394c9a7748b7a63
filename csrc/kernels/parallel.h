// Splitting a large fused kernel (GELU, softmax, layer norm: fused.cpp) across the threads that
// tb.set_num_threads asks for, as torch splits its elementwise kernels; the GEMMs around them
// already run on NumPy's BLAS threads. Each call that is worth splitting starts its own helper
// threads (no pool, no state shared between calls; a persistent pool was tried first, fda0544,
// and reverted after an unexplained crash); caller and helpers claim chunks from a counter, and
// the caller waits only for chunks a helper is running (parallel.cpp). Starting a thread costs
// ~20-40 us here, so below `grain` items per part a call stays on its own thread.
#pragma once

#include <cstddef>
#include <functional>

namespace tb::kernels {

void set_kernel_threads(int n);   // 1 (the default until tb.set_num_threads) = the caller only
int kernel_threads();

// f(begin, end) over [0, n) on at most kernel_threads() threads, in chunks of at least `grain`
// items (about two a thread), each chunk's size a multiple of `align` (except the last). Chunks
// are disjoint: results do not depend on the split as long as f's items are independent. f is
// called only before parallel_for returns.
void parallel_for(std::size_t n, std::size_t grain, std::size_t align,
                  const std::function<void(std::size_t, std::size_t)> &f);

}  // namespace tb::kernels
