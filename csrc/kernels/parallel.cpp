// parallel.h: the range is cut into chunks that the caller and its helper threads claim from a
// shared counter. The caller never waits for a helper to start: it runs every chunk no helper
// has claimed, then waits only for the chunks helpers are running. On a loaded machine, where a
// new thread may wait milliseconds for a core, the call then costs what one thread costs instead
// of the helper's wait. Helpers are detached and hold the job's state through a shared_ptr, so a
// helper that starts after the call returned finds no chunk left and ends without touching the
// caller's data (the chunk function is only called for claimed chunks, all finished before the
// call returns). A helper that cannot be started (std::system_error: a process at its thread
// limit) leaves its chunks to the caller.
#include "kernels/parallel.h"

#include <pybind11/pybind11.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace tb::kernels {
namespace {
std::atomic<int> g_threads{1};

struct Job {
    std::function<void(std::size_t, std::size_t)> f;
    std::size_t n = 0, chunk = 0, chunks = 0;
    std::atomic<std::size_t> next{0};
    std::size_t done = 0;   // under m
    std::mutex m;
    std::condition_variable all_done;

    void run() {
        for (std::size_t i; (i = next.fetch_add(1)) < chunks;) {
            f(i * chunk, std::min(n, (i + 1) * chunk));
            std::lock_guard<std::mutex> lk(m);
            if (++done == chunks) all_done.notify_all();
        }
    }
};
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
    auto job = std::make_shared<Job>();
    align = std::max<std::size_t>(align, 1);
    // two chunks a thread (when the grain allows): a late helper leaves less to the caller
    const std::size_t want = std::min<std::size_t>(2 * parts, std::max<std::size_t>(most, parts));
    std::size_t chunk = (n + want - 1) / want;
    chunk = (chunk + align - 1) / align * align;
    job->f = f;
    job->n = n;
    job->chunk = chunk;
    job->chunks = (n + chunk - 1) / chunk;
    for (std::size_t t = 1; t < parts; ++t) {
        try {
            std::thread([job] { job->run(); }).detach();
        } catch (const std::system_error &) {
            break;
        }
    }
    job->run();
    std::unique_lock<std::mutex> lk(job->m);
    job->all_done.wait(lk, [&] { return job->done == job->chunks; });
}

}  // namespace tb::kernels

void init_parallel(pybind11::module_ &m) {
    m.def("_set_kernel_threads", &tb::kernels::set_kernel_threads, pybind11::arg("n"),
          "threads for the large fused kernels (tb.set_num_threads calls this)");
    m.def("_kernel_threads", &tb::kernels::kernel_threads, "threads the large fused kernels use");
}
