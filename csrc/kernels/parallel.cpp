// parallel.h: one pool of worker threads for our kernels and, once registered, for OpenBLAS.
//
// Why one pool: NumPy's OpenBLAS keeps its own workers, which spin for about 0.1 s after each
// parallel product. A helper thread of ours that wanted the second core then had to share it
// with a spinning OpenBLAS worker, and a softmax on two threads took longer than on one (528
// against 381 us; docs/training.md). OpenBLAS 0.3.27+ can run its parallel regions through a
// callback instead (openblas_set_threads_callback_function; tensorbrain/_threads.py registers
// blas_callback below for NumPy's scipy-openblas), so BLAS jobs and our chunks share these workers,
// as torch's GEMMs and elementwise kernels share one OpenMP pool.
//
// parallel_for: the range is cut into chunks that the caller and the workers claim from a shared
// counter. The caller never waits for a worker to start: it runs every chunk no worker has
// claimed, then waits only for the chunks workers are running (spinning first: spin_until). A
// task holds its job through a shared_ptr, so a worker that picks it up after the call returned
// finds no chunk left and drops it without touching the caller's data.
//
// blas_callback: OpenBLAS's level-3 jobs wait on each other's progress, so every job must run at
// the same time on its own thread: the caller runs job 0 and the pool first grows until it has an
// idle worker for every queued task, so no queued job waits behind a job that waits for it.
//
// Idle workers spin for new work for up to 0.1 s (OpenBLAS's own workers' THREAD_TIMEOUT), then
// sleep on a condition variable. Why so long: a training step issues products and kernels back
// to back, and a BLAS job handed to a sleeping worker waits for its wake-up while its sibling job
// spins for it. With a 1 ms spin, the MLP step at two threads read 3 ms in most rounds and 10-50
// ms in others on the 2-core VM (docs/training.md); with 0.1 s, 2.5-3.0 ms in every round. Only
// kernel_threads() - 1 workers spin at once (the pool may hold more: see submit), and a spinner
// yields between short pauses, so it gives way to any thread the scheduler put on its core.
//
// The pool is made on first use in each process: a forked child (DataLoader workers) sees a pool
// whose workers did not come along and makes its own, leaving the old object alone (its mutex may
// have been held at the fork). Pools are never destroyed: their workers end with the process.
#include "kernels/parallel.h"

