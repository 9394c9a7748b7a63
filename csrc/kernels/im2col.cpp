// im2col / col2im for 2-D convolutions over NCHW float32/float64 images: tensorbrain._C.im2col2d /
// col2im2d. The NumPy twins are tensorbrain/_ops/conv_columns.py's im2col2d / col2im2d (a strided
// window view copied once; a scattered add per kernel position), and tests/nn/test_conv_native.py
// holds the two together.
//
// Why native: the twins pay a padded copy of the input, and their strided copies and adds run
// over rows as short as the output width (4 values in a DCGAN generator's second layer), where
// NumPy's per-row overhead dominates: col2im of a 16x128x4x4 -> 10x10 transposed convolution
// took 9.0 ms against ~1 ms here (docs/training.md, "At torch's level"). Padding is handled by clipping each
// row's range instead of copying the input into a zero frame.
//
// The column array is (C*KH*KW rows) x (N columns blocks of OH*OW) with a row stride and an image
// stride given by the caller, so one kernel serves the "folded" layout (C*K, N*L) that one GEMM
// over the whole batch reads (row stride N*L, image stride L) and the per-image (N, C*K, L)
// layout (row stride L, image stride C*K*L).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "kernels/parallel.h"
#include "kernels/pyarray.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

using tb::kernels::is_f32;
using tb::kernels::shape_str;

struct Geom {
    py::ssize_t n, c, h, w, oh, ow;
    int kh, kw, sh, sw, ph, pw, dh, dw;
    py::ssize_t row_stride, image_stride;  // of the column array, in elements
};

