// Fused elementwise kernels for the training hot paths that NumPy runs as several passes
// (float32): GELU, the attention softmax, layer norm, batch norm, log_softmax and cross-entropy's
// backward, embedding's backward. The NumPy twins of the same names are in tensorbrain/_ops
// (elementwise.py, attention.py, norm.py, loss.py) and nn/functional.py;
// tests/test_fused_native.py holds them together. The baseline bodies here are scalar (std::exp,
// the same erf rational); act_avx2.cpp has the AVX2 ones, picked at run time. Large calls split
// their rows across tb.set_num_threads threads (parallel.h).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/act.h"
#include "kernels/parallel.h"
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
    if (use_avx512() && avx512::gelu_erf_forward(x, out, n)) return;
    if (avx2_path() && avx2::gelu_erf_forward(x, out, n)) return;
    for (std::size_t i = 0; i < n; ++i) out[i] = x[i] * cdf_scalar(x[i]);
}

void gelu_erf_backward(const float *x, const float *g, float *out, std::size_t n) {
    if (use_avx512() && avx512::gelu_erf_backward(x, g, out, n)) return;
    if (avx2_path() && avx2::gelu_erf_backward(x, g, out, n)) return;
    for (std::size_t i = 0; i < n; ++i) {
        const float v = x[i];
        const float pdf = std::exp(v * v * -0.5f) * kInvSqrt2Pi;
        out[i] = (pdf * v + cdf_scalar(v)) * g[i];
    }
}
void softmax_rows(float *x, std::size_t rows, std::size_t cols, float scale, std::size_t causal_rows) {
    if (use_avx512() && avx512::softmax_rows(x, rows, cols, scale, causal_rows)) return;
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
    if (use_avx512() && avx512::softmax_rows_backward(g, p, rows, cols, scale)) return;
    for (std::size_t r = 0; r < rows; ++r) {
        float *gr = g + r * cols;
        const float *pr = p + r * cols;
        float dot = 0.0f;
        for (std::size_t j = 0; j < cols; ++j) dot += gr[j] * pr[j];
        for (std::size_t j = 0; j < cols; ++j) gr[j] = (gr[j] - dot) * pr[j] * scale;
    }
}
void log_softmax_rows(const float *x, float *out, std::size_t rows, std::size_t cols) {
    const bool vec = avx2_path();
    for (std::size_t r = 0; r < rows; ++r) {
        const float *xr = x + r * cols;
        float *o = out + r * cols;
        float m = -INFINITY;
        bool nan = false;
        if (!(vec && avx2::max_nan(xr, cols, &m, &nan)))
            for (std::size_t j = 0; j < cols; ++j) {
                nan |= std::isnan(xr[j]);
                m = std::fmax(m, xr[j]);
            }
        if (!std::isfinite(m)) m = 0.0f;
        float sum = 0.0f;
        if (!(vec && avx2::exp_sum(xr, cols, m, &sum))) {
            double s = 0.0;   // one running float sum drifts by ~1e-6 over 1000 values
            for (std::size_t j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
            sum = static_cast<float>(s);
        }
        const float lse = nan ? NAN : std::log(sum);
        for (std::size_t j = 0; j < cols; ++j) o[j] = (xr[j] - m) - lse;
    }
}

void cross_entropy_rows_backward(const float *logp, const std::int64_t *target, float *g, std::size_t rows,
                                 std::size_t cols, float r) {
    const bool vec = avx2_path();
    for (std::size_t i = 0; i < rows; ++i) {
        const float *lp = logp + i * cols;
        float *o = g + i * cols;
        if (!(vec && avx2::exp_scale(lp, o, cols, r)))
            for (std::size_t j = 0; j < cols; ++j) o[j] = std::exp(lp[j]) * r;
        const auto t = static_cast<std::size_t>(target[i]);
        o[t] = (std::exp(lp[t]) - 1.0f) * r;
    }
}

// Layer norm over rows of d values: out = (x - mean) * rstd * w + b (w, b may be null), with
// each row's mean and rstd kept for backward (sums in double).
void layer_norm_rows(const float *x, const float *w, const float *b, float *out, float *mean, float *rstd,
                     std::size_t rows, std::size_t d, double eps) {
    if (use_avx512() && avx512::layer_norm_rows(x, w, b, out, mean, rstd, rows, d, eps)) return;
    for (std::size_t r = 0; r < rows; ++r) {
        const float *xr = x + r * d;
        float *o = out + r * d;
        double s = 0.0;
        for (std::size_t j = 0; j < d; ++j) s += xr[j];
        const double mu = s / static_cast<double>(d);
        double v = 0.0;
        for (std::size_t j = 0; j < d; ++j) {
            const double c = xr[j] - mu;
            v += c * c;
        }
        const float m = static_cast<float>(mu), rs = static_cast<float>(1.0 / std::sqrt(v / static_cast<double>(d) + eps));
        mean[r] = m;
        rstd[r] = rs;
        for (std::size_t j = 0; j < d; ++j) {
            float y = (xr[j] - m) * rs;
            if (w) y *= w[j];
            if (b) y += b[j];
            o[j] = y;
        }
    }
}

// Its backward: gx = rstd * (gxh - mean(gxh) - xhat * mean(gxh * xhat)) with gxh = g * w, and
// gw = sum over rows of g * xhat, gb = sum of g (gw/gb null when not wanted). The row sums for
// gw/gb are added per block of rows into double partials sw/sb (d values each; gx and the
// partials may be null), so that blocks can run on different threads.
void layer_norm_rows_backward_part(const float *x, const float *mean, const float *rstd, const float *w, const float *g,
                                   float *gx, double *sw, double *sb, std::size_t rows, std::size_t d) {
    if (use_avx512() && avx512::layer_norm_rows_backward_part(x, mean, rstd, w, g, gx, sw, sb, rows, d)) return;
    std::vector<float> xh(d), gh(d);
    for (std::size_t r = 0; r < rows; ++r) {
        const float *xr = x + r * d, *gr = g + r * d;
        const float m = mean[r], rs = rstd[r];
        double m1 = 0.0, m2 = 0.0;
        for (std::size_t j = 0; j < d; ++j) {
            xh[j] = (xr[j] - m) * rs;
            gh[j] = w ? gr[j] * w[j] : gr[j];
            m1 += gh[j];
            m2 += static_cast<double>(gh[j]) * xh[j];
        }
        const float a = static_cast<float>(m1 / static_cast<double>(d)), c = static_cast<float>(m2 / static_cast<double>(d));
        if (gx) {
            float *o = gx + r * d;
            for (std::size_t j = 0; j < d; ++j) o[j] = rs * (gh[j] - a - xh[j] * c);
        }
        if (sw)
            for (std::size_t j = 0; j < d; ++j) sw[j] += static_cast<double>(gr[j]) * xh[j];
        if (sb)
            for (std::size_t j = 0; j < d; ++j) sb[j] += gr[j];
    }
}

// The batch norm sums over one image's plane (l values) in float: 16 partial sums (value j in
// lane j mod 16) added pairwise at the end. One running float sum was a chain of dependent adds
// (four cycles each); the lanes are independent, so the compiler runs them as vectors without
// reordering anything (no -ffast-math), and the result does not depend on the thread split.
// lane_sums<K>: K such sums in one pass, f(j, k) giving sum k's value at j.
template <std::size_t K, class F>
inline std::array<float, K> lane_sums(std::size_t l, const F &f) {
    float acc[K][16] = {};
    std::size_t j = 0;
    for (; j + 16 <= l; j += 16)
        for (std::size_t k = 0; k < K; ++k)
            for (std::size_t t = 0; t < 16; ++t) acc[k][t] += f(j + t, k);
    for (std::size_t t = 0; j + t < l; ++t)
        for (std::size_t k = 0; k < K; ++k) acc[k][t] += f(j + t, k);
    std::array<float, K> out{};
    for (std::size_t k = 0; k < K; ++k) {
        for (std::size_t w = 8; w > 0; w /= 2)
            for (std::size_t t = 0; t < w; ++t) acc[k][t] += acc[k][t + w];
        out[k] = acc[k][0];
    }
    return out;
}

// One such sum, f(j) giving the value at j.
template <class F>
inline float lane_sum(std::size_t l, const F &f) {
    return lane_sums<1>(l, [&f](std::size_t j, std::size_t) { return f(j); })[0];
}

// Batch norm in training over (N, C, L) (L = the spatial size), channels [c0, c1): per channel
// the batch mean and biased variance (sums in double), then out = (x - mean) * rstd * w + b in a
// second pass. Channels are independent: callers split them across threads.
void batch_norm_train(const float *x, const float *w, const float *b, float *out, float *mean, float *var,
                      std::size_t n, std::size_t c, std::size_t l, double eps, std::size_t c0, std::size_t c1) {
    const double k = static_cast<double>(n * l);
    for (std::size_t ch = c0; ch < c1; ++ch) {
        double s = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            const float *p = x + (i * c + ch) * l;
            s += lane_sum(l, [p](std::size_t j) { return p[j]; });
        }
        const double mu = s / k;
        double v = 0.0;
        const float m = static_cast<float>(mu);
        for (std::size_t i = 0; i < n; ++i) {
            const float *p = x + (i * c + ch) * l;
            v += lane_sum(l, [p, m](std::size_t j) { const float d = p[j] - m; return d * d; });
        }
        v /= k;
        mean[ch] = m;
        var[ch] = static_cast<float>(v);
        const float rs = static_cast<float>(1.0 / std::sqrt(v + eps));
        const float a = w ? rs * w[ch] : rs, sh = (b ? b[ch] : 0.0f) - m * a;
        for (std::size_t i = 0; i < n; ++i) {
            const float *p = x + (i * c + ch) * l;
            float *o = out + (i * c + ch) * l;
            for (std::size_t j = 0; j < l; ++j) o[j] = p[j] * a + sh;
        }
    }
}