#include <pybind11/pybind11.h>
#include <sched.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TB_CPU_RELAX() _mm_pause()
#else
#define TB_CPU_RELAX() std::this_thread::yield()
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace tb::kernels {
namespace {
std::atomic<int> g_threads{1};
std::atomic<int> kSpinUs{100000};   // how long spin_until spins before its caller sleeps (set from Python)

// Spins (short pauses, then a yield) until done() or kSpinUs have passed; done()'s last
// answer. An idle worker spins here for new work (Pool::run), and a caller waiting for its
// workers' chunks before it sleeps on a condition variable: on the VM a sleeping thread's
// wake-up cost more than the wait itself (docs/training.md), and OpenMP's barrier in torch
// spins the same way.
template <typename Done>
bool spin_until(Done done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinUs.load(std::memory_order_relaxed));
    while (!done()) {
        if (std::chrono::steady_clock::now() >= until) return done();
        for (int i = 0; i < 16; ++i) TB_CPU_RELAX();
        sched_yield();
    }
    return true;
}
std::atomic<std::uint64_t> g_blas_jobs{0};   // OpenBLAS jobs run through blas_callback (tests)

struct Pool {
    const pid_t pid = getpid();
    std::mutex m;
    std::condition_variable wake;
    struct Task {
        std::function<void()> work, after;   // after: run once the worker counts as idle again
        bool blocking;                       // an OpenBLAS job: may wait on its siblings
    };
    std::deque<Task> tasks;                    // under m
    int workers = 0, idle = 0, sleeping = 0;   // under m
    int blocking_queued = 0;                   // under m
    std::atomic<int> queued{0};                // tasks.size(), readable without m (spinning)
    std::atomic<int> spinning{0};              // idle workers in their spin (see run)

    bool spawn() {
        try {
            std::thread([this] { run(); }).detach();
        } catch (const std::system_error &) {
            return false;
        }
        ++workers;
        ++idle;   // counted as idle from now on: it takes a task as soon as it runs
        return true;
    }

    // Queue tasks. Blocking ones first get a worker each: workers start until the idle ones
    // cover every queued blocking task (false: the system refused a thread). Non-blocking ones
    // (parallel_for's helpers, whose caller runs any chunk nobody took) only make the pool grow
    // to `want` workers.
    bool submit(std::vector<Task> more, int want) {
        std::unique_lock<std::mutex> lk(m);
        for (auto &t : more) {
            blocking_queued += t.blocking;
            tasks.push_back(std::move(t));
        }
        queued.store(static_cast<int>(tasks.size()));
        bool ok = true;
        while (ok && (idle < blocking_queued || workers < want)) ok = spawn();
        if (sleeping > 0) wake.notify_all();
        return ok;
    }

    void run() {
        std::unique_lock<std::mutex> lk(m);
        for (;;) {
            if (tasks.empty()) {
                lk.unlock();
                // spin a while before sleeping: the next product or kernel is usually near. Only
                // kernel_threads() - 1 workers spin at once: the pool can hold more (a BLAS
                // job's submitter may find every worker still finishing a task and start one),
                // and a spare spinner would take a core from the caller.
                if (spinning.fetch_add(1) < std::max(1, kernel_threads() - 1))
                    spin_until([this] { return queued.load(std::memory_order_relaxed) != 0; });
                spinning.fetch_sub(1);
                lk.lock();
                if (tasks.empty()) {
                    ++sleeping;
                    wake.wait(lk, [this] { return !tasks.empty(); });
                    --sleeping;
                }
            }
            Task task = std::move(tasks.front());
            tasks.pop_front();
            blocking_queued -= task.blocking;
            queued.store(static_cast<int>(tasks.size()));
            --idle;
            lk.unlock();
            task.work();
            lk.lock();
            ++idle;   // before `after` tells the submitter: its next submit sees this worker idle
            if (task.after) {
                lk.unlock();
                task.after();
                lk.lock();
            }
        }
    }
};

std::mutex g_pool_mutex;
Pool *g_pool = nullptr;   // leaked on purpose (see above)

Pool &pool() {
    std::lock_guard<std::mutex> lk(g_pool_mutex);
    if (g_pool == nullptr || g_pool->pid != getpid()) g_pool = new Pool();
    return *g_pool;
}

struct Job {
    std::function<void(std::size_t, std::size_t)> f;
    std::size_t n = 0, chunk = 0, chunks = 0;
    std::atomic<std::size_t> next{0};
    std::size_t done = 0;   // under m
    std::atomic<bool> complete{false};   // done == chunks, readable without m (the caller's spin)
    std::mutex m;
    std::condition_variable all_done;

    void run() {
        for (std::size_t i; (i = next.fetch_add(1)) < chunks;) {
            f(i * chunk, std::min(n, (i + 1) * chunk));
            std::lock_guard<std::mutex> lk(m);
            if (++done == chunks) {
                complete.store(true, std::memory_order_release);
                all_done.notify_all();
            }
        }
    }
};

// Counts down to zero; wait() returns then.
struct Latch {
    std::mutex m;
    std::condition_variable cv;
    int left;   // under m
    std::atomic<bool> zero{false};   // left == 0, readable without m (wait's spin)
    explicit Latch(int n) : left(n) {}
    void count_down() {
        std::lock_guard<std::mutex> lk(m);
        if (--left == 0) {
            zero.store(true, std::memory_order_release);
            cv.notify_all();
        }
    }
    void wait() {
        if (spin_until([this] { return zero.load(std::memory_order_acquire); })) return;
        std::unique_lock<std::mutex> lk(m);
        cv.wait(lk, [this] { return left == 0; });
    }
};

using DoJob = void (*)(int, void *, int);

// One OpenBLAS parallel region at a time in the process. Two regions at once through the
// callback are not safe in OpenBLAS 0.3.31's pthreads build: a float32 and a float64 product
// from two Python threads at once gave wrong results (some values near 1e21; 16-42 of 160
// products), while two float32 or two float64 products at once were right, and so was
// everything without the callback, where OpenBLAS hands each job to a server thread of its own
// (tests/test_kernel_threads.py). A job
// never calls OpenBLAS on more than one thread, so a region never waits for itself.
std::mutex g_blas_region;

// OpenBLAS's openblas_threads_callback: run dojob(i, jobdata + i * elsize, dojob_data) for
// i < numjobs, all at once (see the file comment), and return when all have.
void blas_callback(int /*sync*/, DoJob dojob, int numjobs, std::size_t elsize, void *jobdata,
                              int dojob_data) {
    g_blas_jobs.fetch_add(static_cast<std::uint64_t>(std::max(numjobs, 0)));
    if (numjobs <= 1) {
        if (numjobs == 1) dojob(0, jobdata, dojob_data);
        return;
    }
    const std::lock_guard<std::mutex> region(g_blas_region);
    auto latch = std::make_shared<Latch>(numjobs - 1);
    std::vector<Pool::Task> more;
    for (int i = 1; i < numjobs; ++i)
        more.push_back({[=] { dojob(i, static_cast<char *>(jobdata) + static_cast<std::size_t>(i) * elsize, dojob_data); },
                        [latch] { latch->count_down(); }, true});
    if (!pool().submit(std::move(more), 0)) {
        // no thread for every job: the jobs would wait on each other for ever; OpenBLAS cannot be
        // told to retry on fewer threads from here, so fail loudly instead of hanging
        std::fprintf(stderr, "tensorbrain: could not start a thread for an OpenBLAS job; aborting\n");
        std::abort();
    }
    dojob(0, jobdata, dojob_data);
    latch->wait();
}
}  // namespace

