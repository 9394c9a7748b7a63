// Fused elementwise kernels for the training hot paths that NumPy runs as several passes:
// tensorbrain._C.gelu_erf_forward / gelu_erf_backward (float32). The NumPy twins of the same
// names are in tensorbrain/_ops/elementwise.py; tests/test_fused_native.py holds them together.
// The baseline bodies here are scalar (std::exp, the same erf rational); act_avx2.cpp has the
// AVX2 ones, picked at run time.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/act.h"
#include "kernels/reduce.h"

namespace py = pybind11;

namespace tb::kernels {
namespace {
bool avx2_path() { return std::strcmp(cpu_path(), "avx2+f16c") == 0; }

float erf_scalar(float x) {
    x = std::fmin(std::fmax(x, -4.0f), 4.0f);
    const float t = x * x;
    float p = t * kErfP[0] + kErfP[1];
    for (int i = 2; i < 7; ++i) p = p * t + kErfP[i];
    float q = t * kErfQ[0] + kErfQ[1];
    for (int i = 2; i < 5; ++i) q = q * t + kErfQ[i];
    return p * x / q;
}

float cdf_scalar(float x) { return (erf_scalar(x * kInvSqrt2) + 1.0f) * 0.5f; }
}  // namespace

void gelu_erf_forward(const float *x, float *out, std::size_t n) {
    if (avx2_path() && avx2::gelu_erf_forward(x, out, n)) return;
    for (std::size_t i = 0; i < n; ++i) out[i] = x[i] * cdf_scalar(x[i]);
}

void gelu_erf_backward(const float *x, const float *g, float *out, std::size_t n) {
    if (avx2_path() && avx2::gelu_erf_backward(x, g, out, n)) return;
    for (std::size_t i = 0; i < n; ++i) {
        const float v = x[i];
        const float pdf = std::exp(v * v * -0.5f) * kInvSqrt2Pi;
        out[i] = (pdf * v + cdf_scalar(v)) * g[i];
    }
}
void softmax_rows(float *x, std::size_t rows, std::size_t cols, float scale, std::size_t causal_rows) {
    const bool vec = avx2_path();
    for (std::size_t r = 0; r < rows; ++r) {
        float *row = x + r * cols;
        const std::size_t n = causal_rows ? std::min(cols, r % causal_rows + 1) : cols;
        float m = -INFINITY;
        for (std::size_t j = 0; j < n; ++j) {
            row[j] *= scale;
            m = std::fmax(m, row[j]);
        }
        for (std::size_t j = 0; j < n; ++j) row[j] -= m;
        if (!(vec && avx2::exp_inplace(row, n)))
            for (std::size_t j = 0; j < n; ++j) row[j] = std::exp(row[j]);
        float sum = 0.0f;
        for (std::size_t j = 0; j < n; ++j) sum += row[j];
        const float inv = 1.0f / sum;
        for (std::size_t j = 0; j < n; ++j) row[j] *= inv;
        for (std::size_t j = n; j < cols; ++j) row[j] = 0.0f;
    }
}

void softmax_rows_backward(float *g, const float *p, std::size_t rows, std::size_t cols, float scale) {
    for (std::size_t r = 0; r < rows; ++r) {
        float *gr = g + r * cols;
        const float *pr = p + r * cols;
        float dot = 0.0f;
        for (std::size_t j = 0; j < cols; ++j) dot += gr[j] * pr[j];
        for (std::size_t j = 0; j < cols; ++j) gr[j] = (gr[j] - dot) * pr[j] * scale;
    }
}
}  // namespace tb::kernels

namespace {

using Arr = py::array_t<float, 0>;

const float *input(const char *fn, const char *name, const Arr &a) {
    if (!(a.flags() & py::array::c_style))
        throw py::value_error(std::string(fn) + ": " + name + " must be a C-contiguous float32 array");
    return a.data();
}

Arr gelu_forward(Arr x) {
    const float *p = input("gelu_erf_forward", "x", x);
    Arr out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
    float *o = out.mutable_data();
    const std::size_t n = static_cast<std::size_t>(x.size());
    py::gil_scoped_release nogil;
    tb::kernels::gelu_erf_forward(p, o, n);
    return out;
}

Arr gelu_backward(Arr x, Arr g) {
    const char *fn = "gelu_erf_backward";
    const float *p = input(fn, "x", x);
    const float *q = input(fn, "g", g);
    if (x.size() != g.size())
        throw py::value_error(std::string(fn) + ": x and g differ in size (" + std::to_string(x.size()) + " and " +
                              std::to_string(g.size()) + ")");
    Arr out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
    float *o = out.mutable_data();
    const std::size_t n = static_cast<std::size_t>(x.size());
    py::gil_scoped_release nogil;
    tb::kernels::gelu_erf_backward(p, q, o, n);
    return out;
}

float *inplace(const char *fn, const char *name, Arr &a) {
    input(fn, name, a);
    if (!a.writeable()) throw py::value_error(std::string(fn) + ": " + name + " is read-only");
    if (a.ndim() < 2) throw py::value_error(std::string(fn) + ": " + name + " needs at least 2 dims (rows, columns)");
    return a.mutable_data();
}

void softmax_forward(Arr s, float scale, bool causal) {
    float *p = inplace("softmax_rows_forward", "s", s);
    const std::size_t cols = static_cast<std::size_t>(s.shape(s.ndim() - 1));
    const std::size_t rows = cols ? static_cast<std::size_t>(s.size()) / cols : 0;
    const std::size_t L = causal ? static_cast<std::size_t>(s.shape(s.ndim() - 2)) : 0;
    py::gil_scoped_release nogil;
    tb::kernels::softmax_rows(p, rows, cols, scale, L);
}

void softmax_backward(Arr g, Arr p, float scale) {
    const char *fn = "softmax_rows_backward";
    float *gp = inplace(fn, "g", g);
    const float *pp = input(fn, "p", p);
    if (g.ndim() != p.ndim() || !std::equal(g.shape(), g.shape() + g.ndim(), p.shape()))
        throw py::value_error(std::string(fn) + ": g " + py::str(g.attr("shape")).cast<std::string>() + " and p " +
                              py::str(p.attr("shape")).cast<std::string>() + " differ in shape");
    const std::size_t cols = static_cast<std::size_t>(g.shape(g.ndim() - 1));
    const std::size_t rows = cols ? static_cast<std::size_t>(g.size()) / cols : 0;
    py::gil_scoped_release nogil;
    tb::kernels::softmax_rows_backward(gp, pp, rows, cols, scale);
}

}  // namespace

void init_fused(py::module_ &m) {
    m.def("softmax_rows_forward", &softmax_forward, py::arg("s"), py::arg("scale"), py::arg("causal"),
          "s = softmax(scale * s) over the last dim, in place (float32, C-contiguous); causal keeps column j <= "
          "row i of each (L, S) matrix and zeroes the rest");
    m.def("softmax_rows_backward", &softmax_backward, py::arg("g"), py::arg("p"), py::arg("scale"),
          "g = scale * p * (g - sum(g * p)) over the last dim, in place (float32, C-contiguous)");
    m.def("gelu_erf_forward", &gelu_forward, py::arg("x"),
          "x * (1 + erf(x / sqrt 2)) / 2 of a C-contiguous float32 array (a new array)");
    m.def("gelu_erf_backward", &gelu_backward, py::arg("x"), py::arg("g"),
          "g * d/dx gelu(x) of C-contiguous float32 arrays (a new array of x's shape)");
}