// Its backward from the saved input: per channel sg = sum(g), sgx = sum(g * xhat); then
// gx = rstd * w * (g - sg / k - xhat * sgx / k) (gx null: only the affine gradients); channels
// [c0, c1).
void batch_norm_train_backward(const float *g, const float *x, const float *mean, const float *rstd, const float *w,
                               float *gx, float *gw, float *gb, std::size_t n, std::size_t c, std::size_t l,
                               std::size_t c0, std::size_t c1) {
    const float k = static_cast<float>(n * l);
    for (std::size_t ch = c0; ch < c1; ++ch) {
        const float m = mean[ch], rs = rstd[ch];
        double sg = 0.0, sgx = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            const float *gp = g + (i * c + ch) * l, *xp = x + (i * c + ch) * l;
            const auto sums = lane_sums<2>(l, [gp, xp, m](std::size_t j, std::size_t k) {
                return k == 0 ? gp[j] : gp[j] * (xp[j] - m);
            });
            sg += sums[0];
            sgx += sums[1];
        }
        sgx *= rs;   // sum(g * xhat)
        if (gw) gw[ch] = static_cast<float>(sgx);
        if (gb) gb[ch] = static_cast<float>(sg);
        if (!gx) continue;
        const float scale = w ? rs * w[ch] : rs;
        const float c1 = static_cast<float>(sg) / k, c2 = static_cast<float>(sgx) / k * rs;
        for (std::size_t i = 0; i < n; ++i) {
            const float *gp = g + (i * c + ch) * l, *xp = x + (i * c + ch) * l;
            float *o = gx + (i * c + ch) * l;
            for (std::size_t j = 0; j < l; ++j) o[j] = scale * (gp[j] - c1 - (xp[j] - m) * c2);
        }
    }
}
}  // namespace tb::kernels

