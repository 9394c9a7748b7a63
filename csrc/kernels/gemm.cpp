// gemm.h's packing, the CPU dispatch and the scalar body, and the Python bindings:
// tensorbrain._C.PackedMatrix and tensorbrain._C.gemm_packed. The NumPy twins of the same names
// are in tensorbrain/_ops/packed_gemm.py (plain matmul); tests/nn/test_packed_gemm.py holds the two
// together, on the AVX2/FMA body and on the scalar one.
#include "kernels/gemm.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "kernels/reduce.h"

namespace py = pybind11;

namespace tb::kernels {

PackedMatrix::PackedMatrix(const float *b, std::ptrdiff_t s0, std::ptrdiff_t s1, int k_, int n_, int groups_,
                           const int *order, const float *scale)
    : k(k_), n(n_), groups(groups_), ng(n_ / groups_), panels((n_ / groups_ + kGemmNR - 1) / kGemmNR) {
    const std::size_t count = static_cast<std::size_t>(groups) * panels * k * kGemmNR;
    const std::size_t bytes = ((count * sizeof(float) + 63) / 64) * 64;
    void *mem = std::aligned_alloc(64, bytes > 0 ? bytes : 64);
    if (mem == nullptr) throw std::bad_alloc();
    data = std::unique_ptr<float, void (*)(void *)>(static_cast<float *>(mem), std::free);
    float *out = data.get();
    for (int g = 0; g < groups; ++g) {
        const std::ptrdiff_t first = static_cast<std::ptrdiff_t>(order != nullptr ? order[g] : g) * ng;
        const float f = scale != nullptr ? scale[g] : 1.0f;
        for (int p = 0; p < panels; ++p, out += static_cast<std::ptrdiff_t>(k) * kGemmNR) {
            // the panel's columns [c0, c0 + cols) of b, zero-padded to 16; each source column
            // walked along k (contiguous for a transposed b: an LSTM's W^T), each row's 16 values
            // in a row (contiguous for a C-contiguous b)
            const int c0 = p * kGemmNR, cols = ng - c0 < kGemmNR ? ng - c0 : kGemmNR;
            const float *src = b + (first + c0) * s1;
            if (cols < kGemmNR) std::fill(out, out + static_cast<std::ptrdiff_t>(k) * kGemmNR, 0.0f);
            if (s1 == 1 && cols == kGemmNR) {
                for (int i = 0; i < k; ++i)
                    for (int j = 0; j < kGemmNR; ++j) out[i * kGemmNR + j] = f * src[i * s0 + j];
            } else {   // 16 x 16 blocks: 16 source runs read, 16 panel rows written, all in L1
                for (int i0 = 0; i0 < k; i0 += kGemmNR) {
                    const int rows = k - i0 < kGemmNR ? k - i0 : kGemmNR;
                    for (int j = 0; j < cols; ++j) {
                        const float *col = src + j * s1 + i0 * s0;
                        float *dst = out + static_cast<std::ptrdiff_t>(i0) * kGemmNR + j;
                        for (int i = 0; i < rows; ++i) dst[i * kGemmNR] = f * col[i * s0];
                    }
                }
            }
        }
    }
}

namespace {
bool use_fma() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    static const bool cpu = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    // _force_cpu_path("baseline") (tests) runs the scalar body here too
    return cpu && std::strcmp(cpu_path(), "avx2+f16c") == 0;
#else
    return false;
#endif
}

void scalar_panels(const float *a, std::ptrdiff_t lda, int m, const PackedMatrix &b, float *c, bool acc,
                   std::ptrdiff_t cgs) {
    for (int g = 0; g < b.groups; ++g)
        for (int p = 0; p < b.panels; ++p) {
            const float *P = b.panel(g, p);
            const int cols = b.ng - p * kGemmNR < kGemmNR ? b.ng - p * kGemmNR : kGemmNR;
            for (int r = 0; r < m; ++r) {
                float *C = c + static_cast<std::ptrdiff_t>(g) * cgs + static_cast<std::ptrdiff_t>(r) * b.ng + p * kGemmNR;
                const float *A = a + r * lda;
                for (int j = 0; j < cols; ++j) {
                    float s = 0.0f;
                    for (int i = 0; i < b.k; ++i) s += A[i] * P[i * kGemmNR + j];
                    C[j] = acc ? C[j] + s : s;
                }
            }
        }
}
}  // namespace

