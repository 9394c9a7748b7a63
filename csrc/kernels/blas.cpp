// Matrix products on a CBLAS GEMM loaded at run time (Intel MKL's libmkl_rt from the `mkl` wheel):
// tensorbrain._C._gemm_load / gemm. tensorbrain/_gemm.py finds the library, decides when to use it
// and keeps NumPy's matmul as the twin (tests/test_gemm.py holds the two together).
//
// Why: on the Intel Xeon this project is measured on, MKL ran the GPT's and the conv net's
// products in 0.84x of OpenBLAS's time, as fast as torch's mm (benchmarks/gemm.py,
// docs/training.md), and torch's linear layers run on it. Nothing links MKL at build time (dlopen), so the module builds and runs without it.
//
// Threads: MKL is put on its sequential layer, and a product is split by rows or columns of C
// across the native pool (parallel.h), so products and our kernels share one set of threads
// instead of MKL's OpenMP team fighting the pool for the cores. Each part is its own GEMM over its
// block of C, summing along all of K (no partial sums to add: no reduction across threads).
//
// beta = 1 adds the product to what C holds: tensorbrain/_gemm.py writes a linear layer's bias
// into C first, as torch's addmm does, which saves a pass over the output.
#include <dlfcn.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "kernels/act.h"
#include "kernels/parallel.h"

namespace py = pybind11;

namespace {

enum { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };
using Sgemm = void (*)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                       int);
using Dgemm = void (*)(int, int, int, int, int, int, double, const double *, int, const double *, int, double,
                       double *, int);

// cblas_?gemm_batch_strided (MKL 2020+): the same product for `batch` matrices at fixed strides
using SgemmStrided = void (*)(int, int, int, int, int, int, float, const float *, int, long long, const float *, int,
                              long long, float, float *, int, long long, int);
using DgemmStrided = void (*)(int, int, int, int, int, int, double, const double *, int, long long, const double *,
                              int, long long, double, double *, int, long long, int);

Sgemm g_sgemm = nullptr;
Dgemm g_dgemm = nullptr;
SgemmStrided g_sgemm_strided = nullptr;
DgemmStrided g_dgemm_strided = nullptr;
std::string g_loaded;

// ***** NumPy's OpenBLAS, one product per pool thread (gemm_batched without MKL) *****
// NumPy's batched matmul hands OpenBLAS one item at a time, and an item as small as a conv
// net's first layer per image ((32, 27) @ (27, 1024)) took as long on two threads as on one.
// Here the items are split across the pool instead, each a one-thread OpenBLAS GEMM: OpenBLAS is
// put on one thread while a batch runs (its thread count is global; the first batch in saves it,
// the last out restores it), so no item's GEMM asks the pool for threads the batch already holds.
// Only the ILP64 symbols NumPy's scipy-openblas64 exports (the `64_` suffix says the integer
// width); any other build keeps NumPy's matmul.
using Sgemm64 = void (*)(int, int, int, std::int64_t, std::int64_t, std::int64_t, float, const float *, std::int64_t,
                         const float *, std::int64_t, float, float *, std::int64_t);
using Dgemm64 = void (*)(int, int, int, std::int64_t, std::int64_t, std::int64_t, double, const double *,
                         std::int64_t, const double *, std::int64_t, double, double *, std::int64_t);
struct OpenBlasItems {
    Sgemm64 s = nullptr;
    Dgemm64 d = nullptr;
    void (*set_threads)(int) = nullptr;
    int (*get_threads)() = nullptr;
    std::mutex m;
    int holders = 0, saved = 1;                // under m
    std::atomic<std::uint64_t> batches{0};     // batches run this way (tests)
} g_ob;

// OpenBLAS on one thread for as long as one of these lives (see above).
struct OneBlasThread {
    OneBlasThread() {
        std::lock_guard<std::mutex> lk(g_ob.m);
        if (g_ob.holders++ == 0) {
            g_ob.saved = g_ob.get_threads();
            g_ob.set_threads(1);
        }
    }
    ~OneBlasThread() {
        std::lock_guard<std::mutex> lk(g_ob.m);
        if (--g_ob.holders == 0) g_ob.set_threads(g_ob.saved);
    }
};