namespace {

using Arr = py::array_t<float, 0>;

using tb::kernels::kGrain;
std::size_t rows_per_grain(std::size_t cols) { return tb::kernels::items_per_grain(cols); }

const float *input(const char *fn, const char *name, const Arr &a) {
    if (!(a.flags() & py::array::c_style))
        throw py::value_error(std::string(fn) + ": " + name + " must be a C-contiguous float32 array");
    return a.data();
}

// A forward pass over one C-contiguous float32 array into a new one of its shape,
// kernel(x, out, n) on chunks split across threads (chunk sizes a multiple of align).
template <typename Kernel>
Arr map_forward(const char *fn, Arr &x, std::size_t align, Kernel kernel) {
    const float *p = input(fn, "x", x);
    Arr out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
    float *o = out.mutable_data();
    const std::size_t n = static_cast<std::size_t>(x.size());
    py::gil_scoped_release nogil;
    tb::kernels::parallel_for(n, kGrain, align, [&](std::size_t b, std::size_t e) { kernel(p + b, o + b, e - b); });
    return out;
}

Arr gelu_forward(Arr x) { return map_forward("gelu_erf_forward", x, 8, tb::kernels::gelu_erf_forward); }

// ReLU: max(x, 0) as NumPy's maximum gives it (NaN stays NaN, -0 becomes +0).
Arr relu_forward(Arr x) {
    return map_forward("relu_forward", x, 16, [](const float *p, float *o, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) o[i] = (p[i] > 0.0f || p[i] != p[i]) ? p[i] : 0.0f;
    });
}

