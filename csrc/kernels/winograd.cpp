// Winograd F(2x2, 3x3) transforms for stride-1 3x3 convolutions over NCHW float32/float64 images
// (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): tensorbrain._C.
// winograd_input / winograd_output and their adjoints winograd_input_grad / winograd_output_grad.
// The NumPy twins and the op that uses them (the filter transforms, the 16 products, the
// backward) are in tensorbrain/_ops/winograd.py; tests/nn/test_winograd.py holds the two together.
//
// Why: a 3x3 convolution as im2col + GEMM multiplies 9 taps per output; on 2x2 output tiles the
// transformed products need 16 per 4 outputs, 2.25x fewer, in 16 GEMMs (one per transformed
// position xi = 4a + b) that stay large enough for BLAS. On the conv net's 32->64 layer at 16x16
// (batch 32, one thread) the three products of a step took 7.4 ms against 11.8 (docs/training.md,
// "Winograd").
//
// Layouts: V (16, C, T) and M (16, OC, T), T = N * TH * TW tiles numbered (n, tile row, tile
// column), tile (i, j) covering output rows 2i, 2i+1 and columns 2j, 2j+1 and reading input rows
// 2i - pt .. 2i - pt + 3 (zero outside the image). Each image plane is first copied into a zero
// frame of (2 TH + 2) x (2 TW + 2) values, so the tile loops need no bounds checks; planes split
// across the pool (parallel.h), each written by one thread.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "kernels/parallel.h"
#include "kernels/pyarray.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

using tb::kernels::is_f32;
using tb::kernels::shape_str;

struct Tiles {
    py::ssize_t n, c, h, w, th, tw, pt, pl;
    py::ssize_t T() const { return n * th * tw; }
    py::ssize_t rows() const { return 2 * th + 2; }   // the zero frame of one plane
    py::ssize_t cols() const { return 2 * tw + 2; }
};

// f(c, n0, n1) over every channel c and every block [n0, n1) of images (about 16k tile values),
// the channels split across the pool. A block's tiles of one channel are contiguous in the
// (16, channels, T) arrays, so each transformed position is one run of (n1 - n0) * P values and
// the elementwise loops below run that long (a plane's 64 tiles on a 16x16 image were too few).
template <class F>
void over_channel_blocks(py::ssize_t n, py::ssize_t channels, py::ssize_t P, const F &f) {
    const py::ssize_t block = std::max<py::ssize_t>(1, (py::ssize_t{1} << 14) / std::max<py::ssize_t>(16 * P, 1));
    tb::kernels::parallel_for(static_cast<std::size_t>(channels),
                              tb::kernels::items_per_grain(static_cast<std::size_t>(16 * P * n)), 1,
                              [&](std::size_t c0, std::size_t c1) {
        for (std::size_t c = c0; c < c1; ++c)
            for (py::ssize_t n0 = 0; n0 < n; n0 += block)
                f(static_cast<py::ssize_t>(c), n0, std::min(n, n0 + block));
    });
}

// Uninitialized scratch (every value is written before it is read): zero-filling the blocks'
// buffers took a tenth of the output transform's time.
template <typename T>
std::unique_ptr<T[]> scratch(py::ssize_t n) {
    return std::unique_ptr<T[]>(new T[static_cast<std::size_t>(std::max<py::ssize_t>(n, 1))]);
}

// Each transform works on a block's tiles in two steps: a gather (or scatter) between the image
// planes and a (16, L) or (4, L) array of the tiles' values, then the transform's arithmetic,
// elementwise over all L tiles of the block in long unit-stride loops the compiler vectorizes.
// Tile row by tile row (loops as long as a row's 8 tiles) the output transform of the conv net's
// 32->64 layer took 1.7 ms; value by value, 1.8 ms.