// Finds NumPy's already loaded OpenBLAS at `path` (RTLD_NOLOAD: no second copy). False, and
// nothing kept, when it is not loaded or lacks the ILP64 symbols.
bool openblas_load(const std::string &path) {
    if (g_ob.s != nullptr) return true;
    void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) return false;
    for (const char *prefix : {"scipy_", ""}) {
        const std::string p(prefix);
        auto s = reinterpret_cast<Sgemm64>(dlsym(lib, (p + "cblas_sgemm64_").c_str()));
        auto d = reinterpret_cast<Dgemm64>(dlsym(lib, (p + "cblas_dgemm64_").c_str()));
        auto set = reinterpret_cast<void (*)(int)>(dlsym(lib, (p + "openblas_set_num_threads64_").c_str()));
        auto get = reinterpret_cast<int (*)()>(dlsym(lib, (p + "openblas_get_num_threads64_").c_str()));
        if (s && d && set && get) {
            g_ob.d = d;
            g_ob.set_threads = set;
            g_ob.get_threads = get;
            g_ob.s = s;
            return true;   // the handle stays open: NumPy keeps the library loaded anyway
        }
    }
    dlclose(lib);
    return false;
}

// Opens the library once; later calls with another path are refused (a process has one GEMM).
std::string load(const std::string &path) {
    if (!g_loaded.empty()) {
        if (path != g_loaded)
            throw std::runtime_error("_gemm_load: " + g_loaded + " is already loaded; cannot switch to " + path);
        return g_loaded;
    }
    void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) throw std::runtime_error(std::string("_gemm_load: dlopen failed: ") + dlerror());
    // MKL: run on the calling thread only (1 = MKL_THREADING_SEQUENTIAL), before any other call
    if (auto set_layer = reinterpret_cast<int (*)(int)>(dlsym(lib, "MKL_Set_Threading_Layer"))) set_layer(1);
    auto s = reinterpret_cast<Sgemm>(dlsym(lib, "cblas_sgemm"));
    auto d = reinterpret_cast<Dgemm>(dlsym(lib, "cblas_dgemm"));
    if (s == nullptr || d == nullptr) {
        dlclose(lib);
        throw std::runtime_error("_gemm_load: " + path + " has no cblas_sgemm/cblas_dgemm");
    }
    g_sgemm = s;
    g_dgemm = d;
    g_sgemm_strided = reinterpret_cast<SgemmStrided>(dlsym(lib, "cblas_sgemm_batch_strided"));
    g_dgemm_strided = reinterpret_cast<DgemmStrided>(dlsym(lib, "cblas_dgemm_batch_strided"));
    g_loaded = path;
    return g_loaded;
}

// An operand's CBLAS layout: rows x cols stored row by row (NoTrans, ld = the row stride) or
// column by column (Trans: a transposed C-contiguous array). False when neither (a broadcast,
// a negative or non-unit inner stride): the caller falls back to NumPy.
bool layout(const py::array &a, int *trans, int *ld) {
    const auto item = a.itemsize();
    const auto r = a.shape(0), c = a.shape(1), s0 = a.strides(0), s1 = a.strides(1);
    if ((s1 == item || c == 1) && s0 % item == 0 && s0 / item >= std::max<py::ssize_t>(c, 1)) {
        *trans = kNoTrans;
        *ld = static_cast<int>(s0 / item);
        return true;
    }
    if ((s0 == item || r == 1) && s1 % item == 0 && s1 / item >= std::max<py::ssize_t>(r, 1)) {
        *trans = kTrans;
        *ld = static_cast<int>(s1 / item);
        return true;
    }
    return false;
}

// "<fn>: shapes (..) @ (..) -> (..) do not match", for a call whose operands disagree.
py::value_error shapes_error(const char *fn, const py::array &a, const py::array &b, const py::array &out) {
    return py::value_error(std::string(fn) + ": shapes " + py::str(a.attr("shape")).cast<std::string>() + " @ " +
                           py::str(b.attr("shape")).cast<std::string>() + " -> " +
                           py::str(out.attr("shape")).cast<std::string>() + " do not match");
}