// a + b for two C-contiguous float32 arrays of one shape, into out (which may be a) or a new
// array: a residual connection and the autograd engine's gradient sums, split across threads.
Arr add_arrays(Arr a, Arr b, std::optional<Arr> out) {
    const char *fn = "add_arrays";
    const float *pa = input(fn, "a", a), *pb = input(fn, "b", b);
    if (a.ndim() != b.ndim() || !std::equal(a.shape(), a.shape() + a.ndim(), b.shape()))
        throw py::value_error(std::string(fn) + ": a " + py::str(a.attr("shape")).cast<std::string>() + " and b " +
                              py::str(b.attr("shape")).cast<std::string>() + " differ in shape");
    Arr o = out.has_value() ? *out : Arr(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
    if (out.has_value()) {
        input(fn, "out", o);
        if (o.size() != a.size() || !o.writeable())
            throw py::value_error(std::string(fn) + ": out must be a writable array of a's " + std::to_string(a.size()) +
                                  " values");
    }
    float *po = o.mutable_data();
    const std::size_t n = static_cast<std::size_t>(a.size());
    py::gil_scoped_release nogil;
    tb::kernels::parallel_for(n, kGrain, 16, [&](std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) po[i] = pa[i] + pb[i];
    });
    return o;
}

// A backward pass over two same-size float32 arrays into a new one shaped like x (x: the op's
// input or output, named xname in errors; g: its gradient), kernel(x, g, out, n) on chunks split
// across threads (chunk sizes a multiple of align).
template <typename Kernel>
Arr map_backward(const char *fn, const char *xname, Arr &x, Arr &g, std::size_t align, Kernel kernel) {
    const float *p = input(fn, xname, x);
    const float *q = input(fn, "g", g);
    if (x.size() != g.size())
        throw py::value_error(std::string(fn) + ": " + xname + " and g differ in size (" + std::to_string(x.size()) +
                              " and " + std::to_string(g.size()) + ")");
    Arr out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
    float *o = out.mutable_data();
    const std::size_t n = static_cast<std::size_t>(x.size());
    py::gil_scoped_release nogil;
    tb::kernels::parallel_for(n, kGrain, align, [&](std::size_t b, std::size_t e) { kernel(p + b, q + b, o + b, e - b); });
    return out;
}

// ReLU's backward from its output r: g * (r > 0), a multiply by 1 or 0 as NumPy's twin does (so
// g * 0 keeps its sign and NaN), in one pass instead of the comparison's and the product's.
Arr relu_backward(Arr r, Arr g) {
    return map_backward("relu_backward", "out", r, g, 16, [](const float *p, const float *q, float *o, std::size_t n) {
        // 1.0f's bits under an all-ones mask where out > 0: a select the compiler vectorises
        // (a branch, or a bool converted to float, ran scalar at ~5 ns a value)
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint32_t m = (0u - static_cast<std::uint32_t>(p[i] > 0.0f)) & 0x3f800000u;
            float one_or_zero;
            std::memcpy(&one_or_zero, &m, sizeof m);
            o[i] = q[i] * one_or_zero;
        }
    });
}

