// parallel.h's pool. Workers are created on the first call that needs them, in the process that
// makes the call: after fork() the child sees a pool that is not its own (its workers did not come
// along) and starts a fresh one, leaving the old object alone (its mutex may have been held at the
// fork). The pool is never destroyed: at exit the workers wait on a condition variable and end
// with the process.
#include "kernels/parallel.h"

#include <pybind11/pybind11.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace tb::kernels {
namespace {

std::atomic<int> g_threads{1};

struct Pool {
    pid_t pid = getpid();
    std::mutex busy;                   // one job at a time
    std::mutex m;
    std::condition_variable wake, done;
    std::vector<std::thread *> workers;   // leaked on purpose (see above)
    const std::function<void(std::size_t, std::size_t)> *job = nullptr;
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    std::size_t generation = 0;
    int pending = 0;

    void grow(int n) {
        while (static_cast<int>(workers.size()) < n) {
            const std::size_t id = workers.size() + 1;   // range 0 is the caller's
            workers.push_back(new std::thread([this, id] { run(id); }));
        }
    }

    void run(std::size_t id) {
        std::size_t seen = 0;
        std::unique_lock<std::mutex> lk(m);
        for (;;) {
            wake.wait(lk, [&] { return generation != seen; });
            seen = generation;
            if (id < ranges.size()) {
                const auto r = ranges[id];
                const auto *f = job;
                lk.unlock();
                (*f)(r.first, r.second);
                lk.lock();
            }
            if (--pending == 0) done.notify_one();
        }
    }
};

Pool *g_pool = nullptr;
std::mutex g_pool_mutex;

Pool *pool() {
    std::lock_guard<std::mutex> lk(g_pool_mutex);
    if (g_pool == nullptr || g_pool->pid != getpid()) g_pool = new Pool();
    return g_pool;
}

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
    Pool *p = pool();
    std::unique_lock<std::mutex> job_lock(p->busy, std::try_to_lock);
    if (!job_lock.owns_lock()) {       // another thread's job is running: stay on this one
        f(0, n);
        return;
    }
    align = std::max<std::size_t>(align, 1);
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    std::size_t chunk = (n + parts - 1) / parts;
    chunk = (chunk + align - 1) / align * align;
    for (std::size_t b = 0; b < n; b += chunk) ranges.emplace_back(b, std::min(n, b + chunk));
    {
        std::lock_guard<std::mutex> lk(p->m);
        p->grow(static_cast<int>(ranges.size()) - 1);
        p->ranges = ranges;
        p->job = &f;
        p->pending = static_cast<int>(p->workers.size());
        ++p->generation;
    }
    p->wake.notify_all();
    f(ranges[0].first, ranges[0].second);
    std::unique_lock<std::mutex> lk(p->m);
    p->done.wait(lk, [&] { return p->pending == 0; });
}

}  // namespace tb::kernels

void init_parallel(pybind11::module_ &m) {
    m.def("_set_kernel_threads", &tb::kernels::set_kernel_threads, pybind11::arg("n"),
          "threads for the large fused kernels (tb.set_num_threads calls this)");
    m.def("_kernel_threads", &tb::kernels::kernel_threads, "threads the large fused kernels use");
}