// One float32/float64 dtype for all three and a C-contiguous, writable out: what both calls need.
bool same_float(const py::array &a, const py::array &b, const py::array &out) {
    const auto dt = a.dtype();
    return dt.is(b.dtype()) && dt.is(out.dtype()) && dt.kind() == 'f' && (a.itemsize() == 4 || a.itemsize() == 8) &&
           (out.flags() & py::array::c_style) && out.writeable();
}

// out (M, N) = a (M, K) @ b (K, N) + beta * out, or with bias (N values) a @ b + bias (each part
// writes the bias into its rows, then accumulates its GEMM into them while they are in cache).
// True when it ran; false when the loaded library cannot take these arrays (no library, another
// dtype, an operand layout CBLAS cannot express): the caller then uses NumPy.
bool gemm(const py::array &a, const py::array &b, py::array out, double beta, const std::optional<py::array> &bias) {
    if (g_sgemm == nullptr || a.ndim() != 2 || b.ndim() != 2 || out.ndim() != 2) return false;
    const auto M = a.shape(0), K = a.shape(1), N = b.shape(1);
    if (b.shape(0) != K || out.shape(0) != M || out.shape(1) != N) throw shapes_error("gemm", a, b, out);
    if (beta != 0.0 && beta != 1.0) throw py::value_error("gemm: beta must be 0 or 1");
    if (!same_float(a, b, out)) return false;
    if (bias.has_value() && (!bias->dtype().is(a.dtype()) || bias->ndim() != 1 || bias->shape(0) != N ||
                             !(bias->flags() & py::array::c_style)))
        return false;
    constexpr py::ssize_t kMaxInt = INT32_MAX;
    if (M > kMaxInt || N > kMaxInt || K > kMaxInt || out.strides(0) / out.itemsize() > kMaxInt) return false;
    int ta, tb, lda, ldb;
    if (!layout(a, &ta, &lda) || !layout(b, &tb, &ldb)) return false;
    if (M == 0 || N == 0) return true;
    const bool f32 = a.itemsize() == 4;
    const char *pa = static_cast<const char *>(a.data());
    const char *pb = static_cast<const char *>(b.data());
    char *pc = static_cast<char *>(out.mutable_data());
    const int ldc = static_cast<int>(std::max<py::ssize_t>(N, 1)), k = static_cast<int>(K);
    const auto item = static_cast<std::size_t>(a.itemsize());
    const char *pbias = bias.has_value() ? static_cast<const char *>(bias->data()) : nullptr;
    if (pbias != nullptr) beta = 1.0;
    py::gil_scoped_release nogil;
    // Split the longer side of C: rows (each part reads all of b) when M >= N, else columns
    // (each reads all of a), so the operand read twice is the smaller one: a conv's weight
    // gradient (64, 8192) @ (8192, 288) split by rows read its 9 MB b twice and gained 10% on two
    // threads. A part is at least ~4 MFLOP, so it outweighs handing it to a worker. One part a
    // thread, since each part packs the operand it shares again: over benchmarks/gemm.py's products
    // at two threads torch's time was 0.95-0.96 of ours with two parts a thread, 0.95-1.03 with one.
    const bool by_rows = M >= N;
    const std::size_t len = static_cast<std::size_t>(by_rows ? M : N);
    const std::size_t flops_per = 2 * static_cast<std::size_t>(by_rows ? N : M) * static_cast<std::size_t>(std::max<py::ssize_t>(K, 1));
    const std::size_t grain = std::max<std::size_t>(16, (std::size_t{1} << 22) / std::max<std::size_t>(flops_per, 1));
    tb::kernels::parallel_for(len, grain, 16, [&](std::size_t i0, std::size_t i1) {
        const char *ap = pa, *bp = pb;
        char *cp = pc;
        int m = static_cast<int>(M), n = static_cast<int>(N);
        if (by_rows) {   // row r of op(a): a + r * lda (NoTrans) or a + r (Trans: a column of the stored array)
            ap += (ta == kNoTrans ? i0 * static_cast<std::size_t>(lda) : i0) * item;
            cp += i0 * static_cast<std::size_t>(ldc) * item;
            m = static_cast<int>(i1 - i0);
        } else {         // column j of op(b): b + j (NoTrans) or b + j * ldb (Trans)
            bp += (tb == kNoTrans ? i0 : i0 * static_cast<std::size_t>(ldb)) * item;
            cp += i0 * item;
            n = static_cast<int>(i1 - i0);
        }
        if (pbias != nullptr)
            for (int r = 0; r < m; ++r)
                std::memcpy(cp + static_cast<std::size_t>(r) * ldc * item, pbias + (by_rows ? 0 : i0 * item),
                            static_cast<std::size_t>(n) * item);
        if (f32)
            g_sgemm(kRowMajor, ta, tb, m, n, k, 1.0f, reinterpret_cast<const float *>(ap), lda,
                    reinterpret_cast<const float *>(bp), ldb, static_cast<float>(beta), reinterpret_cast<float *>(cp), ldc);
        else
            g_dgemm(kRowMajor, ta, tb, m, n, k, 1.0, reinterpret_cast<const double *>(ap), lda,
                    reinterpret_cast<const double *>(bp), ldb, beta, reinterpret_cast<double *>(cp), ldc);
    }, 1);
    return true;
}