Arr gelu_backward(Arr x, Arr g) {
    return map_backward("gelu_erf_backward", "x", x, g, 8, tb::kernels::gelu_erf_backward);
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
    // whole (L, S) matrices per chunk under a causal mask: a row's mask depends on row % L
    tb::kernels::parallel_for(rows, rows_per_grain(cols), L ? L : 1, [&](std::size_t b, std::size_t e) {
        tb::kernels::softmax_rows(p + b * cols, e - b, cols, scale, L);
    });
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
    tb::kernels::parallel_for(rows, rows_per_grain(cols), 1, [&](std::size_t b, std::size_t e) {
        tb::kernels::softmax_rows_backward(gp + b * cols, pp + b * cols, e - b, cols, scale);
    });
}

Arr log_softmax_forward(Arr x) {
    const float *p = input("log_softmax_rows_forward", "x", x);
    if (x.ndim() < 1) throw py::value_error("log_softmax_rows_forward: x needs at least 1 dim");
    Arr out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
    float *o = out.mutable_data();
    const std::size_t cols = static_cast<std::size_t>(x.shape(x.ndim() - 1));
    const std::size_t rows = cols ? static_cast<std::size_t>(x.size()) / cols : 0;
    py::gil_scoped_release nogil;
    tb::kernels::parallel_for(rows, rows_per_grain(cols), 1, [&](std::size_t b, std::size_t e) {
        tb::kernels::log_softmax_rows(p + b * cols, o + b * cols, e - b, cols);
    });
    return out;
}

Arr cross_entropy_backward(Arr logp, py::array_t<std::int64_t, 0> target, float r) {
    const char *fn = "cross_entropy_rows_backward";
    const float *lp = input(fn, "logp", logp);
    if (logp.ndim() != 2) throw py::value_error(std::string(fn) + ": logp must be (rows, classes)");
    if (!(target.flags() & py::array::c_style) || target.ndim() != 1 || target.shape(0) != logp.shape(0))
        throw py::value_error(std::string(fn) + ": target must be a C-contiguous int64 array of " +
                              std::to_string(logp.shape(0)) + " class indices");
    const std::size_t rows = static_cast<std::size_t>(logp.shape(0)), cols = static_cast<std::size_t>(logp.shape(1));
    const std::int64_t *t = target.data();
    for (std::size_t i = 0; i < rows; ++i)
        if (t[i] < 0 || static_cast<std::size_t>(t[i]) >= cols)
            throw py::index_error(std::string(fn) + ": target " + std::to_string(t[i]) + " is out of bounds for " +
                                  std::to_string(cols) + " classes");
    Arr out({logp.shape(0), logp.shape(1)});
    float *o = out.mutable_data();
    py::gil_scoped_release nogil;
    tb::kernels::parallel_for(rows, rows_per_grain(cols), 1, [&](std::size_t b, std::size_t e) {
        tb::kernels::cross_entropy_rows_backward(lp + b * cols, t + b, o + b * cols, e - b, cols, r);
    });
    return out;
}

// target[idx[i]] += rows[i] for i in order (embedding's backward): one add per row, where the twin
// sorts, gathers and reduceats (1.3-1.9 ms against torch's 0.16 for an LSTM LM's 700 lookups).
void embedding_rows_add(Arr target, py::array_t<std::int64_t, 0> idx, Arr rows) {
    const char *fn = "embedding_rows_add";
    float *t = inplace(fn, "target", target);
    const float *r = input(fn, "rows", rows);
    if (target.ndim() != 2 || rows.ndim() != 2 || rows.shape(1) != target.shape(1))
        throw py::value_error(std::string(fn) + ": target (num, dim) and rows (n, dim) must share dim");
    if (!(idx.flags() & py::array::c_style) || idx.ndim() != 1 || idx.shape(0) != rows.shape(0))
        throw py::value_error(std::string(fn) + ": idx must be a C-contiguous int64 array of " +
                              std::to_string(rows.shape(0)) + " row indices");
    const std::size_t n = static_cast<std::size_t>(rows.shape(0)), d = static_cast<std::size_t>(rows.shape(1));
    const std::int64_t *ix = idx.data(), num = static_cast<std::int64_t>(target.shape(0));
    for (std::size_t i = 0; i < n; ++i)
        if (ix[i] < 0 || ix[i] >= num)
            throw py::index_error(std::string(fn) + ": index " + std::to_string(ix[i]) + " is out of range for " +
                                  std::to_string(num) + " rows");
    py::gil_scoped_release nogil;
    for (std::size_t i = 0; i < n; ++i) {
        float *o = t + static_cast<std::size_t>(ix[i]) * d;
        const float *a = r + i * d;
        for (std::size_t j = 0; j < d; ++j) o[j] += a[j];
    }
}

