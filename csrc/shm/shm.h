// Shared-memory transport for the ranks of one group on one host (issue 7).
//
// One POSIX shared-memory segment per group. Layout (the NumPy twin,
// tensorbrain/distributed/_shm/_layout.py, uses the same offsets so a native rank and a twin rank
// can share one segment):
//
//   [0, header_bytes)  header: magic u64 @0, version u32 @8, nranks u32 @12, buf_bytes u64 @16,
//                      attached u32 @24, abort u32 @28, abort_rank i32 @32, abort_kind u32 @36;
//                      then one 128-byte control block per rank at 128*(r+1):
//                      seq u32 @+0 (the futex word), waiters u32 @+4, pid i32 @+8,
//                      two collective fingerprints of 16 bytes at @+16 and @+32 (see begin()).
//                      128 bytes apart so two ranks' counters never share a cache line (nor the
//                      adjacent-line prefetch pair).
//   then per rank r, two buffers of buf_bytes each: data_off + (2*r + b) * buf_bytes.
//
// Synchronisation: a barrier is "store my seq = s (release), then wait until every peer's seq
// has reached s (acquire)". Waiting spins briefly (the peer is usually microseconds away), then
// sleeps in futex(FUTEX_WAIT) on the peer's seq word in slices, checking between slices that the
// peer's pid is alive, that no rank aborted the group and that the timeout has not passed.
// A rank only calls FUTEX_WAKE when the word's waiter count says someone sleeps.
//
// Buffers alternate (generation % 2): data written for generation g is read by peers before they
// arrive at any barrier of generation g+1, and a rank writes the same buffer again only in
// generation g+2, after passing a barrier of g+1; so one barrier per exchange suffices.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "shm_reduce.h"

namespace tb_shm {

constexpr uint64_t kMagic = 0x31304d5342544254ULL;  // "TBTBSM01" little-endian
constexpr uint32_t kVersion = 2;  // 2: collective fingerprints in the control blocks
constexpr std::size_t kCtlStride = 128;

// A failure the Python side maps to tensorbrain.distributed.errors: kind 0 = DistBackendError
// (peer died / group aborted), 1 = DistTimeoutError, 3 = DistBackendError (ranks called
// mismatched collectives: different op, dtype, reduce op, root or size).
struct ShmError : std::runtime_error {
    int kind;
    int rank;  // the peer concerned, -1 if none
    ShmError(int kind_, int rank_, const std::string &msg)
        : std::runtime_error(msg), kind(kind_), rank(rank_) {}
};

std::size_t header_bytes(int nranks);
std::size_t segment_bytes(int nranks, std::size_t buf_bytes);

class Group {
  public:
    // create=true: make the segment (O_EXCL) and initialise the header; create=false: attach to
    // an initialised segment. Then every rank calls wait_attached(), which returns once all ranks
    // are attached; the creator then unlinks the name, so nothing stays in /dev/shm even if a
    // rank crashes later.
    Group(const std::string &name, int rank, int nranks, bool create, std::size_t buf_bytes,
          double timeout_s);
    ~Group();
    Group(const Group &) = delete;
    Group &operator=(const Group &) = delete;

    void wait_attached();
    // Mark the group aborted and wake every waiter (they raise); safe from another thread while
    // a collective runs, unlike close(). abort_kind 2 = aborted by this rank.
    void abort();
    void close();   // munmap; idempotent
    void unlink();  // shm_unlink if not yet done (creator); idempotent

    // All sizes in bytes / elements of the CALLER's buffers; see shm.cpp for each algorithm.
    // fp_dtype: the buffer's dtype for the fingerprint only (fp_dtype_code in shm_reduce.h; the
    // byte movers copy bytes, but float32 on one rank against int32 on another is a mismatch).
    void barrier();
    // scale != 0 (float32/64 only): multiply the result by scale inside the reduce step, on the
    // slice this rank just reduced (still in cache), instead of a second pass over the output:
    // AVG without the extra read and write of the whole tensor. Same bits as sum-then-scale.
    void all_reduce(const void *in, void *out, std::size_t count, DType d, Op op,
                    double scale = 0.0);
    void broadcast(void *buf, std::size_t bytes, int root, int fp_dtype = kFpNoDtype);
    void all_gather(const void *in, void *out, std::size_t bytes_per_rank,
                    int fp_dtype = kFpNoDtype);
    void reduce_scatter(const void *in, void *out, std::size_t count_per_rank, DType d, Op op);
    void all_to_all(const void *in, void *out, std::size_t bytes_per_rank,
                    int fp_dtype = kFpNoDtype);