// out (B, M, N) = a (B, M, K) @ b (B, K, N), each stack's matrices at one stride, the batch split
// across the native pool: on MKL one batch-strided call per part; without it, on more than one
// thread, one-thread OpenBLAS GEMMs (OpenBlasItems above). False as gemm's.
bool gemm_batched(const py::array &a, const py::array &b, py::array out) {
    const bool mkl = g_sgemm_strided != nullptr && g_dgemm_strided != nullptr;
    // OpenBLAS: only with at least an item per thread (fewer items run faster each on
    // OpenBLAS's own threads, through NumPy's matmul)
    if (!(mkl || (g_ob.s != nullptr && tb::kernels::kernel_threads() > 1 && a.ndim() == 3 &&
                  a.shape(0) >= tb::kernels::kernel_threads())) ||
        a.ndim() != 3 || b.ndim() != 3 || out.ndim() != 3)
        return false;
    const auto B = a.shape(0), M = a.shape(1), K = a.shape(2), N = b.shape(2);
    if (b.shape(0) != B || b.shape(1) != K || out.shape(0) != B || out.shape(1) != M || out.shape(2) != N)
        throw shapes_error("gemm_batched", a, b, out);
    if (!same_float(a, b, out)) return false;
    if (B == 0 || M == 0 || N == 0) return true;
    const auto item = a.itemsize();
    if (a.strides(0) % item || b.strides(0) % item || a.strides(0) < 0 || b.strides(0) < 0) return false;
    constexpr py::ssize_t kMaxInt = INT32_MAX;
    if (M > kMaxInt || N > kMaxInt || K > kMaxInt || B > kMaxInt) return false;
    // the layout of one matrix: a 2-D view of item 0
    int ta, tb, lda, ldb;
    const py::array a0 = a.attr("__getitem__")(0).cast<py::array>(), b0 = b.attr("__getitem__")(0).cast<py::array>();
    if (!layout(a0, &ta, &lda) || !layout(b0, &tb, &ldb)) return false;
    const long long sa = a.strides(0) / item, sb = b.strides(0) / item, sc = M * N;
    const bool f32 = item == 4;
    const char *pa = static_cast<const char *>(a.data()), *pb = static_cast<const char *>(b.data());
    char *pc = static_cast<char *>(out.mutable_data());
    const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K), ldc = n;
    py::gil_scoped_release nogil;
    const std::size_t flops = 2 * static_cast<std::size_t>(M) * N * std::max<py::ssize_t>(K, 1);
    const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 22) / std::max<std::size_t>(flops, 1));
    if (!mkl) {
        const OneBlasThread one;
        g_ob.batches.fetch_add(1);
        const std::size_t u = static_cast<std::size_t>(item);
        tb::kernels::parallel_for(static_cast<std::size_t>(B), grain, 1, [&](std::size_t i0, std::size_t i1) {
            for (std::size_t i = i0; i < i1; ++i) {
                const char *ai = pa + i * static_cast<std::size_t>(sa) * u, *bi = pb + i * static_cast<std::size_t>(sb) * u;
                char *ci = pc + i * static_cast<std::size_t>(sc) * u;
                if (f32)
                    g_ob.s(kRowMajor, ta, tb, m, n, k, 1.0f, reinterpret_cast<const float *>(ai), lda,
                           reinterpret_cast<const float *>(bi), ldb, 0.0f, reinterpret_cast<float *>(ci), ldc);
                else
                    g_ob.d(kRowMajor, ta, tb, m, n, k, 1.0, reinterpret_cast<const double *>(ai), lda,
                           reinterpret_cast<const double *>(bi), ldb, 0.0, reinterpret_cast<double *>(ci), ldc);
            }
        });
        return true;
    }
    tb::kernels::parallel_for(static_cast<std::size_t>(B), grain, 1, [&](std::size_t i0, std::size_t i1) {
        const auto cnt = static_cast<int>(i1 - i0);
        const std::size_t u = static_cast<std::size_t>(item);
        const char *ai = pa + i0 * static_cast<std::size_t>(sa) * u, *bi = pb + i0 * static_cast<std::size_t>(sb) * u;
        char *ci = pc + i0 * static_cast<std::size_t>(sc) * u;
        if (f32)
            g_sgemm_strided(kRowMajor, ta, tb, m, n, k, 1.0f, reinterpret_cast<const float *>(ai), lda, sa,
                            reinterpret_cast<const float *>(bi), ldb, sb, 0.0f, reinterpret_cast<float *>(ci), ldc, sc, cnt);
        else
            g_dgemm_strided(kRowMajor, ta, tb, m, n, k, 1.0, reinterpret_cast<const double *>(ai), lda, sa,
                            reinterpret_cast<const double *>(bi), ldb, sb, 0.0, reinterpret_cast<double *>(ci), ldc, sc, cnt);
    });
    return true;
}