const float *optional(const char *fn, const char *name, const py::object &a, py::ssize_t d) {
    if (a.is_none()) return nullptr;
    Arr arr = py::cast<Arr>(a);
    if (!(arr.flags() & py::array::c_style) || arr.size() != d)
        throw py::value_error(std::string(fn) + ": " + name + " must be a C-contiguous float32 array of " +
                              std::to_string(d) + " values");
    return arr.data();
}

py::tuple layer_norm_forward(Arr x, py::object w, py::object b, double eps) {
    const char *fn = "layer_norm_rows_forward";
    const float *xp = input(fn, "x", x);
    if (x.ndim() != 2) throw py::value_error(std::string(fn) + ": x must be (rows, normalized size)");
    const py::ssize_t rows = x.shape(0), d = x.shape(1);
    const float *wp = optional(fn, "weight", w, d), *bp = optional(fn, "bias", b, d);
    Arr out({rows, d}), mean(std::vector<py::ssize_t>{rows}), rstd(std::vector<py::ssize_t>{rows});
    float *o = out.mutable_data(), *mp = mean.mutable_data(), *rp = rstd.mutable_data();
    {
        py::gil_scoped_release nogil;
        const auto D = static_cast<std::size_t>(d);
        tb::kernels::parallel_for(static_cast<std::size_t>(rows), rows_per_grain(D), 1, [&](std::size_t b0, std::size_t e) {
            tb::kernels::layer_norm_rows(xp + b0 * D, wp, bp, o + b0 * D, mp + b0, rp + b0, e - b0, D, eps);
        });
    }
    return py::make_tuple(out, mean, rstd);
}

py::tuple layer_norm_backward(Arr x, Arr mean, Arr rstd, py::object w, Arr g, bool need_x, bool need_w, bool need_b) {
    const char *fn = "layer_norm_rows_backward";
    const float *xp = input(fn, "x", x), *gp = input(fn, "g", g);
    if (x.ndim() != 2 || g.ndim() != 2 || g.shape(0) != x.shape(0) || g.shape(1) != x.shape(1))
        throw py::value_error(std::string(fn) + ": x and g must both be (rows, normalized size)");
    const py::ssize_t rows = x.shape(0), d = x.shape(1);
    if (mean.size() != rows || rstd.size() != rows)
        throw py::value_error(std::string(fn) + ": mean and rstd need one value per row");
    const float *wp = optional(fn, "weight", w, d);
    py::object gx = py::none(), gw = py::none(), gb = py::none();
    float *gxp = nullptr, *gwp = nullptr, *gbp = nullptr;
    if (need_x) { Arr a({rows, d}); gxp = a.mutable_data(); gx = a; }
    if (need_w) { Arr a(std::vector<py::ssize_t>{d}); gwp = a.mutable_data(); gw = a; }
    if (need_b) { Arr a(std::vector<py::ssize_t>{d}); gbp = a.mutable_data(); gb = a; }
    const float *mp = input(fn, "mean", mean), *rp = input(fn, "rstd", rstd);
    {
        py::gil_scoped_release nogil;
        // gw/gb: partial sums per block of rows, added in block order, so the result does not depend
        // on how many threads ran the blocks (blocks of 64 rows, at most 256 blocks)
        const auto R = static_cast<std::size_t>(rows), D = static_cast<std::size_t>(d);
        const std::size_t blk = std::max<std::size_t>(64, (R + 255) / 256), nblk = (R + blk - 1) / blk;
        std::vector<double> sw(gwp ? nblk * D : 0, 0.0), sb(gbp ? nblk * D : 0, 0.0);
        tb::kernels::parallel_for(nblk, std::max<std::size_t>(1, kGrain / std::max<std::size_t>(blk * D, 1)), 1,
                                  [&](std::size_t b0, std::size_t e0) {
            for (std::size_t k = b0; k < e0; ++k) {
                const std::size_t r0 = k * blk, n = std::min(blk, R - r0);
                tb::kernels::layer_norm_rows_backward_part(xp + r0 * D, mp + r0, rp + r0, wp, gp + r0 * D,
                                                           gxp ? gxp + r0 * D : nullptr, gwp ? &sw[k * D] : nullptr,
                                                           gbp ? &sb[k * D] : nullptr, n, D);
            }
        });
        for (std::size_t j = 0; j < D; ++j) {
            double a = 0.0, c = 0.0;
            for (std::size_t k = 0; k < nblk; ++k) {
                if (gwp) a += sw[k * D + j];
                if (gbp) c += sb[k * D + j];
            }
            if (gwp) gwp[j] = static_cast<float>(a);
            if (gbp) gbp[j] = static_cast<float>(c);
        }
    }
    return py::make_tuple(gx, gw, gb);
}

