// 2-D max pooling over NCHW float32/float64 images: forward with the winner of every window,
// backward by scattering each output gradient to its winner. tensorbrain._C.max_pool2d_forward /
// max_pool2d_backward; the NumPy twin is the strided-slice code in tensorbrain/_ops/conv.py,
// and tests/nn/test_pool_native.py holds the two together.
//
// Why native: the twin makes KH*KW strided passes over the input for the max and, in backward,
// as many again to recover which position won (NumPy cannot track an argmax through
// np.maximum); one pass here does both (measured in docs/functional.md).
//
// The winner is the first position (row-major within the window) holding the maximum, as in
// PyTorch and the twin; a NaN wins over numbers, the first NaN of a window. Windows are clipped
// to the image (padding counts as -inf and never wins); a window wholly in the padding (which
// PyTorch's size rules never make) gives -inf and winner -1, and no gradient.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "kernels/pyarray.h"
#include "kernels/act.h"
#include "kernels/parallel.h"
#include "kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

namespace py = pybind11;

namespace {

struct Geometry {
    py::ssize_t planes, h, w, oh, ow;
    int kh, kw, sh, sw, ph, pw, dh, dw;
};

// best/where[ox] = the max so far and its index, updated with row[ox * stride] (index base +
// ox * stride). (A compile-time stride of 2 measured slower here: 2.8 against 1.7 ms for
// 32x32x32x32.)
template <typename T>
inline void window_pass(const T *row, T *best, std::int32_t *where, std::int32_t base, py::ssize_t lo,
                        py::ssize_t hi, int stride) {
    const py::ssize_t sw = stride;
    for (py::ssize_t ox = lo; ox < hi; ++ox) {
        const T v = row[ox * sw];
        const T b = best[ox];
        const bool take = (v > b) | ((v != v) & (b == b)) | (where[ox] < 0);
        best[ox] = take ? v : b;
        where[ox] = take ? base + static_cast<std::int32_t>(ox * sw) : where[ox];
    }
}

// One output row at a time: for each window position (i, j) in row-major order, one branch-free
// pass over the row's outputs (strided loads the compiler vectorises), keeping the running max
// and its index. A later position replaces the max only when strictly greater (or a NaN over a
// number), so the first maximum wins.
// Planes [p0, p1) (independent: callers split them across threads).
template <typename T>
void forward(const T *x, T *out, std::int32_t *arg, const Geometry &g, py::ssize_t p0, py::ssize_t p1) {
    const py::ssize_t plane = g.h * g.w, oplane = g.oh * g.ow;
    for (py::ssize_t p = p0; p < p1; ++p) {
        const T *xp = x + p * plane;
        for (py::ssize_t oy = 0; oy < g.oh; ++oy) {
            T *best = out + p * oplane + oy * g.ow;
            std::int32_t *where = arg + p * oplane + oy * g.ow;
            for (py::ssize_t ox = 0; ox < g.ow; ++ox) {
                best[ox] = -std::numeric_limits<T>::infinity();
                where[ox] = -1;
            }
            for (int i = 0; i < g.kh; ++i) {
                const py::ssize_t y = oy * g.sh - g.ph + static_cast<py::ssize_t>(i) * g.dh;
                if (y < 0 || y >= g.h) continue;
                const T *row = xp + y * g.w;
                for (int j = 0; j < g.kw; ++j) {
                    const py::ssize_t off = static_cast<py::ssize_t>(j) * g.dw - g.pw;  // xx = ox*sw + off
                    py::ssize_t lo = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
                    py::ssize_t hi = g.w - 1 - off < 0 ? 0 : (g.w - 1 - off) / g.sw + 1;
                    if (hi > g.ow) hi = g.ow;
                    const std::int32_t base = static_cast<std::int32_t>(y * g.w + off);
                    window_pass(row + off, best, where, base, lo, hi, g.sw);
                }
            }
        }
    }
}

// The common nn.MaxPool2d(2) on float32 (2x2 windows, stride 2, no padding or dilation, every
// window inside the image) where the CPU has AVX-512: the same winners as forward, each output
// from its four values in one vector pass (fused_avx512.cpp) instead of four strided passes over
// a row (the conv net's three pools: 4.6 -> 0.6 ms on one thread).
void forward2x2(const float *x, float *out, std::int32_t *arg, const Geometry &g, py::ssize_t p0, py::ssize_t p1) {
    const py::ssize_t plane = g.h * g.w, oplane = g.oh * g.ow;
    for (py::ssize_t p = p0; p < p1; ++p)
        for (py::ssize_t oy = 0; oy < g.oh; ++oy) {
            const float *r0 = x + p * plane + 2 * oy * g.w;
            tb::kernels::avx512::max_pool2x2_row(r0, r0 + g.w, out + p * oplane + oy * g.ow, arg + p * oplane + oy * g.ow,
                                                 static_cast<std::int32_t>(2 * oy * g.w), static_cast<std::int32_t>(g.w),
                                                 static_cast<std::size_t>(g.ow));
        }
}

// Planes [p0, p1).
template <typename T>
void backward(const T *grad, const std::int32_t *arg, T *gx, py::ssize_t p0, py::ssize_t p1, py::ssize_t plane,
              py::ssize_t oplane) {
    std::memset(gx + p0 * plane, 0, sizeof(T) * static_cast<std::size_t>((p1 - p0) * plane));
    for (py::ssize_t p = p0; p < p1; ++p) {
        const T *gp = grad + p * oplane;
        const std::int32_t *ap = arg + p * oplane;
        T *xp = gx + p * plane;
        for (py::ssize_t o = 0; o < oplane; ++o)
            if (ap[o] >= 0) xp[ap[o]] += gp[o];
    }
}

using tb::kernels::shape_str;

void check_input(const char *fn, const py::array &x) {
    if (x.ndim() != 4)
        throw py::value_error(std::string(fn) + ": expected a 4-D (N, C, H, W) array, got shape " + shape_str(x));
    if (!(x.flags() & py::array::c_style))
        throw py::value_error(std::string(fn) + ": the input must be C-contiguous (got shape " + shape_str(x) + ")");
    if (x.dtype().kind() != 'f' || (x.itemsize() != 4 && x.itemsize() != 8))
        throw py::type_error(std::string(fn) + ": float32 or float64 only, got " +
                             py::str(x.dtype()).cast<std::string>() + " (the NumPy twin takes the others)");
}

// (out, arg): the pooled images and, per output, the flat H*W index of its winner (int32).
py::tuple py_forward(py::array x, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, py::ssize_t oh,
                     py::ssize_t ow) {
    const char *fn = "max_pool2d_forward";
    check_input(fn, x);
    if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || dh < 1 || dw < 1 || ph < 0 || pw < 0 || oh < 0 || ow < 0)
        throw py::value_error(std::string(fn) + ": bad window geometry");
    Geometry g{x.shape(0) * x.shape(1), x.shape(2), x.shape(3), oh, ow, kh, kw, sh, sw, ph, pw, dh, dw};
    if (g.h * g.w > std::numeric_limits<std::int32_t>::max())
        throw py::value_error(std::string(fn) + ": images over 2**31 pixels");
    py::array out(x.dtype(), {x.shape(0), x.shape(1), oh, ow});
    py::array_t<std::int32_t> arg({x.shape(0), x.shape(1), oh, ow});
    const void *src = x.data();
    void *dst = out.mutable_data();
    std::int32_t *ap = arg.mutable_data();
    const bool f32 = x.itemsize() == 4;
    const bool two = f32 && tb::kernels::use_avx512() && kh == 2 && kw == 2 && sh == 2 && sw == 2 && ph == 0 &&
                     pw == 0 && dh == 1 && dw == 1 && 2 * oh <= g.h && 2 * ow <= g.w;
    {
        py::gil_scoped_release nogil;
        // a plane reads about KH*KW/(SH*SW) inputs per output
        const auto work = static_cast<std::size_t>(g.oh * g.ow * kh * kw);
        tb::kernels::parallel_for(static_cast<std::size_t>(g.planes), tb::kernels::items_per_grain(work), 1,
                                  [&](std::size_t p0, std::size_t p1) {
            const auto a = static_cast<py::ssize_t>(p0), b = static_cast<py::ssize_t>(p1);
            if (two)
                forward2x2(static_cast<const float *>(src), static_cast<float *>(dst), ap, g, a, b);
            else if (f32)
                forward(static_cast<const float *>(src), static_cast<float *>(dst), ap, g, a, b);
            else
                forward(static_cast<const double *>(src), static_cast<double *>(dst), ap, g, a, b);
        });
    }
    return py::make_tuple(out, arg);
}