// ***** attention: each (batch, head) matrix's products and softmax on one thread *****
// One operand of the attention: a 4-D array (B, H, rows, cols) whose (rows, cols) matrices sit
// at element strides sb (batch) and sh (head), each in one CBLAS layout.
// (Out4 below: the same for an output, written row by row.)
template <class T>
struct Strided4 {
    T *p = nullptr;
    long long sb = 0, sh = 0;
    int trans = kNoTrans, ld = 0;
    T *at(std::size_t b, std::size_t h) const { return p + b * sb + h * sh; }
    int flipped() const { return trans == kNoTrans ? kTrans : kNoTrans; }
};
using Mat4 = Strided4<const float>;

bool mat4(const py::array &a, Mat4 *m) {
    if (a.ndim() != 4 || !a.dtype().is(py::dtype::of<float>()) || a.shape(0) == 0 || a.shape(1) == 0) return false;
    const auto item = a.itemsize();
    for (int d = 0; d < 2; ++d)
        if (a.strides(d) < 0 || a.strides(d) % item) return false;
    if (!layout(a.attr("__getitem__")(py::make_tuple(0, 0)).cast<py::array>(), &m->trans, &m->ld)) return false;
    m->p = static_cast<const float *>(a.data());
    m->sb = a.strides(0) / item;
    m->sh = a.strides(1) / item;
    return true;
}

// The shape check of an attention output (B, H, rows, cols): a clear error when it is wrong.
void check4(const py::array &a, py::ssize_t b, py::ssize_t h, py::ssize_t r, py::ssize_t c, const char *fn,
            const char *name) {
    if (a.ndim() != 4 || a.shape(0) != b || a.shape(1) != h || a.shape(2) != r || a.shape(3) != c)
        throw py::value_error(std::string(fn) + ": " + name + " has shape " + py::str(a.attr("shape")).cast<std::string>() +
                              ", expected (" + std::to_string(b) + ", " + std::to_string(h) + ", " + std::to_string(r) +
                              ", " + std::to_string(c) + ")");
}