// Output columns ox whose input column ox*sw + off lies in [0, w): [lo, hi).
inline void valid_range(py::ssize_t off, int sw, py::ssize_t w, py::ssize_t ow, py::ssize_t *lo, py::ssize_t *hi) {
    py::ssize_t a = off >= 0 ? 0 : (-off + sw - 1) / sw;
    py::ssize_t b = w - 1 - off < 0 ? 0 : (w - 1 - off) / sw + 1;
    if (b > ow) b = ow;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

// Per kernel column j: the input column offset and the valid output range (computed once: two
// divisions per (plane, position) cost as much as the copy itself with 1x1 outputs).
struct Cols {
    std::vector<py::ssize_t> off, lo, hi;
    explicit Cols(const Geom &g) : off(g.kw), lo(g.kw), hi(g.kw) {
        for (int j = 0; j < g.kw; ++j) {
            off[j] = static_cast<py::ssize_t>(j) * g.dw - g.pw;
            valid_range(off[j], g.sw, g.w, g.ow, &lo[j], &hi[j]);
        }
    }
};

// Channels [c0, c1) (each writes its own rows of the columns: callers split them across threads).
// With unit strides and the output as wide as the input (a "same" convolution), a kernel
// position's valid rows are one run of the input plane and of its column row: one memcpy, then
// the padding columns it copied across row ends set back to zero (a 3x3 conv net's 16- and
// 8-wide rows made one memcpy call per 64 or 32 bytes).
// The same rows' columns (kernel width 4, stride 2, padding 1; w == 2*ow or 2*ow + 1): kernel
// column j reads input pixel 2*ox + j - 1, so the row's even and odd pixels are split once and
// the four column rows are contiguous copies of them (j=1: even[ox], j=3: even[ox+1], j=2:
// odd[ox], j=0: odd[ox-1]; zero where that falls outside the row).
template <typename T>
inline void row_columns_k4s2(const T *src, T *d0, T *d1, T *d2, T *d3, py::ssize_t ow, py::ssize_t w, T *even, T *odd) {
    for (py::ssize_t q = 0; q < ow; ++q) {
        even[q] = src[2 * q];
        odd[q] = src[2 * q + 1];
    }
    even[ow] = w > 2 * ow ? src[2 * ow] : T(0);
    d0[0] = T(0);
    std::memcpy(d0 + 1, odd, sizeof(T) * static_cast<std::size_t>(ow - 1));
    std::memcpy(d1, even, sizeof(T) * static_cast<std::size_t>(ow));
    std::memcpy(d2, odd, sizeof(T) * static_cast<std::size_t>(ow));
    std::memcpy(d3, even + 1, sizeof(T) * static_cast<std::size_t>(ow));
}

template <typename T>
void im2col(const T *x, T *cols, const Geom &g, const Cols &r, py::ssize_t c0, py::ssize_t c1) {
    const py::ssize_t plane = g.h * g.w;
    const bool same_rows = g.sw == 1 && g.sh == 1 && g.ow == g.w;
    if (g.kw == 4 && g.sw == 2 && g.dw == 1 && g.pw == 1 && (g.w == 2 * g.ow || g.w == 2 * g.ow + 1)) {
        std::vector<T> eo(static_cast<std::size_t>(2 * (g.ow + 1)));
        for (py::ssize_t c = c0; c < c1; ++c)
            for (int i = 0; i < g.kh; ++i) {
                T *rows = cols + (c * g.kh + i) * g.kw * g.row_stride;   // kernel columns 0..3: row_stride apart
                for (py::ssize_t n = 0; n < g.n; ++n) {
                    const T *xp = x + (n * g.c + c) * plane;
                    T *dst = rows + n * g.image_stride;
                    for (py::ssize_t oy = 0; oy < g.oh; ++oy, dst += g.ow) {
                        const py::ssize_t y = oy * g.sh - g.ph + static_cast<py::ssize_t>(i) * g.dh;
                        if (y < 0 || y >= g.h) {
                            for (int j = 0; j < 4; ++j) std::memset(dst + j * g.row_stride, 0, sizeof(T) * static_cast<std::size_t>(g.ow));
                            continue;
                        }
                        row_columns_k4s2(xp + y * g.w, dst, dst + g.row_stride, dst + 2 * g.row_stride, dst + 3 * g.row_stride,
                                         g.ow, g.w, eo.data(), eo.data() + g.ow + 1);
                    }
                }
            }
        return;
    }
    for (py::ssize_t c = c0; c < c1; ++c)
        for (int i = 0; i < g.kh; ++i)
            for (int j = 0; j < g.kw; ++j) {
                T *row = cols + ((c * g.kh + i) * g.kw + j) * g.row_stride;
                const py::ssize_t off = r.off[j], lo = r.lo[j], hi = r.hi[j];
                for (py::ssize_t n = 0; n < g.n; ++n) {
                    const T *xp = x + (n * g.c + c) * plane;
                    T *dst = row + n * g.image_stride;
                    if (same_rows) {   // the valid rows in one copy, then their padding columns
                        const py::ssize_t y0 = static_cast<py::ssize_t>(i) * g.dh - g.ph;   // input row of oy = 0
                        const py::ssize_t a = std::max<py::ssize_t>(0, -y0),
                                          b = std::min<py::ssize_t>(g.oh, g.h - y0);   // valid oy: [a, b)
                        if (a >= b || lo >= hi) {
                            std::memset(dst, 0, sizeof(T) * static_cast<std::size_t>(g.oh * g.ow));
                            continue;
                        }
                        std::memset(dst, 0, sizeof(T) * static_cast<std::size_t>(a * g.ow + lo));
                        std::memcpy(dst + a * g.ow + lo, xp + (y0 + a) * g.w + off + lo,
                                    sizeof(T) * static_cast<std::size_t>((b - a - 1) * g.ow + hi - lo));
                        for (py::ssize_t oy = a; oy < b - 1; ++oy) {   // what the copy wrapped into
                            for (py::ssize_t ox = hi; ox < g.ow; ++ox) dst[oy * g.ow + ox] = T(0);
                            for (py::ssize_t ox = 0; ox < lo; ++ox) dst[(oy + 1) * g.ow + ox] = T(0);
                        }
                        std::memset(dst + (b - 1) * g.ow + hi, 0, sizeof(T) * static_cast<std::size_t>((g.oh - b + 1) * g.ow - hi));
                        continue;
                    }
                    for (py::ssize_t oy = 0; oy < g.oh; ++oy, dst += g.ow) {
                        const py::ssize_t y = oy * g.sh - g.ph + static_cast<py::ssize_t>(i) * g.dh;
                        if (y < 0 || y >= g.h || lo >= hi) {
                            std::memset(dst, 0, sizeof(T) * static_cast<std::size_t>(g.ow));
                            continue;
                        }
                        for (py::ssize_t ox = 0; ox < lo; ++ox) dst[ox] = T(0);
                        const T *src = xp + y * g.w + off;
                        if (g.sw == 1) {
                            std::memcpy(dst + lo, src + lo, sizeof(T) * static_cast<std::size_t>(hi - lo));
                        } else {
                            const py::ssize_t sw = g.sw;
                            for (py::ssize_t ox = lo; ox < hi; ++ox) dst[ox] = src[ox * sw];
                        }
                        for (py::ssize_t ox = hi; ox < g.ow; ++ox) dst[ox] = T(0);
                    }
                }
            }
}

// The adjoint: every image plane is zeroed, then each kernel position's column rows are added
// at their input pixels (positions outside the image, the padding, are dropped). One plane at
// a time, so the adds stay in L1; in the folded layout channel by channel (the channel's rows
// are one block of the column array, read in order: image by image, which sweeps the whole
// array once per image, took 6.1 against 0.4 ms for a 16x128x4x4 -> 8x8 transposed conv).
// Within a plane, kernel row by kernel row, then output row by output row, then kernel column
// by kernel column: the row's checks and pointers once for all kw columns (a transposed conv's
// rows are as short as its input: 4 values in a DCGAN generator's second layer, where that
// per-row work cost more than the adds; docs/training.md, "The conv net on an AMD EPYC").
// Outer items [o0, o1) (channels in the folded layout, else images: each owns its planes).
// Kernel width 4, stride 2, padding 1 along the rows (a DCGAN generator's transposed
// convolutions): an output row's even pixels 2q take columns j=1 at q and j=3 at q-1, its odd
// pixels 2q+1 take j=2 at q and j=0 at q+1, so the four column rows are added in one pass of two
// stores per q (four strided passes, one per kernel column, took 1.0-1.15 ms of DCGAN's
// two middle layers' col2im). Requires w == 2*ow or 2*ow + 1.
template <typename T>
inline void add_row_k4s2(T *dst, const T *s0, const T *s1, const T *s2, const T *s3, py::ssize_t ow, py::ssize_t w) {
    dst[0] += s1[0];
    if (ow == 1) {
        dst[1] += s2[0];
    } else {
        dst[1] += s2[0] + s0[1];
        for (py::ssize_t q = 1; q < ow - 1; ++q) {
            dst[2 * q] += s1[q] + s3[q - 1];
            dst[2 * q + 1] += s2[q] + s0[q + 1];
        }
        dst[2 * ow - 2] += s1[ow - 1] + s3[ow - 2];
        dst[2 * ow - 1] += s2[ow - 1];
    }
    if (w > 2 * ow) dst[2 * ow] += s3[ow - 1];
}

template <typename T>
void col2im(const T *cols, T *x, const Geom &g, const Cols &r, py::ssize_t o0, py::ssize_t o1) {
    const py::ssize_t plane = g.h * g.w;
    const bool by_channel = g.image_stride < g.row_stride;
    const bool k4s2 = g.kw == 4 && g.sw == 2 && g.dw == 1 && g.pw == 1 && (g.w == 2 * g.ow || g.w == 2 * g.ow + 1);
    for (py::ssize_t outer = o0; outer < o1; ++outer)
        for (py::ssize_t inner = 0; inner < (by_channel ? g.n : g.c); ++inner) {
            const py::ssize_t n = by_channel ? inner : outer, c = by_channel ? outer : inner;
            T *xp = x + (n * g.c + c) * plane;
            std::memset(xp, 0, sizeof(T) * static_cast<std::size_t>(plane));
            for (int i = 0; i < g.kh; ++i) {
                const T *rows = cols + (c * g.kh + i) * g.kw * g.row_stride + n * g.image_stride;
                const py::ssize_t y0 = static_cast<py::ssize_t>(i) * g.dh - g.ph;   // input row of oy = 0
                // output rows oy whose input row y0 + oy*sh lies in [0, h)
                py::ssize_t a, b;
                valid_range(y0, g.sh, g.h, g.oh, &a, &b);
                for (py::ssize_t oy = a; oy < b; ++oy) {
                    T *drow = xp + (y0 + oy * g.sh) * g.w;
                    const T *srow = rows + oy * g.ow;
                    if (k4s2) {
                        add_row_k4s2(drow, srow, srow + g.row_stride, srow + 2 * g.row_stride, srow + 3 * g.row_stride,
                                     g.ow, g.w);
                        continue;
                    }
                    for (int j = 0; j < g.kw; ++j) {
                        const py::ssize_t lo = r.lo[j], hi = r.hi[j];
                        const T *src = srow + j * g.row_stride;
                        T *dst = drow + r.off[j];
                        if (g.sw == 1) {
                            for (py::ssize_t ox = lo; ox < hi; ++ox) dst[ox] += src[ox];
                        } else {
                            const py::ssize_t sw = g.sw;
                            for (py::ssize_t ox = lo; ox < hi; ++ox) dst[ox * sw] += src[ox];
                        }
                    }
                }
            }
        }
}

Geom geometry(const char *fn, py::ssize_t n, py::ssize_t c, py::ssize_t h, py::ssize_t w, int kh, int kw, int sh,
              int sw, int ph, int pw, int dh, int dw, py::ssize_t oh, py::ssize_t ow, bool fold) {
    if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || dh < 1 || dw < 1 || ph < 0 || pw < 0 || oh < 1 || ow < 1)
        throw py::value_error(std::string(fn) + ": bad window geometry");
    const py::ssize_t L = oh * ow, K = c * kh * kw;
    return Geom{n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, fold ? n * L : L, fold ? L : K * L};
}