    // The resident arena (issue 31; shm.cpp, "resident arena"): a segment made for one DDP
    // gradient arena. Rank r's slot is its two buffers back to back (slot_bytes()), mapped into
    // NumPy as the arena itself, so the gradients are written there by backward's hooks. Each
    // rank publishes how much of its slot is final (arena_publish, from the hooks); at the end
    // of backward every rank claims chunks from a shared counter, reduces each claimed chunk
    // from every slot in rank order (the bits of all_reduce's sum, then the scale) and writes
    // the result into every slot; it returns once every chunk is done. A rank that finishes
    // backward first reduces what the others have published while they are still computing.
    // A chunk is reduced in place: each rank's inputs are read from, and its result written
    // into, its slot, or, for a rank that asked for it before its first publish
    // (arena_target), its region: the second of its two buffers, when the segment was made
    // with buffers as large as the arena. DDP lends the region to .grad, so torch's default
    // needs no copy out; while .grad still holds last step's average there, that rank uses
    // its slot and copies out.
    // Header words of an arena segment: claim u32 @64, done u32 @96, done waiters u32 @100;
    // control block: ready u32 @+64 (chunks published), ready waiters u32 @+68, target u32 @+72
    // (1: the region).
    char *slot(int r) const { return buf(r, 0); }
    std::size_t slot_bytes() const { return 2 * buf_bytes_; }
    void arena_publish(std::size_t elems, std::size_t count, std::size_t chunk);
    void arena_target(bool region, std::size_t bytes);
    char *arena_buf(int q) const;
    // outs: where this rank wants the result besides its slot (DDP's private .grad arrays):
    // [off, off + len) of the arena goes to ptr. A chunk this rank reduced is copied there at
    // once, still in cache; the others after the last chunk is done.
    struct Out {
        std::size_t off, len;
        char *ptr;
    };
    // Returns how many chunks this rank reduced.
    uint32_t arena_reduce(std::size_t count, DType d, double scale, std::size_t chunk,
                          const std::vector<Out> &outs = {});

    int rank() const { return rank_; }
    int size() const { return n_; }
    std::size_t buf_bytes() const { return buf_bytes_; }
    const std::string &name() const { return name_; }
    bool closed() const { return base_ == nullptr; }

    // Ctrl-C for callers that do not register each call with the SIGINT watcher (the
    // process-group layer's fast path, tensorbrain/distributed/_fastpath.py): they mark the
    // collective busy (an atomic store), and the watcher aborts the group only while one is.
    std::atomic<int> busy{0};
    bool abort_if_busy() {
        if (busy.load(std::memory_order_seq_cst) == 0) return false;
        abort();
        return true;
    }

    // Tuning knobs (tests and benchmarks); see the crossover comments in shm.cpp.
    std::size_t flat_max_bytes = 0;  // all_reduce: flat exchange at or below this size
    double timeout_s;
    double yield_us = 0;  // phase 2 of a wait (see shm.cpp)
    int spin() const { return spin_iters_; }
    void set_spin(int s) { spin_iters_ = s; }

  private:
    std::atomic<uint32_t> &seq(int r) const;
    std::atomic<uint32_t> &waiters(int r) const;
    int32_t pid(int r) const;
    char *buf(int r, uint32_t gen) const;
    void arrive();
    void wait_peers();
    void wait_word(int peer, uint32_t target);
    // wait until w reaches target; nw counts the sleepers; peer: whose liveness to check (-1:
    // every peer)
    void wait_on(std::atomic<uint32_t> &w, std::atomic<uint32_t> &nw, uint32_t target, int peer);
    std::atomic<uint32_t> &word(std::size_t off) const;
    void check_alive(int peer);
    [[noreturn]] void fail(int kind, int peer, const std::string &msg);
    void check_usable(const char *what);
    // The first sync of every collective also compares the fingerprints the ranks published in
    // begin(): a mismatch raises on every rank instead of silently mixing unrelated buffers.
    void sync() {
        arrive();
        wait_peers();
        if (fp_pending_) check_fingerprints();
    }
    void begin(int kind, int dtype, int op, int root, uint64_t bytes);
    void check_fingerprints();

    void all_reduce_flat(const char *in, char *out, std::size_t count, DType d, Op op,
                         double scale);
    void all_reduce_rsag(const char *in, char *out, std::size_t count, DType d, Op op,
                         double scale);

    std::string name_;
    int rank_, n_;
    bool creator_, unlinked_ = false;
    std::size_t buf_bytes_, map_bytes_ = 0, data_off_ = 0;
    char *base_ = nullptr;
    uint32_t step_ = 0;  // barrier sequence, identical on all ranks
    uint32_t gen_ = 0;   // buffer generation, identical on all ranks
    int spin_iters_;  // phase 1 of a wait: PAUSE iterations
    bool broken_ = false;
    uint32_t coll_ = 0;        // collectives begun, identical on all ranks
    bool fp_pending_ = false;  // begin() published a fingerprint the next sync must check
    std::vector<const void *> srcs_;  // reduction sources, reused by every call
    std::vector<const void *> blk_;   // the same, advanced to one block (arena_reduce)
    uint32_t a_base_ = 0;       // resident arena: chunks of the finished reductions (all ranks)
    uint32_t a_published_ = 0;  // chunks of this reduction this rank has published
};

}  // namespace tb_shm