// out[xi][t] = (B^T d B)[xi] for the 4x4 tiles d[xi][t] (xi = 4r + s), elementwise over L tiles.
template <typename T>
void input_math(const T *__restrict d, T *__restrict v, py::ssize_t L, py::ssize_t vs) {
    const auto tmp = scratch<T>(16 * L);
    T *__restrict t = tmp.get();
    for (int s = 0; s < 4; ++s) {   // rows: (B^T d)[a][s]
        const T *d0 = d + s * L, *d1 = d + (4 + s) * L, *d2 = d + (8 + s) * L, *d3 = d + (12 + s) * L;
        T *t0 = t + s * L, *t1 = t + (4 + s) * L, *t2 = t + (8 + s) * L, *t3 = t + (12 + s) * L;
        for (py::ssize_t i = 0; i < L; ++i) {
            t0[i] = d0[i] - d2[i];
            t1[i] = d1[i] + d2[i];
            t2[i] = d2[i] - d1[i];
            t3[i] = d1[i] - d3[i];
        }
    }
    for (int a = 0; a < 4; ++a) {   // columns: ((B^T d) B)[a][b]
        const T *t0 = t + 4 * a * L, *t1 = t0 + L, *t2 = t1 + L, *t3 = t2 + L;
        T *v0 = v + 4 * a * vs, *v1 = v0 + vs, *v2 = v1 + vs, *v3 = v2 + vs;
        for (py::ssize_t i = 0; i < L; ++i) {
            v0[i] = t0[i] - t2[i];
            v1[i] = t1[i] + t2[i];
            v2[i] = t2[i] - t1[i];
            v3[i] = t1[i] - t3[i];
        }
    }
}

// The adjoint: gd[xi][t] = (B v B^T)[xi], elementwise over L tiles.
template <typename T>
void input_grad_math(const T *__restrict v, py::ssize_t vs, T *__restrict gd, py::ssize_t L) {
    const auto tmp = scratch<T>(16 * L);
    T *__restrict k = tmp.get();
    for (int b = 0; b < 4; ++b) {   // rows: k[r][b] = sum_a B^T[a][r] v[a][b]
        const T *v0 = v + b * vs, *v1 = v + (4 + b) * vs, *v2 = v + (8 + b) * vs, *v3 = v + (12 + b) * vs;
        T *k0 = k + b * L, *k1 = k + (4 + b) * L, *k2 = k + (8 + b) * L, *k3 = k + (12 + b) * L;
        for (py::ssize_t i = 0; i < L; ++i) {
            k0[i] = v0[i];
            k1[i] = v1[i] - v2[i] + v3[i];
            k2[i] = v1[i] + v2[i] - v0[i];
            k3[i] = -v3[i];
        }
    }
    for (int r = 0; r < 4; ++r) {   // columns: gd[r][s] = sum_b k[r][b] B^T[b][s]
        const T *k0 = k + 4 * r * L, *k1 = k0 + L, *k2 = k1 + L, *k3 = k2 + L;
        T *g0 = gd + 4 * r * L, *g1 = g0 + L, *g2 = g1 + L, *g3 = g2 + L;
        for (py::ssize_t i = 0; i < L; ++i) {
            g0[i] = k0[i];
            g1[i] = k1[i] - k2[i] + k3[i];
            g2[i] = k1[i] + k2[i] - k0[i];
            g3[i] = -k3[i];
        }
    }
}

// y[rs][t] = (A^T m A)[r][s] + bias, elementwise over L tiles.
template <typename T>
void output_math(const T *__restrict m, py::ssize_t ms, T *__restrict y, T bias, py::ssize_t L) {
    const auto tmp = scratch<T>(8 * L);
    T *__restrict u = tmp.get();
    for (int b = 0; b < 4; ++b) {   // rows: u[r][b] = (A^T m)[r][b]
        const T *m0 = m + b * ms, *m1 = m + (4 + b) * ms, *m2 = m + (8 + b) * ms, *m3 = m + (12 + b) * ms;
        T *u0 = u + b * L, *u1 = u + (4 + b) * L;
        for (py::ssize_t i = 0; i < L; ++i) {
            u0[i] = m0[i] + m1[i] + m2[i];
            u1[i] = m1[i] - m2[i] - m3[i];
        }
    }
    for (int r = 0; r < 2; ++r) {   // columns: (A^T m A)[r][s]
        const T *u0 = u + 4 * r * L, *u1 = u0 + L, *u2 = u1 + L, *u3 = u2 + L;
        T *y0 = y + 2 * r * L, *y1 = y0 + L;
        for (py::ssize_t i = 0; i < L; ++i) {
            y0[i] = u0[i] + u1[i] + u2[i] + bias;
            y1[i] = u1[i] - u2[i] - u3[i] + bias;
        }
    }
}