// (C*KH*KW, N*OH*OW) when fold, else (N, C*KH*KW, OH*OW).
py::array py_im2col(py::array x, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, py::ssize_t oh,
                    py::ssize_t ow, bool fold) {
    const char *fn = "im2col2d";
    const bool f32 = is_f32(fn, x, "x");
    if (x.ndim() != 4) throw py::value_error(std::string(fn) + ": expected (N, C, H, W), got shape " + shape_str(x));
    Geom g = geometry(fn, x.shape(0), x.shape(1), x.shape(2), x.shape(3), kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, fold);
    const py::ssize_t K = g.c * kh * kw, L = oh * ow;
    py::array cols = fold ? py::array(x.dtype(), {K, g.n * L}) : py::array(x.dtype(), {g.n, K, L});
    const void *src = x.data();
    void *dst = cols.mutable_data();
    py::gil_scoped_release nogil;
    const Cols r(g);
    // split by channel: each writes KH*KW*N*OH*OW values
    tb::kernels::parallel_for(static_cast<std::size_t>(g.c), tb::kernels::items_per_grain(static_cast<std::size_t>(kh * kw * g.n * L)), 1,
                              [&](std::size_t c0, std::size_t c1) {
        const auto a = static_cast<py::ssize_t>(c0), b = static_cast<py::ssize_t>(c1);
        if (f32)
            im2col(static_cast<const float *>(src), static_cast<float *>(dst), g, r, a, b);
        else
            im2col(static_cast<const double *>(src), static_cast<double *>(dst), g, r, a, b);
    });
    return cols;
}