// The input gradient (N, C, H, W): zeros, plus each output gradient added at its winner.
py::array py_backward(py::array grad, py::array_t<std::int32_t, py::array::c_style> arg, py::ssize_t h,
                      py::ssize_t w) {
    const char *fn = "max_pool2d_backward";
    check_input(fn, grad);
    if (arg.ndim() != 4 || !std::equal(grad.shape(), grad.shape() + 4, arg.shape()))
        throw py::value_error(std::string(fn) + ": grad " + shape_str(grad) + " and winners " + shape_str(arg) +
                              " differ in shape");
    py::array gx(grad.dtype(), {grad.shape(0), grad.shape(1), h, w});
    const py::ssize_t planes = grad.shape(0) * grad.shape(1), oplane = grad.shape(2) * grad.shape(3);
    const std::int32_t *ap = arg.data();
    for (py::ssize_t i = 0, n = planes * oplane; i < n; ++i)
        if (ap[i] < -1 || ap[i] >= h * w)
            throw py::value_error(std::string(fn) + ": a winner index lies outside the " + std::to_string(h) + "x" +
                                  std::to_string(w) + " image");
    const void *gp = grad.data();
    void *xp = gx.mutable_data();
    const bool f32 = grad.itemsize() == 4;
    {
        py::gil_scoped_release nogil;
        tb::kernels::parallel_for(static_cast<std::size_t>(planes), tb::kernels::items_per_grain(static_cast<std::size_t>(h * w + oplane)), 1,
                                  [&](std::size_t p0, std::size_t p1) {
            const auto a = static_cast<py::ssize_t>(p0), b = static_cast<py::ssize_t>(p1);
            if (f32)
                backward(static_cast<const float *>(gp), ap, static_cast<float *>(xp), a, b, h * w, oplane);
            else
                backward(static_cast<const double *>(gp), ap, static_cast<double *>(xp), a, b, h * w, oplane);
        });
    }
    return gx;
}

}  // namespace

void init_pool(py::module_ &m) {
    m.def("max_pool2d_forward", &py_forward, py::arg("x"), py::arg("kh"), py::arg("kw"), py::arg("sh"),
          py::arg("sw"), py::arg("ph"), py::arg("pw"), py::arg("dh"), py::arg("dw"), py::arg("oh"), py::arg("ow"),
          "(out, winners): 2-D max pooling of a C-contiguous float32/float64 NCHW array; winners are flat H*W "
          "indices (int32), the first maximum of each window (a NaN wins)");
    m.def("max_pool2d_backward", &py_backward, py::arg("grad"), py::arg("winners"), py::arg("h"), py::arg("w"),
          "the input gradient: each output gradient added at its window's winner");
}