void set_kernel_threads(int n) { g_threads.store(std::max(1, n)); }
int kernel_threads() { return g_threads.load(); }

void parallel_for(std::size_t n, std::size_t grain, std::size_t align,
                  const std::function<void(std::size_t, std::size_t)> &f, std::size_t per_thread) {
    const std::size_t most = grain ? n / grain : n;
    const std::size_t parts = std::min<std::size_t>(static_cast<std::size_t>(kernel_threads()), std::max<std::size_t>(most, 1));
    if (parts <= 1) {
        if (n) f(0, n);
        return;
    }
    auto job = std::make_shared<Job>();
    align = std::max<std::size_t>(align, 1);
    // per_thread chunks a thread (when the grain allows)
    const std::size_t want = std::min<std::size_t>(std::max<std::size_t>(per_thread, 1) * parts, std::max<std::size_t>(most, parts));
    std::size_t chunk = (n + want - 1) / want;
    chunk = (chunk + align - 1) / align * align;
    job->f = f;
    job->n = n;
    job->chunk = chunk;
    job->chunks = (n + chunk - 1) / chunk;
    std::vector<Pool::Task> helpers;
    for (std::size_t t = 1; t < parts; ++t) helpers.push_back({[job] { job->run(); }, nullptr, false});
    // a refused thread leaves its chunks to the caller
    pool().submit(std::move(helpers), static_cast<int>(parts) - 1);
    job->run();
    if (spin_until([&] { return job->complete.load(std::memory_order_acquire); })) return;
    std::unique_lock<std::mutex> lk(job->m);
    job->all_done.wait(lk, [&] { return job->done == job->chunks; });
}

}  // namespace tb::kernels

void init_parallel(pybind11::module_ &m) {
    m.def("_set_kernel_threads", &tb::kernels::set_kernel_threads, pybind11::arg("n"),
          "threads for the large fused kernels (tb.set_num_threads calls this)");
    m.def("_kernel_threads", &tb::kernels::kernel_threads, "threads the large fused kernels use");
    m.def("_blas_callback_address", [] { return reinterpret_cast<std::uintptr_t>(&tb::kernels::blas_callback); },
          "the address of the pool's OpenBLAS threads callback (tensorbrain/_threads.py registers it)");
    m.def("_set_pool_spin_us", [](int us) { tb::kernels::kSpinUs.store(us, std::memory_order_relaxed); }, "how long idle workers and callers waiting for their chunks spin before sleeping (benchmarks, tests)");
    m.def("_pool_workers", [] { std::lock_guard<std::mutex> lk(tb::kernels::pool().m); return tb::kernels::pool().workers; },
          "worker threads in this process's pool (tests)");
    m.def("_blas_jobs_run", [] { return tb::kernels::g_blas_jobs.load(); },
          "how many OpenBLAS jobs ran through the pool's callback (tests)");
}