py::array py_col2im(py::array cols, py::ssize_t n, py::ssize_t c, py::ssize_t h, py::ssize_t w, int kh, int kw, int sh,
                    int sw, int ph, int pw, int dh, int dw, py::ssize_t oh, py::ssize_t ow, bool fold) {
    const char *fn = "col2im2d";
    const bool f32 = is_f32(fn, cols, "cols");
    if (n < 0 || c < 1 || h < 1 || w < 1) throw py::value_error(std::string(fn) + ": bad image shape");
    Geom g = geometry(fn, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, fold);
    const py::ssize_t K = c * kh * kw, L = oh * ow;
    const bool ok = fold ? cols.ndim() == 2 && cols.shape(0) == K && cols.shape(1) == n * L
                         : cols.ndim() == 3 && cols.shape(0) == n && cols.shape(1) == K && cols.shape(2) == L;
    if (!ok)
        throw py::value_error(std::string(fn) + ": cols of shape " + shape_str(cols) + " do not match " +
                              std::to_string(n) + " images of " + std::to_string(c) + " channels, kernel " +
                              std::to_string(kh) + "x" + std::to_string(kw) + ", output " + std::to_string(oh) + "x" +
                              std::to_string(ow) + (fold ? " (folded layout)" : ""));
    py::array x(cols.dtype(), {n, c, h, w});
    const void *src = cols.data();
    void *dst = x.mutable_data();
    py::gil_scoped_release nogil;
    const Cols r(g);
    const bool by_channel = g.image_stride < g.row_stride;
    const py::ssize_t outer = by_channel ? c : n;
    tb::kernels::parallel_for(static_cast<std::size_t>(outer),
                              tb::kernels::items_per_grain(static_cast<std::size_t>(K * n * L / (outer ? outer : 1))), 1,
                              [&](std::size_t o0, std::size_t o1) {
        const auto a = static_cast<py::ssize_t>(o0), b = static_cast<py::ssize_t>(o1);
        if (f32)
            col2im(static_cast<const float *>(src), static_cast<float *>(dst), g, r, a, b);
        else
            col2im(static_cast<const double *>(src), static_cast<double *>(dst), g, r, a, b);
    });
    return x;
}