// (N, C, L) of a C-contiguous float32 array of at least 2 dims.
void ncl(const char *fn, const char *name, const Arr &a, std::size_t *n, std::size_t *c, std::size_t *l) {
    input(fn, name, a);
    if (a.ndim() < 2) throw py::value_error(std::string(fn) + ": " + name + " must be (N, C, ...)");
    *n = static_cast<std::size_t>(a.shape(0));
    *c = static_cast<std::size_t>(a.shape(1));
    *l = 1;
    for (py::ssize_t i = 2; i < a.ndim(); ++i) *l *= static_cast<std::size_t>(a.shape(i));
}

py::tuple batch_norm_forward(Arr x, py::object w, py::object b, double eps) {
    const char *fn = "batch_norm_train_forward";
    std::size_t n, c, l;
    ncl(fn, "x", x, &n, &c, &l);
    const py::ssize_t C = static_cast<py::ssize_t>(c);
    const float *wp = optional(fn, "weight", w, C), *bp = optional(fn, "bias", b, C);
    Arr out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
    Arr mean(std::vector<py::ssize_t>{C}), var(std::vector<py::ssize_t>{C});
    const float *xp = x.data();
    float *o = out.mutable_data(), *mp = mean.mutable_data(), *vp = var.mutable_data();
    {
        py::gil_scoped_release nogil;
        tb::kernels::parallel_for(c, rows_per_grain(n * l), 1, [&](std::size_t c0, std::size_t c1) {
            tb::kernels::batch_norm_train(xp, wp, bp, o, mp, vp, n, c, l, eps, c0, c1);
        });
    }
    return py::make_tuple(out, mean, var);
}

py::tuple batch_norm_backward(Arr g, Arr x, Arr mean, Arr rstd, py::object w, bool need_x, bool need_w, bool need_b) {
    const char *fn = "batch_norm_train_backward";
    std::size_t n, c, l, n2, c2, l2;
    ncl(fn, "g", g, &n, &c, &l);
    ncl(fn, "x", x, &n2, &c2, &l2);
    if (n != n2 || c != c2 || l != l2) throw py::value_error(std::string(fn) + ": g and x differ in shape");
    const py::ssize_t C = static_cast<py::ssize_t>(c);
    const float *wp = optional(fn, "weight", w, C);
    const float *mp = optional(fn, "mean", mean, C), *rp = optional(fn, "rstd", rstd, C);
    py::object gx = py::none(), gw = py::none(), gb = py::none();
    float *gxp = nullptr, *gwp = nullptr, *gbp = nullptr;
    if (need_x) { Arr a(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim())); gxp = a.mutable_data(); gx = a; }
    if (need_w) { Arr a(std::vector<py::ssize_t>{C}); gwp = a.mutable_data(); gw = a; }
    if (need_b) { Arr a(std::vector<py::ssize_t>{C}); gbp = a.mutable_data(); gb = a; }
    const float *gp = g.data(), *xp = x.data();
    {
        py::gil_scoped_release nogil;
        tb::kernels::parallel_for(c, rows_per_grain(n * l), 1, [&](std::size_t c0, std::size_t c1) {
            tb::kernels::batch_norm_train_backward(gp, xp, mp, rp, wp, gxp, gwp, gbp, n, c, l, c0, c1);
        });
    }
    return py::make_tuple(gx, gw, gb);
}

}  // namespace