// A C-contiguous float32 (B, H, rows, cols): the softmax's p, which the row kernels walk flat.
bool dense4(const py::array &a, py::ssize_t b, py::ssize_t h, py::ssize_t r, py::ssize_t c, const char *fn,
            const char *name) {
    check4(a, b, h, r, c, fn, name);
    return a.dtype().is(py::dtype::of<float>()) && (a.flags() & py::array::c_style);
}

// A writable float32 output of the attention, (B, H, rows, cols) with unit column stride: its
// matrices at Mat4's strides, rows ld apart. C-contiguous, or a transposed view such as a (B, L,
// H, E) array seen as (B, H, L, E), the layout torch's CPU flash attention gives its output and
// gradients: the caller's usual transpose(1, 2).reshape(B, L, H * E) is then a view, not a copy.
using Out4 = Strided4<float>;

bool out4(py::array &a, py::ssize_t b, py::ssize_t h, py::ssize_t r, py::ssize_t c, const char *fn,
          const char *name, Out4 *o) {
    check4(a, b, h, r, c, fn, name);
    if (!a.dtype().is(py::dtype::of<float>()) || !a.writeable() || (c > 1 && a.strides(3) != 4)) return false;
    for (int d = 0; d < 3; ++d)
        if (a.strides(d) < 0 || a.strides(d) % 4) return false;
    const auto ld = r > 1 ? a.strides(2) / 4 : c;
    if (ld < c || ld > INT32_MAX) return false;
    *o = {static_cast<float *>(a.mutable_data()), a.strides(0) / 4, a.strides(1) / 4, kNoTrans, static_cast<int>(ld)};
    return true;
}

// f(b, h0, count) over the (batch, head) matrices [0, B*H), split across the pool in runs of
// heads of one batch element; `flops` is one matrix's work, for the grain.
template <class F>
void over_heads(std::size_t B, std::size_t H, std::size_t flops, const F &f) {
    const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 22) / std::max<std::size_t>(flops, 1));
    tb::kernels::parallel_for(B * H, grain, 1, [&](std::size_t i0, std::size_t i1) {
        for (std::size_t i = i0; i < i1;) {
            const std::size_t b = i / H, h0 = i % H, cnt = std::min(H - h0, i1 - i);
            f(b, h0, cnt);
            i += cnt;
        }
    });
}

// Nonzero sizes whose per-matrix strides (L*S, L*E, S*Ev, ...) fit the int arguments CBLAS takes.
bool int_sizes(py::ssize_t L, py::ssize_t S, py::ssize_t E, py::ssize_t Ev) {
    const py::ssize_t most = std::max({L, S, E, Ev});
    return std::min({L, S, E, Ev}) > 0 && most * most <= INT32_MAX;
}

// c_i = a_i @ b_i for cnt matrices at strides sa, sb, sc: one batch-strided call, or one call
// each where the c_i interleave (an Out4 such as (B, L, H, E) seen as (B, H, L, E)), which the
// batch-strided call refuses (MKL: "Parameter 17 was incorrect").
void strided(int ta, int tb_, int m, int n, int k, const float *a, int lda, long long sa, const float *b, int ldb,
             long long sb, float *c, int ldc, long long sc, int cnt) {
    if (sc >= static_cast<long long>(ldc) * m) {
        g_sgemm_strided(kRowMajor, ta, tb_, m, n, k, 1.0f, a, lda, sa, b, ldb, sb, 0.0f, c, ldc, sc, cnt);
        return;
    }
    for (int i = 0; i < cnt; ++i)
        g_sgemm(kRowMajor, ta, tb_, m, n, k, 1.0f, a + i * sa, lda, b + i * sb, ldb, 0.0f, c + i * sc, ldc);
}