// The adjoint: gm[xi][t] = (A g A^T)[a][b] of the 2x2 tiles g[rs][t], elementwise over L tiles.
template <typename T>
void output_grad_math(const T *__restrict g, T *__restrict gm, py::ssize_t L, py::ssize_t ms) {
    const T *g00 = g, *g01 = g + L, *g10 = g + 2 * L, *g11 = g + 3 * L;
    const auto tmp = scratch<T>(8 * L);
    T *__restrict h = tmp.get();
    for (int s = 0; s < 2; ++s) {   // rows: h[a][s] = (A g)[a][s]
        const T *a0 = s == 0 ? g00 : g01, *a1 = s == 0 ? g10 : g11;
        T *h0 = h + s * L, *h1 = h + (2 + s) * L, *h2 = h + (4 + s) * L, *h3 = h + (6 + s) * L;
        for (py::ssize_t i = 0; i < L; ++i) {
            h0[i] = a0[i];
            h1[i] = a0[i] + a1[i];
            h2[i] = a0[i] - a1[i];
            h3[i] = -a1[i];
        }
    }
    for (int a = 0; a < 4; ++a) {   // columns: (A g A^T)[a][b]
        const T *h0 = h + 2 * a * L, *h1 = h0 + L;
        T *v0 = gm + 4 * a * ms, *v1 = v0 + ms, *v2 = v1 + ms, *v3 = v2 + ms;
        for (py::ssize_t i = 0; i < L; ++i) {
            v0[i] = h0[i];
            v1[i] = h0[i] + h1[i];
            v2[i] = h0[i] - h1[i];
            v3[i] = -h1[i];
        }
    }
}

// V[4r+s][c][t] = (B^T d B)[r][s] for each 4x4 input tile d of plane (n, c).
template <typename T>
void input_transform(const T *x, T *V, const Tiles &g) {
    const py::ssize_t R = g.rows(), Q = g.cols(), plane = g.h * g.w, xi_stride = g.c * g.T(), P = g.th * g.tw;
    over_channel_blocks(g.n, g.c, P, [&](py::ssize_t c, py::ssize_t n0, py::ssize_t n1) {
        const py::ssize_t L = (n1 - n0) * P;
        std::vector<T> frame(static_cast<std::size_t>(R * Q), T(0));   // the border stays zero
        const auto d = scratch<T>(16 * L);
        for (py::ssize_t n = n0; n < n1; ++n) {   // gather each plane's tiles
            const T *src = x + (n * g.c + c) * plane;
            for (py::ssize_t y = 0; y < g.h; ++y) {
                T *row = &frame[(y + g.pt) * Q + g.pl];
                const T *in = src + y * g.w;
                for (py::ssize_t q = 0; q < g.w; ++q) row[q] = in[q];
            }
            T *db = d.get() + (n - n0) * P;
            for (int r = 0; r < 4; ++r)
                for (int s = 0; s < 4; ++s) {
                    T *dst = db + (4 * r + s) * L;
                    for (py::ssize_t i = 0; i < g.th; ++i) {
                        const T *row = &frame[(2 * i + r) * Q + s];
                        for (py::ssize_t j = 0; j < g.tw; ++j) dst[i * g.tw + j] = row[2 * j];
                    }
                }
        }
        input_math(d.get(), V + c * g.T() + n0 * P, L, xi_stride);
    });
}