void init_fused(py::module_ &m) {
    m.def("batch_norm_train_forward", &batch_norm_forward, py::arg("x"), py::arg("weight"), py::arg("bias"),
          py::arg("eps"), "(out, mean, biased var): batch norm with batch statistics over a C-contiguous float32 (N, C, ...)");
    m.def("batch_norm_train_backward", &batch_norm_backward, py::arg("g"), py::arg("x"), py::arg("mean"),
          py::arg("rstd"), py::arg("weight"), py::arg("need_x"), py::arg("need_weight"), py::arg("need_bias"),
          "(gx, gweight, gbias) of batch_norm_train_forward from the saved input, None where not needed");
    m.def("layer_norm_rows_forward", &layer_norm_forward, py::arg("x"), py::arg("weight"), py::arg("bias"),
          py::arg("eps"), "(out, mean, rstd): layer norm over the rows of a C-contiguous float32 (rows, d) array");
    m.def("layer_norm_rows_backward", &layer_norm_backward, py::arg("x"), py::arg("mean"), py::arg("rstd"),
          py::arg("weight"), py::arg("g"), py::arg("need_x"), py::arg("need_weight"), py::arg("need_bias"),
          "(gx, gweight, gbias) of layer_norm_rows_forward, None where not needed");
    m.def("softmax_rows_forward", &softmax_forward, py::arg("s"), py::arg("scale"), py::arg("causal"),
          "s = softmax(scale * s) over the last dim, in place (float32, C-contiguous); causal keeps column j <= "
          "row i of each (L, S) matrix and zeroes the rest");
    m.def("softmax_rows_backward", &softmax_backward, py::arg("g"), py::arg("p"), py::arg("scale"),
          "g = scale * p * (g - sum(g * p)) over the last dim, in place (float32, C-contiguous)");
    m.def("embedding_rows_add", &embedding_rows_add, py::arg("target"), py::arg("idx"), py::arg("rows"),
          "target[idx[i]] += rows[i] for every i in order, in place (float32 C-contiguous, int64 idx)");
    m.def("log_softmax_rows_forward", &log_softmax_forward, py::arg("x"),
          "log_softmax over the last dim of a C-contiguous float32 array (a new array)");
    m.def("cross_entropy_rows_backward", &cross_entropy_backward, py::arg("logp"), py::arg("target"), py::arg("r"),
          "(exp(logp) - onehot(target)) * r for (rows, classes) float32 log-probabilities and int64 targets");
    m.def("gelu_erf_forward", &gelu_forward, py::arg("x"),
          "x * (1 + erf(x / sqrt 2)) / 2 of a C-contiguous float32 array (a new array)");
    m.def("add_arrays", &add_arrays, py::arg("a"), py::arg("b"), py::arg("out") = py::none(),
          "a + b of C-contiguous float32 arrays of one shape, into out (may be a) or a new array");
    m.def("relu_forward", &relu_forward, py::arg("x"),
          "max(x, 0) of a C-contiguous float32 array as NumPy's maximum (a new array; NaN stays NaN)");
    m.def("relu_backward", &relu_backward, py::arg("out"), py::arg("g"),
          "g * (out > 0) of C-contiguous float32 arrays, out ReLU's output (a new array of its shape)");
    m.def("gelu_erf_backward", &gelu_backward, py::arg("x"), py::arg("g"),
          "g * d/dx gelu(x) of C-contiguous float32 arrays (a new array of x's shape)");
}