// q (B, H, L, E), k (B, H, S, E), v (B, H, S, Ev) must agree: both attention calls' error.
void check_qkv(const char *fn, const py::array &q, const py::array &k, const py::array &v) {
    if (k.shape(0) != q.shape(0) || k.shape(1) != q.shape(1) || k.shape(3) != q.shape(3) || v.shape(0) != q.shape(0) ||
        v.shape(1) != q.shape(1) || v.shape(2) != k.shape(2))
        throw py::value_error(std::string(fn) + ": q, k, v shapes " + py::str(q.attr("shape")).cast<std::string>() +
                              ", " + py::str(k.attr("shape")).cast<std::string>() + ", " +
                              py::str(v.attr("shape")).cast<std::string>() + " do not match");
}

// p = softmax(scale * q k^T) (causal: top-left mask), out = p v, for float32 (B, H, L, E) q,
// (B, H, S, E) k, (B, H, S, Ev) v; p C-contiguous, out as Out4 says. False (nothing written) when the
// loaded library or the operands' layouts do not allow it: the caller runs its own loop.
bool attention_forward(const py::array &q, const py::array &k, const py::array &v, py::array p, py::array out,
                       double scale, bool causal) {
    const char *fn = "attention_forward";
    Mat4 Q, K, V;
    if (g_sgemm_strided == nullptr || !mat4(q, &Q) || !mat4(k, &K) || !mat4(v, &V)) return false;
    const auto B = q.shape(0), H = q.shape(1), L = q.shape(2), E = q.shape(3), S = k.shape(2), Ev = v.shape(3);
    check_qkv(fn, q, k, v);
    Out4 O;
    if (!dense4(p, B, H, L, S, fn, "p") || !p.writeable() || !out4(out, B, H, L, Ev, fn, "out", &O)) return false;
    if (!int_sizes(L, S, E, Ev)) return false;
    float *pp = static_cast<float *>(p.mutable_data());
    const int l = static_cast<int>(L), s = static_cast<int>(S), e = static_cast<int>(E), ev = static_cast<int>(Ev);
    const auto fscale = static_cast<float>(scale);
    const std::size_t uH = H, uL = L, uS = S;
    py::gil_scoped_release nogil;
    over_heads(B, uH, 2 * uL * uS * (E + Ev), [&](std::size_t b, std::size_t h, std::size_t cnt) {
        float *pb = pp + (b * uH + h) * uL * uS;
        const int c = static_cast<int>(cnt);
        strided(Q.trans, K.flipped(), l, s, e, Q.at(b, h), Q.ld, Q.sh, K.at(b, h), K.ld, K.sh, pb, s, l * s, c);
        tb::kernels::softmax_rows(pb, cnt * uL, uS, fscale, causal ? uL : 0);
        strided(kNoTrans, V.trans, l, ev, s, pb, s, l * s, V.at(b, h), V.ld, V.sh, O.at(b, h), O.ld, O.sh, c);
    });
    return true;
}