// (A, B, L) -> (B, A, L) (+ bias[a] on every value of row a): the channel-major layout of a GEMM
// over the whole batch and back (conv_columns.py's _to/_from_channel_major), one memcpy or add
// per length-L row, the rows split across threads.
template <typename T>
void swap_rows(const T *src, T *dst, const T *bias, py::ssize_t A, py::ssize_t B, py::ssize_t L, std::size_t r0,
               std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {   // r: a row of dst, (b, a)
        const auto b = static_cast<py::ssize_t>(r) / A, a = static_cast<py::ssize_t>(r) % A;
        const T *s = src + (a * B + b) * L;
        T *d = dst + static_cast<py::ssize_t>(r) * L;
        if (bias == nullptr) {
            std::memcpy(d, s, sizeof(T) * static_cast<std::size_t>(L));
        } else {
            const T v = bias[a];
            for (py::ssize_t i = 0; i < L; ++i) d[i] = s[i] + v;
        }
    }
}

py::array py_swap_leading_axes(py::array x, std::optional<py::array> bias) {
    const char *fn = "swap_leading_axes";
    const bool f32 = is_f32(fn, x, "x");
    if (x.ndim() != 3) throw py::value_error(std::string(fn) + ": expected (A, B, L), got shape " + shape_str(x));
    const py::ssize_t A = x.shape(0), B = x.shape(1), L = x.shape(2);
    if (bias.has_value() && (!bias->dtype().is(x.dtype()) || bias->ndim() != 1 || bias->shape(0) != A ||
                             !(bias->flags() & py::array::c_style)))
        throw py::value_error(std::string(fn) + ": bias must be a C-contiguous (" + std::to_string(A) +
                              ",) array of x's dtype, got shape " + shape_str(*bias));
    py::array out(x.dtype(), {B, A, L});
    const void *src = x.data(), *pb = bias.has_value() ? bias->data() : nullptr;
    void *dst = out.mutable_data();
    py::gil_scoped_release nogil;
    tb::kernels::parallel_for(static_cast<std::size_t>(A * B), tb::kernels::items_per_grain(static_cast<std::size_t>(L)), 1,
                              [&](std::size_t r0, std::size_t r1) {
        if (f32)
            swap_rows(static_cast<const float *>(src), static_cast<float *>(dst), static_cast<const float *>(pb), A, B, L,
                      r0, r1);
        else
            swap_rows(static_cast<const double *>(src), static_cast<double *>(dst), static_cast<const double *>(pb), A,
                      B, L, r0, r1);
    });
    return out;
}

}  // namespace

void init_im2col(py::module_ &m) {
    m.def("swap_leading_axes", &py_swap_leading_axes, py::arg("x"), py::arg("bias") = py::none(),
          "(A, B, L) -> (B, A, L) of a C-contiguous float32/float64 array (a new one), bias[a] added to row a's "
          "values when given; the rows split across threads");
    m.def("im2col2d", &py_im2col, py::arg("x"), py::arg("kh"), py::arg("kw"), py::arg("sh"), py::arg("sw"),
          py::arg("ph"), py::arg("pw"), py::arg("dh"), py::arg("dw"), py::arg("oh"), py::arg("ow"), py::arg("fold"),
          "the columns of a C-contiguous float32/float64 (N, C, H, W) array, zero padding included: "
          "(C*KH*KW, N*OH*OW) with fold, else (N, C*KH*KW, OH*OW)");
    m.def("col2im2d", &py_col2im, py::arg("cols"), py::arg("n"), py::arg("c"), py::arg("h"), py::arg("w"),
          py::arg("kh"), py::arg("kw"), py::arg("sh"), py::arg("sw"), py::arg("ph"), py::arg("pw"), py::arg("dh"),
          py::arg("dw"), py::arg("oh"), py::arg("ow"), py::arg("fold"),
          "the adjoint of im2col2d: the (N, C, H, W) sum of the columns at their input pixels (padding dropped)");
}