// The adjoint of input_transform: gx[n][c] = the sum over tiles of B gv B^T at their input
// positions (those in the padding dropped).
template <typename T>
void input_transform_grad(const T *gV, T *gx, const Tiles &g) {
    const py::ssize_t R = g.rows(), Q = g.cols(), plane = g.h * g.w, xi_stride = g.c * g.T(), P = g.th * g.tw;
    over_channel_blocks(g.n, g.c, P, [&](py::ssize_t c, py::ssize_t n0, py::ssize_t n1) {
        const py::ssize_t L = (n1 - n0) * P;
        std::vector<T> frame(static_cast<std::size_t>(R * Q));
        const auto gd = scratch<T>(16 * L);
        input_grad_math(gV + c * g.T() + n0 * P, xi_stride, gd.get(), L);
        for (py::ssize_t n = n0; n < n1; ++n) {   // scatter-add each plane's tiles
            std::fill(frame.begin(), frame.end(), T(0));
            const T *gb = gd.get() + (n - n0) * P;
            for (int r = 0; r < 4; ++r)
                for (int s = 0; s < 4; ++s) {
                    const T *src = gb + (4 * r + s) * L;
                    for (py::ssize_t i = 0; i < g.th; ++i) {
                        T *row = &frame[(2 * i + r) * Q + s];
                        for (py::ssize_t j = 0; j < g.tw; ++j) row[2 * j] += src[i * g.tw + j];
                    }
                }
            T *dst = gx + (n * g.c + c) * plane;
            for (py::ssize_t y = 0; y < g.h; ++y) {
                const T *row = &frame[(y + g.pt) * Q + g.pl];
                T *out = dst + y * g.w;
                for (py::ssize_t q = 0; q < g.w; ++q) out[q] = row[q];
            }
        }
    });
}

// y[n][oc] tile (i, j) = A^T m A (+ bias[oc]) for m = M[.][oc][t], cropped to ho x wo.
template <typename T>
void output_transform(const T *M, T *y, const T *bias, const Tiles &g, py::ssize_t oc, py::ssize_t ho, py::ssize_t wo) {
    const py::ssize_t xi_stride = oc * g.T(), P = g.th * g.tw;
    over_channel_blocks(g.n, oc, P, [&](py::ssize_t o, py::ssize_t n0, py::ssize_t n1) {
        const py::ssize_t L = (n1 - n0) * P;
        const auto yt = scratch<T>(4 * L);
        output_math(M + o * g.T() + n0 * P, xi_stride, yt.get(), bias != nullptr ? bias[o] : T(0), L);
        for (py::ssize_t n = n0; n < n1; ++n) {   // scatter each plane's tiles, cropped to ho x wo
            const T *yb = yt.get() + (n - n0) * P;
            T *out = y + (n * oc + o) * ho * wo;
            for (int r = 0; r < 2; ++r)
                for (int s = 0; s < 2; ++s) {
                    const T *src = yb + (2 * r + s) * L;
                    const py::ssize_t jn = (wo - s + 1) / 2;
                    for (py::ssize_t i = 0; i < g.th && 2 * i + r < ho; ++i) {
                        T *row = out + (2 * i + r) * wo + s;
                        for (py::ssize_t j = 0; j < jn; ++j) row[2 * j] = src[i * g.tw + j];
                    }
                }
        }
    });
}