// The gradients through attention_forward given its p and the output's gradient g:
// gv = p^T g, dS = scale * p * (g v^T - rowsum), gq = dS k, gk = dS^T q. g read as Mat4 (a
// transposed view as it comes back through the caller's reshape), gq, gk, gv written as Out4;
// False as attention_forward's.
bool attention_backward(const py::array &q, const py::array &k, const py::array &v, const py::array &p,
                        const py::array &g, py::array gq, py::array gk, py::array gv, double scale) {
    const char *fn = "attention_backward";
    Mat4 Q, K, V, G;
    if (g_sgemm_strided == nullptr || !mat4(q, &Q) || !mat4(k, &K) || !mat4(v, &V) || !mat4(g, &G)) return false;
    const auto B = q.shape(0), H = q.shape(1), L = q.shape(2), E = q.shape(3), S = k.shape(2), Ev = v.shape(3);
    check_qkv(fn, q, k, v);
    Out4 GQ, GK, GV;
    if (!dense4(p, B, H, L, S, fn, "p") || !out4(gq, B, H, L, E, fn, "gq", &GQ) || !out4(gk, B, H, S, E, fn, "gk", &GK) ||
        !out4(gv, B, H, S, Ev, fn, "gv", &GV))
        return false;
    if (g.shape(0) != B || g.shape(1) != H || g.shape(2) != L || g.shape(3) != Ev)
        throw py::value_error(std::string(fn) + ": g has shape " + py::str(g.attr("shape")).cast<std::string>() +
                              ", expected the output's");
    if (!int_sizes(L, S, E, Ev)) return false;
    const float *pp = static_cast<const float *>(p.data());
    const int l = static_cast<int>(L), s = static_cast<int>(S), e = static_cast<int>(E), ev = static_cast<int>(Ev);
    const auto fscale = static_cast<float>(scale);
    const std::size_t uH = H, uL = L, uS = S, uE = E, uEv = Ev;
    py::gil_scoped_release nogil;
    over_heads(B, uH, 4 * uL * uS * (uE + uEv), [&](std::size_t b, std::size_t h, std::size_t cnt) {
        // dS for these heads, uninitialised (every value is written) and freed at once
        const std::unique_ptr<float[]> scratch(new float[cnt * uL * uS]);
        float *ds = scratch.get();
        const std::size_t bh = b * uH + h;
        const float *pb = pp + bh * uL * uS;
        const int c = static_cast<int>(cnt);
        strided(kTrans, G.trans, s, ev, l, pb, s, l * s, G.at(b, h), G.ld, G.sh, GV.at(b, h), GV.ld, GV.sh, c);
        strided(G.trans, V.flipped(), l, s, ev, G.at(b, h), G.ld, G.sh, V.at(b, h), V.ld, V.sh, ds, s, l * s, c);
        tb::kernels::softmax_rows_backward(ds, pb, cnt * uL, uS, fscale);
        strided(kNoTrans, K.trans, l, e, s, ds, s, l * s, K.at(b, h), K.ld, K.sh, GQ.at(b, h), GQ.ld, GQ.sh, c);
        strided(kTrans, Q.trans, s, e, l, ds, s, l * s, Q.at(b, h), Q.ld, Q.sh, GK.at(b, h), GK.ld, GK.sh, c);
    });
    return true;
}

}  // namespace

void init_blas(py::module_ &m) {
    m.def("_gemm_load", &load, py::arg("path"),
          "dlopen a CBLAS library (MKL's libmkl_rt: put on its sequential layer) for gemm; returns its path");
    m.def("gemm_batched", &gemm_batched, py::arg("a"), py::arg("b"), py::arg("out"),
          "out (B, M, N) = a (B, M, K) @ b (B, K, N), the batch split across the pool: MKL's batch-strided "
          "GEMM, or one-thread OpenBLAS GEMMs on more than one thread; False (nothing written) when neither can "
          "take these arrays");
    m.def("_gemm_loaded", [] { return g_loaded; }, "the library _gemm_load opened ('' if none)");
    m.def("_openblas_items_load", &openblas_load, py::arg("path"),
          "find NumPy's loaded OpenBLAS (ILP64 symbols) for gemm_batched's one-product-per-thread path; False if not");
    m.def("_openblas_items_run", [] { return g_ob.batches.load(); },
          "how many gemm_batched calls ran as one-thread OpenBLAS products on the pool (tests)");
    m.def("attention_forward", &attention_forward, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("p"),
          py::arg("out"), py::arg("scale"), py::arg("causal"),
          "p = softmax(scale * q @ k^T) (causal: top-left mask), out = p @ v for float32 (B, H, L, E) operands, "
          "each (batch, head)'s products and softmax on one thread of the pool; False when it cannot take them");
    m.def("attention_backward", &attention_backward, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("p"),
          py::arg("g"), py::arg("gq"), py::arg("gk"), py::arg("gv"), py::arg("scale"),
          "gq, gk, gv through attention_forward from its p and the output's gradient g; False when it cannot");
    m.def("gemm", &gemm, py::arg("a"), py::arg("b"), py::arg("out"), py::arg("beta") = 0.0,
          py::arg("bias") = py::none(),
          "out = a @ b + beta * out (beta 0 or 1), or a @ b + bias, on the loaded CBLAS, split by rows across "
          "the native pool; "
          "False (nothing written) when it cannot take these arrays");
}
