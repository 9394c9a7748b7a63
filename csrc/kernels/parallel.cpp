// parallel.h: helper threads started per call and joined before it returns. A thread that cannot
// be started (std::system_error: a process at its thread limit) leaves its chunk to the caller.
#include "kernels/parallel.h"

#include <pybind11/pybind11.h>

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace tb::kernels {
namespace {
std::atomic<int> g_threads{1};
}  // namespace

void set_kernel_threads(int n) { g_threads.store(std::max(1, n)); }
int kernel_threads() { return g_threads.load(); }

void parallel_for(std::size_t n, std::size_t grain, std::size_t align,
                  const std::function<void(std::size_t, std::size_t)> &f) {
    const std::size_t most = grain ? n / grain : n;
    const std::size_t parts = std::min<std::size_t>(static_cast<std::size_t>(kernel_threads()), std::max<std::size_t>(most, 1));
    if (parts <= 1) {
        if (n) f(0, n);
        return;
    }
    align = std::max<std::size_t>(align, 1);
    std::size_t chunk = (n + parts - 1) / parts;
    chunk = (chunk + align - 1) / align * align;
    std::vector<std::thread> helpers;
    std::vector<std::pair<std::size_t, std::size_t>> inline_chunks;
    helpers.reserve(parts - 1);
    for (std::size_t b = chunk; b < n; b += chunk) {
        const std::size_t e = std::min(n, b + chunk);
        try {
            helpers.emplace_back([&f, b, e] { f(b, e); });
        } catch (const std::system_error &) {
            inline_chunks.emplace_back(b, e);
        }
    }
    f(0, std::min(n, chunk));
    for (const auto &r : inline_chunks) f(r.first, r.second);
    for (auto &t : helpers) t.join();
}

}  // namespace tb::kernels

void init_parallel(pybind11::module_ &m) {
    m.def("_set_kernel_threads", &tb::kernels::set_kernel_threads, pybind11::arg("n"),
          "threads for the large fused kernels (tb.set_num_threads calls this)");
    m.def("_kernel_threads", &tb::kernels::kernel_threads, "threads the large fused kernels use");
}