// The adjoint of output_transform (without the bias): gM[.][oc][t] = A g A^T for each 2x2 tile
// g of the output gradient (zero past ho x wo).
template <typename T>
void output_transform_grad(const T *gy, T *gM, const Tiles &g, py::ssize_t oc, py::ssize_t ho, py::ssize_t wo) {
    const py::ssize_t xi_stride = oc * g.T(), P = g.th * g.tw;
    over_channel_blocks(g.n, oc, P, [&](py::ssize_t o, py::ssize_t n0, py::ssize_t n1) {
        const py::ssize_t L = (n1 - n0) * P;
        const auto gt = scratch<T>(4 * L);
        for (py::ssize_t n = n0; n < n1; ++n) {   // gather each plane's tiles, zero past ho x wo
            const T *src = gy + (n * oc + o) * ho * wo;
            T *gb = gt.get() + (n - n0) * P;
            for (int r = 0; r < 2; ++r)
                for (int s = 0; s < 2; ++s) {
                    T *dst = gb + (2 * r + s) * L;
                    const py::ssize_t jn = (wo - s + 1) / 2;
                    for (py::ssize_t i = 0; i < g.th; ++i) {
                        T *d = dst + i * g.tw;
                        if (2 * i + r >= ho) {
                            for (py::ssize_t j = 0; j < g.tw; ++j) d[j] = T(0);
                            continue;
                        }
                        const T *row = src + (2 * i + r) * wo + s;
                        for (py::ssize_t j = 0; j < jn; ++j) d[j] = row[2 * j];
                        for (py::ssize_t j = jn; j < g.tw; ++j) d[j] = T(0);
                    }
                }
        }
        output_grad_math(gt.get(), gM + o * g.T() + n0 * P, L, xi_stride);
    });
}

Tiles tiles(const char *fn, py::ssize_t n, py::ssize_t c, py::ssize_t h, py::ssize_t w, py::ssize_t th, py::ssize_t tw,
            py::ssize_t pt, py::ssize_t pl) {
    if (n < 0 || c < 1 || h < 1 || w < 1 || th < 1 || tw < 1 || pt < 0 || pl < 0 || pt + h > 2 * th + 2 ||
        pl + w > 2 * tw + 2)
        throw py::value_error(std::string(fn) + ": bad tile geometry: image " + std::to_string(h) + "x" + std::to_string(w) +
                              ", padding before " + std::to_string(pt) + "x" + std::to_string(pl) + ", tiles " +
                              std::to_string(th) + "x" + std::to_string(tw));
    return Tiles{n, c, h, w, th, tw, pt, pl};
}

void check_tiles(const char *fn, const py::array &a, const char *what, py::ssize_t rows, const Tiles &g) {
    if (a.ndim() != 3 || a.shape(0) != 16 || a.shape(1) != rows || a.shape(2) != g.T())
        throw py::value_error(std::string(fn) + ": " + what + " of shape " + shape_str(a) + " does not match (16, " +
                              std::to_string(rows) + ", " + std::to_string(g.T()) + ")");
}

// f(T{}) with T the arrays' float type
template <class F>
void by_dtype(bool f32, const F &f) {
    if (f32)
        f(float{});
    else
        f(double{});
}

py::array py_input(py::array x, py::ssize_t pt, py::ssize_t pl, py::ssize_t th, py::ssize_t tw) {
    const char *fn = "winograd_input";
    const bool f32 = is_f32(fn, x, "x");
    if (x.ndim() != 4) throw py::value_error(std::string(fn) + ": expected (N, C, H, W), got shape " + shape_str(x));
    const Tiles g = tiles(fn, x.shape(0), x.shape(1), x.shape(2), x.shape(3), th, tw, pt, pl);
    py::array V(x.dtype(), {py::ssize_t{16}, g.c, g.T()});
    const void *src = x.data();
    void *dst = V.mutable_data();
    py::gil_scoped_release nogil;
    by_dtype(f32, [&](auto z) {
        using T = decltype(z);
        input_transform(static_cast<const T *>(src), static_cast<T *>(dst), g);
    });
    return V;
}

py::array py_input_grad(py::array gV, py::ssize_t n, py::ssize_t h, py::ssize_t w, py::ssize_t pt, py::ssize_t pl,
                        py::ssize_t th, py::ssize_t tw) {
    const char *fn = "winograd_input_grad";
    const bool f32 = is_f32(fn, gV, "gV");
    if (gV.ndim() != 3) throw py::value_error(std::string(fn) + ": expected (16, C, T), got shape " + shape_str(gV));
    const Tiles g = tiles(fn, n, gV.shape(1), h, w, th, tw, pt, pl);
    check_tiles(fn, gV, "gV", g.c, g);
    py::array gx(gV.dtype(), {n, g.c, h, w});
    const void *src = gV.data();
    void *dst = gx.mutable_data();
    py::gil_scoped_release nogil;
    by_dtype(f32, [&](auto z) {
        using T = decltype(z);
        input_transform_grad(static_cast<const T *>(src), static_cast<T *>(dst), g);
    });
    return gx;
}