void gemm_packed(const float *a, std::ptrdiff_t lda, int m, const PackedMatrix &b, float *c, bool accumulate,
                 std::ptrdiff_t cgs) {
    if (m <= 0) return;
    if (cgs < 0) cgs = static_cast<std::ptrdiff_t>(m) * b.ng;
    if (b.k == 0) {   // an empty sum
        if (!accumulate)
            for (int g = 0; g < b.groups; ++g)
                std::memset(c + g * cgs, 0, sizeof(float) * static_cast<std::size_t>(m) * b.ng);
        return;
    }
    if (use_avx512() && avx512::gemm_panels(a, lda, m, b, c, accumulate, 0, b.groups * b.panels, cgs)) return;
    if (use_fma() && fma::gemm_panels(a, lda, m, b, c, accumulate, 0, b.groups * b.panels, cgs)) return;
    scalar_panels(a, lda, m, b, c, accumulate, cgs);
}

}  // namespace tb::kernels

namespace {
using tb::kernels::PackedMatrix;
using Arr = py::array_t<float, 0>;   // no forcecast: float32 arrays only

std::string shape_of(const py::array &a) { return py::str(a.attr("shape")).cast<std::string>(); }

PackedMatrix pack(Arr b, int groups, std::optional<std::vector<int>> order, std::optional<std::vector<float>> scale) {
    if (b.ndim() != 2) throw py::value_error("PackedMatrix: b must be a 2-D float32 array (K, N), got shape " + shape_of(b));
    const auto K = b.shape(0), N = b.shape(1);
    if (groups < 1 || N % groups != 0)
        throw py::value_error("PackedMatrix: groups must be a positive divisor of N = " + std::to_string(N) +
                              ", got " + std::to_string(groups));
    if (b.strides(0) % 4 != 0 || b.strides(1) % 4 != 0)
        throw py::value_error("PackedMatrix: b's strides must be whole float32 elements");
    if (order.has_value()) {
        std::vector<int> seen(static_cast<std::size_t>(groups), 0);
        bool ok = static_cast<int>(order->size()) == groups;
        for (int g : *order) ok = ok && g >= 0 && g < groups && !seen[static_cast<std::size_t>(g)]++;
        if (!ok)
            throw py::value_error("PackedMatrix: order must list each of the " + std::to_string(groups) +
                                  " groups once");
    }
    if (scale.has_value() && static_cast<int>(scale->size()) != groups)
        throw py::value_error("PackedMatrix: scale must have one value per group (" + std::to_string(groups) + "), got " +
                              std::to_string(scale->size()));
    py::gil_scoped_release nogil;
    return PackedMatrix(b.data(), b.strides(0) / 4, b.strides(1) / 4, static_cast<int>(K), static_cast<int>(N), groups,
                        order.has_value() ? order->data() : nullptr, scale.has_value() ? scale->data() : nullptr);
}
}  // namespace

namespace tb::kernels {
// Checks a (M, K) and c (groups, M, N / groups) for gemm_packed and its fused callers (lstm.cpp).
void check_gemm_args(const char *fn, const PackedMatrix &b, const py::array &a, const py::array &c, bool c_writable) {
    if (a.ndim() != 2 || a.shape(1) != b.k || !(a.flags() & py::array::c_style))
        throw py::value_error(std::string(fn) + ": a must be a C-contiguous float32 (M, " + std::to_string(b.k) +
                              ") array, got shape " + shape_of(a));
    if (!(c.flags() & py::array::c_style) || c.size() != a.shape(0) * b.n)
        throw py::value_error(std::string(fn) + ": out must be a C-contiguous float32 array of M * N = " +
                              std::to_string(a.shape(0) * b.n) + " values, laid out (" + std::to_string(b.groups) +
                              ", M, " + std::to_string(b.ng) + "), got shape " + shape_of(c));
    if (c_writable && !c.writeable()) throw py::value_error(std::string(fn) + ": out is read-only");
}
}  // namespace tb::kernels

void init_gemm(py::module_ &m) {
    py::class_<PackedMatrix>(m, "PackedMatrix",
                             "B (K, N) float32 packed once for gemm_packed: columns in `groups` equal blocks, each "
                             "in 16-column panels; group g takes B's block order[g] times scale[g] when given")
        .def(py::init(&pack), py::arg("b"), py::arg("groups") = 1, py::arg("order") = py::none(),
             py::arg("scale") = py::none())
        .def_readonly("k", &PackedMatrix::k)
        .def_readonly("n", &PackedMatrix::n)
        .def_readonly("groups", &PackedMatrix::groups);
    m.def("gemm_packed", [](Arr a, const PackedMatrix &b, Arr out, bool accumulate) {
        tb::kernels::check_gemm_args("gemm_packed", b, a, out, true);
        const float *A = a.data();
        float *C = out.mutable_data();
        const int M = static_cast<int>(a.shape(0));
        py::gil_scoped_release nogil;
        tb::kernels::gemm_packed(A, b.k, M, b, C, accumulate);
    }, py::arg("a"), py::arg("b"), py::arg("out"), py::arg("accumulate") = false,
          "out (groups, M, N / groups) = a (M, K) @ B (+= with accumulate), B packed by PackedMatrix; float32");
}
