// Splitting a large kernel (GELU, softmax, layer norm: fused.cpp; im2col/col2im, max pooling,
// batch norm) across the threads that tb.set_num_threads asks for, as torch splits its
// elementwise kernels. The chunks run on one persistent pool of workers, which NumPy's OpenBLAS
// shares through its threads callback once tb.set_num_threads(n > 1) registers it
// (tensorbrain/_threads.py): products and kernels then take turns on the same threads instead of
// two libraries' threads fighting for the cores (parallel.cpp says how, and why it is safe with
// OpenBLAS's jobs, fork and concurrent callers). Below `grain` items per part a call stays on its
// own thread.
#pragma once

#include <cstddef>
#include <functional>

namespace tb::kernels {

void set_kernel_threads(int n);   // 1 (the default until tb.set_num_threads) = the caller only
int kernel_threads();

// f(begin, end) over [0, n) on at most kernel_threads() threads, in chunks of at least `grain`
// items (`per_thread` a thread: two by default, so a late worker leaves less to the caller; one
// where each call pays a setup, as a GEMM packs its shared operand), each chunk's size a
// multiple of `align` (except the last). Chunks are disjoint: results do not depend on the split
// as long as f's items are independent. f is called only before parallel_for returns.
void parallel_for(std::size_t n, std::size_t grain, std::size_t align,
                  const std::function<void(std::size_t, std::size_t)> &f, std::size_t per_thread = 2);

// Calls below this many values stay on one thread: waking a worker and handing it a chunk costs
// about what a thread does to 32k values in these kernels.
inline constexpr std::size_t kGrain = std::size_t{1} << 15;

// parallel_for's grain for items (rows, channels, image planes) of `values` values each.
inline std::size_t items_per_grain(std::size_t values) { return kGrain / (values ? values : 1) ? kGrain / (values ? values : 1) : 1; }

}  // namespace tb::kernels