py::array py_output(py::array M, py::ssize_t n, py::ssize_t ho, py::ssize_t wo, const std::optional<py::array> &bias) {
    const char *fn = "winograd_output";
    const bool f32 = is_f32(fn, M, "M");
    if (M.ndim() != 3) throw py::value_error(std::string(fn) + ": expected (16, OC, T), got shape " + shape_str(M));
    if (ho < 1 || wo < 1) throw py::value_error(std::string(fn) + ": bad output size");
    const py::ssize_t oc = M.shape(1);
    const Tiles g = tiles(fn, n, 1, 1, 1, (ho + 1) / 2, (wo + 1) / 2, 0, 0);
    check_tiles(fn, M, "M", oc, g);
    if (bias.has_value() && (!bias->dtype().is(M.dtype()) || bias->ndim() != 1 || bias->shape(0) != oc ||
                             !(bias->flags() & py::array::c_style)))
        throw py::value_error(std::string(fn) + ": bias must be a C-contiguous (" + std::to_string(oc) +
                              ",) array of M's dtype, got shape " + shape_str(*bias));
    py::array y(M.dtype(), {n, oc, ho, wo});
    const void *src = M.data();
    const void *pb = bias.has_value() ? bias->data() : nullptr;
    void *dst = y.mutable_data();
    py::gil_scoped_release nogil;
    by_dtype(f32, [&](auto z) {
        using T = decltype(z);
        output_transform(static_cast<const T *>(src), static_cast<T *>(dst), static_cast<const T *>(pb), g, oc, ho, wo);
    });
    return y;
}

py::array py_output_grad(py::array gy) {
    const char *fn = "winograd_output_grad";
    const bool f32 = is_f32(fn, gy, "g");
    if (gy.ndim() != 4) throw py::value_error(std::string(fn) + ": expected (N, OC, HO, WO), got shape " + shape_str(gy));
    const py::ssize_t n = gy.shape(0), oc = gy.shape(1), ho = gy.shape(2), wo = gy.shape(3);
    const Tiles g = tiles(fn, n, 1, 1, 1, (ho + 1) / 2, (wo + 1) / 2, 0, 0);
    py::array gM(gy.dtype(), {py::ssize_t{16}, oc, g.T()});
    const void *src = gy.data();
    void *dst = gM.mutable_data();
    py::gil_scoped_release nogil;
    by_dtype(f32, [&](auto z) {
        using T = decltype(z);
        output_transform_grad(static_cast<const T *>(src), static_cast<T *>(dst), g, oc, ho, wo);
    });
    return gM;
}

}  // namespace

void init_winograd(py::module_ &m) {
    m.def("winograd_input", &py_input, py::arg("x"), py::arg("pt"), py::arg("pl"), py::arg("th"), py::arg("tw"),
          "(N, C, H, W) -> V (16, C, N*TH*TW): B^T d B of each 4x4 input tile, tile (i, j) reading rows from 2i - pt and "
          "columns from 2j - pl (zero outside the image)");
    m.def("winograd_input_grad", &py_input_grad, py::arg("gV"), py::arg("n"), py::arg("h"), py::arg("w"), py::arg("pt"),
          py::arg("pl"), py::arg("th"), py::arg("tw"), "the adjoint of winograd_input: gV (16, C, T) -> gx (N, C, H, W)");
    m.def("winograd_output", &py_output, py::arg("M"), py::arg("n"), py::arg("ho"), py::arg("wo"),
          py::arg("bias") = py::none(),
          "M (16, OC, N*TH*TW) -> y (N, OC, HO, WO): A^T m A of each tile (+ bias), cropped to HO x WO");
    m.def("winograd_output_grad", &py_output_grad, py::arg("g"),
          "the adjoint of winograd_output (without the bias): g (N, OC, HO, WO) -> gM (16, OC, N*TH*TW)");
}
