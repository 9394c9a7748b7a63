// Splitting a large fused kernel (GELU, softmax, layer norm: fused.cpp) across the threads that
// tb.set_num_threads asks for, as torch splits its elementwise kernels; the GEMMs around them
// already run on NumPy's BLAS threads. A tiny pool of persistent workers, one job at a time:
// the caller's thread runs the first chunk, and a call made while the pool is busy (another
// Python thread with the GIL released) runs on its own thread. Below `grain` items a call never
// leaves its thread (waking a worker costs ~10 us).
#pragma once

#include <cstddef>
#include <functional>

namespace tb::kernels {

void set_kernel_threads(int n);   // 1 (the default until tb.set_num_threads) = no workers
int kernel_threads();

// f(begin, end) over [0, n) in at most kernel_threads() chunks of at least `grain` items, each
// chunk's size a multiple of `align` (except the last). Chunks are disjoint: results do not depend
// on the split as long as f's items are independent.
void parallel_for(std::size_t n, std::size_t grain, std::size_t align,
                  const std::function<void(std::size_t, std::size_t)> &f);

}  // namespace tb::kernels
