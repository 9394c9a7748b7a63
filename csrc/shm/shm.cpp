// Shared-memory collectives: segment lifetime, futex synchronisation and the algorithms.
// The protocol is described in shm.h; its NumPy twin is tensorbrain/distributed/_shm/_twin.py.
#include "shm.h"

#include "kernels/reduce.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TB_PAUSE() _mm_pause()
#else
#define TB_PAUSE() std::atomic_signal_fence(std::memory_order_seq_cst)
#endif

namespace tb_shm {

namespace {

// Header field offsets (mirrored in _layout.py).
constexpr std::size_t kOffMagic = 0, kOffVersion = 8, kOffNranks = 12, kOffBufBytes = 16,
                      kOffAttached = 24, kOffAbort = 28, kOffAbortRank = 32, kOffAbortKind = 36;
constexpr std::size_t kCtlSeq = 0, kCtlWaiters = 4, kCtlPid = 8, kCtlFp = 16;

// futex sleep slice: how often a sleeping rank checks peer liveness, abort and the deadline.
// 50 ms keeps the detection of a dead peer well under a second at no measurable cost.
constexpr long kSliceNs = 50L * 1000 * 1000;

// Waiting for a peer, in three phases (measured on the 2-core dev VM, 2 ranks, all_reduce, while
// ~8 other processes kept the load average at 6-8):
//  1. spin with PAUSE, only a few iterations: PAUSE costs 71 ns on this CPU, and while we spin
//     the peer may be waiting for our core. 2048 pauses: 8 B in 62 us; 256: 26 us; 64: 13 us;
//     0: 2.2 us (and 1 MiB 4.0 GB/s against 2.1 GB/s with 256);
//  2. sched_yield() until yield_us have passed: under load the peer is often descheduled, and
//     yielding hands it our core (spin-then-futex without this phase: 186-262 us at 8 B);
//     on an idle machine a yield returns at once, so this is a spin with a syscall in it;
//  3. futex(FUTEX_WAIT) in 50 ms slices: the peer is computing (DDP backward), so sleep and
//     leave the core to it. Phase 2 bounds the cost of that case to yield_us per wait.
constexpr int kSpinPauses = 8;
constexpr double kYieldUs = 500.0;

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

long futex(void *addr, int op, uint32_t val, const struct timespec *ts) {
    return syscall(SYS_futex, addr, op, val, ts, nullptr, 0);
}

template <typename T> T *at(char *base, std::size_t off) {
    return reinterpret_cast<T *>(base + off);
}

// Liveness of a pid on this host: gone (ESRCH) or a zombie/dead task that nobody reaped yet.
bool pid_alive(int32_t pid) {
    if (pid <= 0) return true;  // not attached yet: only the timeout applies
    if (::kill(pid, 0) == -1 && errno == ESRCH) return false;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = std::fopen(path, "r");
    if (!f) return true;  // no /proc: trust kill()
    char buf[512];
    std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = 0;
    const char *p = std::strrchr(buf, ')');  // comm may contain spaces and parentheses
    if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X' || p[2] == 'x')) return false;
    return true;
}

}  // namespace

std::size_t header_bytes(int nranks) {
    std::size_t h = kCtlStride * (static_cast<std::size_t>(nranks) + 1);
    return (h + 4095) / 4096 * 4096;
}

std::size_t segment_bytes(int nranks, std::size_t buf_bytes) {
    return header_bytes(nranks) + 2 * static_cast<std::size_t>(nranks) * buf_bytes;
}

// ***** lifetime *****
Group::Group(const std::string &name, int rank, int nranks, bool create, std::size_t buf_bytes,
             double timeout)
    : timeout_s(timeout), name_(name), rank_(rank), n_(nranks), creator_(create),
      buf_bytes_(buf_bytes) {
    if (nranks < 1 || rank < 0 || rank >= nranks)
        throw std::invalid_argument("shm: rank " + std::to_string(rank) + " is out of range for " +
                                    std::to_string(nranks) + " ranks");
    if (create && (buf_bytes == 0 || buf_bytes % 4096 != 0))
        throw std::invalid_argument("shm: buf_bytes must be a positive multiple of 4096, got " +
                                    std::to_string(buf_bytes));
    std::string path = name[0] == '/' ? name : "/" + name;
    int fd;
    if (create) {
        fd = ::shm_open(path.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0)
            throw ShmError(0, -1, "shm: cannot create segment " + path + ": " +
                                      std::strerror(errno));
        map_bytes_ = segment_bytes(nranks, buf_bytes);
        if (::ftruncate(fd, static_cast<off_t>(map_bytes_)) != 0) {
            int e = errno;
            ::close(fd);
            ::shm_unlink(path.c_str());
            throw ShmError(0, -1, "shm: cannot size segment " + path + " to " +
                                      std::to_string(map_bytes_) + " bytes: " + std::strerror(e) +
                                      " (is /dev/shm full?)");
        }
    } else {
        fd = ::shm_open(path.c_str(), O_RDWR, 0);
        if (fd < 0)
            throw ShmError(0, -1, "shm: cannot attach to segment " + path + ": " +
                                      std::strerror(errno));
        struct stat st;
        ::fstat(fd, &st);
        map_bytes_ = static_cast<std::size_t>(st.st_size);
    }
    void *p = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
        if (create) ::shm_unlink(path.c_str());
        throw ShmError(0, -1, "shm: mmap of " + path + " failed: " + std::strerror(errno));
    }
    base_ = static_cast<char *>(p);
    if (create) {
        *at<uint32_t>(base_, kOffVersion) = kVersion;
        *at<uint32_t>(base_, kOffNranks) = static_cast<uint32_t>(nranks);
        *at<uint64_t>(base_, kOffBufBytes) = buf_bytes;
        __atomic_store_n(at<uint64_t>(base_, kOffMagic), kMagic, __ATOMIC_RELEASE);
    } else {
        // The name is published (through the store) only after initialisation, but check anyway.
        double deadline = now_s() + timeout_s;
        while (__atomic_load_n(at<uint64_t>(base_, kOffMagic), __ATOMIC_ACQUIRE) != kMagic) {
            if (now_s() > deadline) {
                close();
                throw ShmError(1, -1, "shm: segment " + path + " was never initialised");
            }
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        uint32_t v = *at<uint32_t>(base_, kOffVersion);
        uint32_t nr = *at<uint32_t>(base_, kOffNranks);
        if (v != kVersion || static_cast<int>(nr) != nranks) {
            close();
            throw ShmError(0, -1, "shm: segment " + path + " has version " + std::to_string(v) +
                                      " and " + std::to_string(nr) + " ranks; expected version " +
                                      std::to_string(kVersion) + " and " +
                                      std::to_string(nranks) + " ranks");
        }
        buf_bytes_ = *at<uint64_t>(base_, kOffBufBytes);
    }
    data_off_ = header_bytes(nranks);
    srcs_.resize(nranks);
    blk_.resize(nranks);
    long ncpu = ::sysconf(_SC_NPROCESSORS_ONLN);
    spin_iters_ = nranks > ncpu ? 0 : kSpinPauses;  // oversubscribed: PAUSE only delays the peer
    yield_us = kYieldUs;
    // Measured crossover (dev VM, float32, interleaved A/B of both algorithms in one group, min of
    // 3 rounds, load average ~4; reproduce with python benchmarks/shm.py --crossover --nproc N):
    //   2 ranks: flat 0.4 us vs rs/ag 0.5 us at 2 KiB, 1.0 vs 0.6 at 4 KiB, 6.1 vs 2.8 at 64 KiB
    //            -> flat up to 2 KiB (reading a peer's whole buffer across cores costs more than
    //            the second barrier from 4 KiB on);
    //   3 ranks: 5.4 vs 6.3 us at 16 KiB, 8.0 vs 7.5 at 32 KiB -> flat up to 16 KiB;
    //   4 ranks: 7.0 vs 8.1 us at 16 KiB, 11.0 vs 9.6 at 32 KiB -> flat up to 16 KiB.
    // Under heavy load (load average 6-8) barriers get dearer and flat won up to 64 KiB on 2
    // ranks (6.2 vs 7.6 us); the thresholds follow the quiet machine, where latency matters.
    flat_max_bytes = std::min<std::size_t>(nranks == 2 ? 2 * 1024 : 16 * 1024, buf_bytes_);

    __atomic_store_n(at<int32_t>(base_, kCtlStride * (rank_ + 1) + kCtlPid),
                     static_cast<int32_t>(::getpid()), __ATOMIC_SEQ_CST);
    __atomic_fetch_add(at<uint32_t>(base_, kOffAttached), 1, __ATOMIC_SEQ_CST);
}

// Everyone attached = every pid slot is set (the twin cannot do an atomic add on the counter, so
// both sides count pids; the counter is informational). Then the creator unlinks the name.
void Group::wait_attached() {
    check_usable("wait_attached");
    auto all_attached = [&] {
        for (int r = 0; r < n_; ++r)
            if (pid(r) == 0) return false;
        return true;
    };
    double deadline = now_s() + timeout_s;
    while (!all_attached()) {
        if (__atomic_load_n(at<uint32_t>(base_, kOffAbort), __ATOMIC_ACQUIRE))
            throw ShmError(0, -1, "shm: group " + name_ + " aborted while attaching");
        if (now_s() > deadline) {
            std::string missing;
            for (int r = 0; r < n_; ++r)
                if (pid(r) == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
            __atomic_store_n(at<uint32_t>(base_, kOffAbort), 1, __ATOMIC_SEQ_CST);
            if (creator_) unlink();
            throw ShmError(1, -1, "shm: timed out after " + std::to_string(timeout_s) +
                                      " s waiting for rank(s) " + missing + " to attach to " +
                                      name_);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    // Everyone has it mapped: the name is no longer needed, so a crash leaves nothing behind.
    if (creator_) unlink();
}

Group::~Group() {
    if (creator_) unlink();
    close();
}

void Group::close() {
    if (base_) {
        ::munmap(base_, map_bytes_);
        base_ = nullptr;
    }
}

void Group::unlink() {
    if (!unlinked_) {
        std::string path = name_[0] == '/' ? name_ : "/" + name_;
        ::shm_unlink(path.c_str());
        unlinked_ = true;
    }
}

// ***** synchronisation *****
std::atomic<uint32_t> &Group::seq(int r) const {
    return *reinterpret_cast<std::atomic<uint32_t> *>(base_ + kCtlStride * (r + 1) + kCtlSeq);
}
std::atomic<uint32_t> &Group::waiters(int r) const {
    return *reinterpret_cast<std::atomic<uint32_t> *>(base_ + kCtlStride * (r + 1) + kCtlWaiters);
}
int32_t Group::pid(int r) const {
    return __atomic_load_n(reinterpret_cast<int32_t *>(base_ + kCtlStride * (r + 1) + kCtlPid),
                           __ATOMIC_ACQUIRE);
}
char *Group::buf(int r, uint32_t gen) const {
    return base_ + data_off_ + (2 * static_cast<std::size_t>(r) + (gen & 1)) * buf_bytes_;
}

void Group::arrive() {
    ++step_;
    auto &s = seq(rank_);
    s.store(step_, std::memory_order_seq_cst);
    if (waiters(rank_).load(std::memory_order_seq_cst) != 0)
        futex(&s, FUTEX_WAKE, INT_MAX, nullptr);
}

void Group::wait_peers() {
    for (int k = 1; k < n_; ++k) wait_word((rank_ + k) % n_, step_);
}

static inline bool reached(uint32_t v, uint32_t target) {
    return static_cast<int32_t>(v - target) >= 0;  // sequence numbers wrap
}

void Group::wait_word(int peer, uint32_t target) { wait_on(seq(peer), waiters(peer), target, peer); }

std::atomic<uint32_t> &Group::word(std::size_t off) const {
    return *reinterpret_cast<std::atomic<uint32_t> *>(base_ + off);
}

void Group::wait_on(std::atomic<uint32_t> &w, std::atomic<uint32_t> &nw, uint32_t target,
                    int peer) {
    for (int i = 0; i < spin_iters_; ++i) {
        if (reached(w.load(std::memory_order_acquire), target)) return;
        TB_PAUSE();
    }
    if (yield_us > 0) {
        double until = now_s() + yield_us * 1e-6;
        do {
            if (reached(w.load(std::memory_order_acquire), target)) return;
            ::sched_yield();
        } while (now_s() < until);
    }
    double deadline = now_s() + timeout_s;
    for (;;) {
        nw.fetch_add(1, std::memory_order_seq_cst);
        uint32_t v = w.load(std::memory_order_seq_cst);
        if (!reached(v, target)) {
            struct timespec ts = {0, kSliceNs};
            futex(&w, FUTEX_WAIT, v, &ts);
        }
        nw.fetch_sub(1, std::memory_order_seq_cst);
        if (reached(w.load(std::memory_order_acquire), target)) return;
        if (__atomic_load_n(at<uint32_t>(base_, kOffAbort), __ATOMIC_ACQUIRE)) check_usable("wait");
        if (peer < 0) {  // the arena's done word: any peer may be the one that is late
            for (int k = 1; k < n_; ++k) check_alive((rank_ + k) % n_);
            if (now_s() > deadline)
                fail(1, -1, "shm: rank " + std::to_string(rank_) + " timed out after " +
                                std::to_string(timeout_s) + " s waiting for the other ranks to "
                                "finish reducing the gradient arena in group " + name_);
            continue;
        }
        check_alive(peer);
        if (now_s() > deadline)
            fail(1, peer, "shm: rank " + std::to_string(rank_) + " timed out after " +
                              std::to_string(timeout_s) + " s waiting for rank " +
                              std::to_string(peer) + " (pid " + std::to_string(pid(peer)) +
                              ") in group " + name_ +
                              "; the peer is alive but did not enter the same collective "
                              "(mismatched calls across ranks?)");
    }
}

void Group::check_alive(int peer) {
    int32_t p = pid(peer);
    if (!pid_alive(p))
        fail(0, peer, "shm: rank " + std::to_string(peer) + " (pid " + std::to_string(p) +
                          ") died while rank " + std::to_string(rank_) +
                          " waited for it in a collective of group " + name_);
}

void Group::fail(int kind, int peer, const std::string &msg) {
    broken_ = true;
    if (base_) {
        uint32_t zero = 0;
        if (__atomic_compare_exchange_n(at<uint32_t>(base_, kOffAbort), &zero, 1u, false,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            *at<int32_t>(base_, kOffAbortRank) = peer;
            __atomic_store_n(at<uint32_t>(base_, kOffAbortKind), static_cast<uint32_t>(kind),
                             __ATOMIC_SEQ_CST);
        }
        // Wake everyone sleeping on any word so they see the abort now, not at their timeout.
        for (int r = 0; r < n_; ++r) futex(&seq(r), FUTEX_WAKE, INT_MAX, nullptr);
    }
    throw ShmError(kind, peer, msg);
}

void Group::abort() {
    if (!base_) return;
    uint32_t zero = 0;
    if (__atomic_compare_exchange_n(at<uint32_t>(base_, kOffAbort), &zero, 1u, false,
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        *at<int32_t>(base_, kOffAbortRank) = rank_;
        __atomic_store_n(at<uint32_t>(base_, kOffAbortKind), 2u, __ATOMIC_SEQ_CST);
    }
    for (int r = 0; r < n_; ++r) futex(&seq(r), FUTEX_WAKE, INT_MAX, nullptr);
}

void Group::check_usable(const char *what) {
    if (!base_)
        throw ShmError(0, -1, std::string("shm: ") + what + " on a closed group " + name_);
    if (__atomic_load_n(at<uint32_t>(base_, kOffAbort), __ATOMIC_ACQUIRE)) {
        broken_ = true;
        int r = *at<int32_t>(base_, kOffAbortRank);
        uint32_t kind = __atomic_load_n(at<uint32_t>(base_, kOffAbortKind), __ATOMIC_ACQUIRE);
        throw ShmError(kind == 1 ? 1 : 0, r,
                       std::string("shm: ") + what + " on rank " + std::to_string(rank_) +
                           ": group " + name_ + " was aborted" +
                           (r >= 0 ? (kind == 2   ? " by rank " + std::to_string(r)
                                      : kind == 3 ? " because rank " + std::to_string(r) +
                                                        " called a mismatched collective"
                                                  : " because rank " + std::to_string(r) +
                                                        (kind == 1 ? " timed out" : " died"))
                                   : std::string()) +
                           "; destroy the process group");
    }
}

// ***** collective fingerprints *****
// Each collective publishes (kind, dtype, reduce op, root, bytes) in the caller's control block
// before its first arrival, in slot coll_ % 2, and compares all ranks' slots right after its first
// wait. Two slots suffice: a peer can write slot coll_ % 2 again only in collective coll_ + 2,
// which it reaches only after this rank arrived in collective coll_ + 1, i.e. after the compare.
// The check therefore costs no extra synchronisation. The NumPy twin uses the same encoding.
enum Kind : int { kAllReduce = 1, kBroadcast, kAllGather, kReduceScatter, kAllToAll, kBarrier };
constexpr int kNone = 255;

static std::string describe(uint64_t a, uint64_t bytes) {
    static const char *kinds[] = {"?", "all_reduce", "broadcast", "all_gather", "reduce_scatter",
                                  "all_to_all", "barrier"};
    int kind = static_cast<int>(a & 0xff), dt = static_cast<int>((a >> 8) & 0xff),
        op = static_cast<int>((a >> 16) & 0xff);
    int64_t root = static_cast<int64_t>(a >> 32) - 1;
    std::string out = kind >= 1 && kind <= 6 ? kinds[kind] : "?";
    out += "(";
    if (dt != kNone) out += std::string(fp_dtype_name(dt)) + ", ";
    if (op != kNone) out += std::string(op_name(static_cast<Op>(op))) + ", ";
    if (root >= 0) out += "root " + std::to_string(root) + ", ";
    return out + std::to_string(bytes) + " bytes)";
}

void Group::begin(int kind, int dtype, int op, int root, uint64_t bytes) {
    ++coll_;
    uint64_t a = static_cast<uint64_t>(kind & 0xff) | static_cast<uint64_t>(dtype & 0xff) << 8 |
                 static_cast<uint64_t>(op & 0xff) << 16 |
                 static_cast<uint64_t>(static_cast<uint32_t>(root + 1)) << 32;
    std::size_t at_ = kCtlStride * (rank_ + 1) + kCtlFp + 16 * (coll_ & 1);
    __atomic_store_n(at<uint64_t>(base_, at_), a, __ATOMIC_RELAXED);
    __atomic_store_n(at<uint64_t>(base_, at_ + 8), bytes, __ATOMIC_RELAXED);
    fp_pending_ = true;  // published by the release store of arrive()
}

void Group::check_fingerprints() {
    fp_pending_ = false;
    const std::size_t slot = kCtlFp + 16 * (coll_ & 1);
    auto word = [&](int r, std::size_t off) {
        return __atomic_load_n(at<uint64_t>(base_, kCtlStride * (r + 1) + slot + off),
                               __ATOMIC_RELAXED);
    };
    uint64_t a = word(rank_, 0), b = word(rank_, 8);
    for (int k = 1; k < n_; ++k) {
        int p = (rank_ + k) % n_;
        uint64_t pa = word(p, 0), pb = word(p, 8);
        if (pa != a || pb != b)
            fail(3, p, "shm: mismatch between ranks in collective #" + std::to_string(coll_) +
                           " of group " + name_ + ": rank " + std::to_string(rank_) + " called " +
                           describe(a, b) + " but rank " + std::to_string(p) + " called " +
                           describe(pa, pb) + "; every rank must make the same calls in the "
                           "same order with the same sizes and dtypes");
    }
}

// ***** collectives *****
void Group::barrier() {
    check_usable("barrier");
    if (n_ > 1) begin(kBarrier, kNone, kNone, -1, 0);
    sync();
}

// out[0, count) *= scale (float32/64; scale 0 = nothing): the AVG step, with the kernel the
// Python path's scale_into uses, so the bits are those of a sum followed by one scale pass.
static void scale_slice(char *out, std::size_t count, DType d, double scale) {
    if (scale == 0.0 || count == 0) return;
    if (d != DType::F32 && d != DType::F64)
        throw std::invalid_argument("shm: all_reduce with a scale needs float32 or float64");
    tb::kernels::scale_into(out, count,
                            d == DType::F32 ? tb::kernels::DType::float32
                                            : tb::kernels::DType::float64,
                            scale);
}

void Group::all_reduce(const void *in_, void *out_, std::size_t count, DType d, Op op,
                       double scale) {
    check_usable("all_reduce");
    check_op(d, op);
    const char *in = static_cast<const char *>(in_);
    char *out = static_cast<char *>(out_);
    std::size_t bytes = count * dtype_size(d);
    if (scale != 0.0 && d != DType::F32 && d != DType::F64)
        throw std::invalid_argument("shm: all_reduce with a scale needs float32 or float64");
    if (n_ == 1) {
        if (out != in) std::memmove(out, in, bytes);
        scale_slice(out, count, d, scale);
        return;
    }
    begin(kAllReduce, static_cast<int>(d), static_cast<int>(op), -1, bytes);
    if (bytes <= flat_max_bytes) all_reduce_flat(in, out, count, d, op, scale);
    else all_reduce_rsag(in, out, count, d, op, scale);
}

// ***** resident arena (see shm.h) *****
// Counters only grow (a_base_ advances by the chunk count after every reduction, identically on
// every rank), so no reset is needed between reductions: chunk k of the reduction that starts at
// base is ticket base + k of the claim word, and is final on rank q once q's ready word passed
// base + k. Wrap-around is handled by comparing differences (reached()).
constexpr std::size_t kArenaClaim = 64, kArenaDone = 96, kArenaDoneWaiters = 100;
constexpr std::size_t kArenaBlock = 4096;  // elements reduced, scaled and copied out together
constexpr std::size_t kCtlReady = 64, kCtlReadyWaiters = 68, kCtlTarget = 72;

void Group::arena_target(bool region, std::size_t bytes) {
    if (region && bytes > buf_bytes_)
        throw std::invalid_argument("shm: the arena's output region holds " +
                                    std::to_string(buf_bytes_) + " bytes, not " +
                                    std::to_string(bytes));
    word(kCtlStride * (rank_ + 1) + kCtlTarget).store(region ? 1 : 0, std::memory_order_seq_cst);
}

// Where rank q's inputs are and its result goes: its region (the second buffer of its slot) or
// the slot. Read after q's ready word was seen past the chunk, so after q's arena_target of this
// reduction.
char *Group::arena_buf(int q) const {
    return word(kCtlStride * (q + 1) + kCtlTarget).load(std::memory_order_acquire) ? buf(q, 1)
                                                                                    : slot(q);
}

void Group::arena_publish(std::size_t elems, std::size_t count, std::size_t chunk) {
    uint32_t k = static_cast<uint32_t>(elems >= count ? (count + chunk - 1) / chunk : elems / chunk);
    if (k <= a_published_ || base_ == nullptr) return;
    a_published_ = k;
    const std::size_t c = kCtlStride * (rank_ + 1);
    word(c + kCtlReady).store(a_base_ + k, std::memory_order_seq_cst);
    if (word(c + kCtlReadyWaiters).load(std::memory_order_seq_cst) != 0)
        futex(&word(c + kCtlReady), FUTEX_WAKE, INT_MAX, nullptr);
}

// Copy arena elements [lo, hi) of src (a slot) to the parts of outs that cover them.
static void copy_out(const std::vector<Group::Out> &outs, const char *src, std::size_t lo,
                     std::size_t hi, std::size_t esz) {
    for (const auto &o : outs) {
        std::size_t a = lo > o.off ? lo : o.off, b = hi < o.off + o.len ? hi : o.off + o.len;
        if (a < b) std::memcpy(o.ptr + (a - o.off) * esz, src + a * esz, (b - a) * esz);
    }
}

uint32_t Group::arena_reduce(std::size_t count, DType d, double scale, std::size_t chunk,
                             const std::vector<Out> &outs) {
    check_usable("all_reduce");
    const std::size_t esz = dtype_size(d);
    if (count * esz > slot_bytes() || chunk == 0)
        throw std::invalid_argument("shm: the arena holds " + std::to_string(slot_bytes()) +
                                    " bytes per rank, not " + std::to_string(count * esz));
    const uint32_t base = a_base_;
    const uint32_t end = base + static_cast<uint32_t>((count + chunk - 1) / chunk);
    arena_publish(count, count, chunk);  // this rank's backward is over: all of it is final
    auto &claim = word(kArenaClaim);
    auto &done = word(kArenaDone);
    std::vector<char> mine(outs.empty() ? 0 : end - base, 0);  // chunks this rank reduced
    uint32_t reduced = 0;
    for (;;) {
        uint32_t c = claim.load(std::memory_order_acquire);
        bool got = false;
        while (!reached(c, end))
            if (claim.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) {
                got = true;
                break;
            }
        if (!got) break;
        const std::size_t off = static_cast<std::size_t>(c - base) * chunk;
        const std::size_t len = count - off < chunk ? count - off : chunk;
        for (int q = 0; q < n_; ++q) {
            if (q != rank_) {
                const std::size_t cq = kCtlStride * (q + 1);
                wait_on(word(cq + kCtlReady), word(cq + kCtlReadyWaiters), c + 1, q);
            }
            srcs_[q] = arena_buf(q) + off * esz;
        }
        // Sum, scale and copy to the peers block by block, each block while it is in L1 (not
        // three passes over the whole 128 KiB chunk, which leave it for L2 between passes).
        char *dst = arena_buf(rank_) + off * esz;
        for (std::size_t b = 0; b < len; b += kArenaBlock) {
            const std::size_t m = len - b < kArenaBlock ? len - b : kArenaBlock;
            for (int q = 0; q < n_; ++q) blk_[q] = static_cast<const char *>(srcs_[q]) + b * esz;
            reduce_ranks(d, Op::Sum, dst + b * esz, blk_.data(), n_, m);
            scale_slice(dst + b * esz, m, d, scale);
            for (int q = 0; q < n_; ++q)
                if (q != rank_) std::memcpy(arena_buf(q) + (off + b) * esz, dst + b * esz, m * esz);
        }
        if (!mine.empty()) {
            copy_out(outs, arena_buf(rank_), off, off + len, esz);
            mine[c - base] = 1;
        }
        ++reduced;
        done.fetch_add(1, std::memory_order_seq_cst);
        if (word(kArenaDoneWaiters).load(std::memory_order_seq_cst) != 0)
            futex(&done, FUTEX_WAKE, INT_MAX, nullptr);
    }
    wait_on(done, word(kArenaDoneWaiters), end, -1);
    a_base_ = end;
    a_published_ = 0;
    for (std::size_t k = 0; k < mine.size(); ++k)
        if (!mine[k])
            copy_out(outs, arena_buf(rank_), k * chunk, std::min(count, (k + 1) * chunk), esz);
    return reduced;
}

// Small tensors: every rank copies its tensor into its buffer once, one barrier, then every rank
// reduces all n buffers into its output (n*S reads, no second barrier).
void Group::all_reduce_flat(const char *in, char *out, std::size_t count, DType d, Op op,
                            double scale) {
    const std::size_t esz = dtype_size(d), chunk = buf_bytes_ / esz;
    for (std::size_t off = 0; off < count; off += chunk) {
        std::size_t len = count - off < chunk ? count - off : chunk;
        uint32_t g = gen_++;
        std::memcpy(buf(rank_, g), in + off * esz, len * esz);
        sync();
        for (int p = 0; p < n_; ++p) srcs_[p] = buf(p, g);
        reduce_ranks(d, op, out + off * esz, srcs_.data(), n_, len);
        scale_slice(out + off * esz, len, d, scale);
    }
}

// Large tensors: chunks of buf_bytes; each chunk is cut into n slices (64-byte aligned). Phase A:
// rank r copies the slices that OTHER ranks reduce into its buffer. Barrier. Phase B: rank r
// reduces slice r reading its own input and the peers' buffers directly, writes the result to
// its output and to its buffer. Barrier. Phase C: rank r copies the peers' reduced slices out.
// DRAM traffic per rank is one read of the input and one write of the output; all the rest stays
// in cache because a chunk (256 KiB per buffer, x2 buffers x n ranks) fits the 32 MiB L3.
void Group::all_reduce_rsag(const char *in, char *out, std::size_t count, DType d, Op op,
                            double scale) {
    const std::size_t esz = dtype_size(d);
    const std::size_t chunk = buf_bytes_ / esz;
    const std::size_t align = esz >= 64 ? 1 : 64 / esz;
    std::vector<std::size_t> lo(n_ + 1);
    std::vector<const void *> &s = srcs_;
    for (std::size_t off = 0; off < count; off += chunk) {
        std::size_t len = count - off < chunk ? count - off : chunk;
        std::size_t base = len / n_ / align * align;
        for (int p = 0; p < n_; ++p) lo[p] = base * p;
        lo[n_] = len;
        uint32_t g = gen_++;
        char *mine = buf(rank_, g);
        for (int p = 0; p < n_; ++p)
            if (p != rank_)
                std::memcpy(mine + lo[p] * esz, in + (off + lo[p]) * esz, (lo[p + 1] - lo[p]) * esz);
        sync();
        std::size_t a = lo[rank_], m = lo[rank_ + 1] - a;
        for (int q = 0; q < n_; ++q)
            s[q] = q == rank_ ? static_cast<const void *>(in + (off + a) * esz)
                              : static_cast<const void *>(buf(q, g) + a * esz);
        reduce_ranks(d, op, out + (off + a) * esz, s.data(), n_, m);
        scale_slice(out + (off + a) * esz, m, d, scale);  // before the peers copy it
        std::memcpy(mine + a * esz, out + (off + a) * esz, m * esz);
        sync();
        for (int p = 0; p < n_; ++p)
            if (p != rank_)
                std::memcpy(out + (off + lo[p]) * esz, buf(p, g) + lo[p] * esz,
                            (lo[p + 1] - lo[p]) * esz);
    }
}

void Group::broadcast(void *data_, std::size_t bytes, int root, int fp_dtype) {
    check_usable("broadcast");
    if (root < 0 || root >= n_)
        throw std::invalid_argument("shm: broadcast root " + std::to_string(root) +
                                    " is out of range for " + std::to_string(n_) + " ranks");
    char *data = static_cast<char *>(data_);
    if (n_ == 1) return;
    begin(kBroadcast, fp_dtype, kNone, root, bytes);
    for (std::size_t off = 0; off < bytes || (bytes == 0 && off == 0); off += buf_bytes_) {
        std::size_t len = bytes - off < buf_bytes_ ? bytes - off : buf_bytes_;
        uint32_t g = gen_++;
        if (rank_ == root) std::memcpy(buf(root, g), data + off, len);
        sync();
        if (rank_ != root) std::memcpy(data + off, buf(root, g), len);
        if (bytes == 0) break;
    }
}

void Group::all_gather(const void *in_, void *out_, std::size_t S, int fp_dtype) {
    check_usable("all_gather");
    const char *in = static_cast<const char *>(in_);
    char *out = static_cast<char *>(out_);
    if (n_ > 1) begin(kAllGather, fp_dtype, kNone, -1, S);
    for (std::size_t off = 0; off < S || (S == 0 && off == 0); off += buf_bytes_) {
        std::size_t len = S - off < buf_bytes_ ? S - off : buf_bytes_;
        uint32_t g = gen_++;
        std::memcpy(buf(rank_, g), in + off, len);
        sync();
        for (int p = 0; p < n_; ++p)
            std::memmove(out + p * S + off, p == rank_ ? in + off : buf(p, g), len);
        if (S == 0) break;
    }
}

void Group::reduce_scatter(const void *in_, void *out_, std::size_t c, DType d, Op op) {
    check_usable("reduce_scatter");
    check_op(d, op);
    const char *in = static_cast<const char *>(in_);
    char *out = static_cast<char *>(out_);
    const std::size_t esz = dtype_size(d);
    const std::size_t cc = buf_bytes_ / esz / n_;  // elements per destination per chunk
    if (n_ > 1) begin(kReduceScatter, static_cast<int>(d), static_cast<int>(op), -1, c * esz);
    std::vector<const void *> &s = srcs_;
    for (std::size_t off = 0; off < c || (c == 0 && off == 0); off += cc) {
        std::size_t len = c - off < cc ? c - off : cc;
        uint32_t g = gen_++;
        char *mine = buf(rank_, g);
        for (int p = 0; p < n_; ++p)
            if (p != rank_) std::memcpy(mine + p * cc * esz, in + (p * c + off) * esz, len * esz);
        sync();
        for (int q = 0; q < n_; ++q)
            s[q] = q == rank_ ? static_cast<const void *>(in + (rank_ * c + off) * esz)
                              : static_cast<const void *>(buf(q, g) + rank_ * cc * esz);
        reduce_ranks(d, op, out + off * esz, s.data(), n_, len);
        if (c == 0) break;
    }
}

void Group::all_to_all(const void *in_, void *out_, std::size_t S, int fp_dtype) {
    check_usable("all_to_all");
    const char *in = static_cast<const char *>(in_);
    char *out = static_cast<char *>(out_);
    const std::size_t cs = buf_bytes_ / n_;
    if (n_ > 1) begin(kAllToAll, fp_dtype, kNone, -1, S);
    for (std::size_t off = 0; off < S || (S == 0 && off == 0); off += cs) {
        std::size_t len = S - off < cs ? S - off : cs;
        uint32_t g = gen_++;
        char *mine = buf(rank_, g);
        for (int p = 0; p < n_; ++p)
            if (p != rank_) std::memcpy(mine + p * cs, in + p * S + off, len);
        sync();
        std::memmove(out + rank_ * S + off, in + rank_ * S + off, len);
        for (int p = 0; p < n_; ++p)
            if (p != rank_) std::memcpy(out + p * S + off, buf(p, g) + rank_ * cs, len);
        if (S == 0) break;
    }
}

}  // namespace tb_shm
