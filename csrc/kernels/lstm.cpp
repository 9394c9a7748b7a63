// The elementwise part of an LSTM step, fused: tensorbrain._C.lstm_cell_forward /
// lstm_cell_backward. The NumPy twins of the same names are in tensorbrain/_ops/rnn.py, which
// also runs the GEMMs around them; tests/nn/test_rnn_native.py holds the two together.
//
// Why native: a step's gates went through ten NumPy calls forward (and six backward), each a
// pass over a few thousand values, with NumPy's float32 tanh at ~10 ns a value; here one call
// per step, the tanh 8 values at a time (act.h). Gates are in rnn.py's order (o, i, f, g), the
// sigmoid ones pre-scaled by 1/2 so that sigmoid(x) = 0.5 * tanh(x / 2) + 0.5 (one tanh pass).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/act.h"
#include "kernels/reduce.h"

namespace py = pybind11;

namespace tb::kernels {
void tanh_inplace(float *x, std::size_t n) {
    if (std::strcmp(cpu_path(), "avx2+f16c") == 0 && avx2::tanh_inplace(x, n)) return;
    for (std::size_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
}
}  // namespace tb::kernels

namespace {

using tb::kernels::tanh_inplace;
using Arr = py::array_t<float, 0>;   // no forcecast: the caller passes float32 arrays as they are

float *checked(const char *fn, const char *name, Arr &a, py::ssize_t size) {
    if (!(a.flags() & py::array::c_style) || a.size() != size)
        throw py::value_error(std::string(fn) + ": " + name + " must be a C-contiguous float32 array of " +
                              std::to_string(size) + " values, got shape " +
                              py::str(a.attr("shape")).cast<std::string>());
    if (!a.writeable()) throw py::value_error(std::string(fn) + ": " + name + " is read-only");
    return a.mutable_data();
}

// gates (4, B, H) += rec (4, B, H), then the activations in place; c = f*c_prev + i*g,
// tc = tanh(c), h = o*tc.
void forward(Arr gates, Arr rec, Arr c_prev, Arr c, Arr tc, Arr h) {
    const char *fn = "lstm_cell_forward";
    if (c_prev.ndim() != 2) throw py::value_error(std::string(fn) + ": c_prev must be (batch, hidden)");
    const py::ssize_t bh = c_prev.shape(0) * c_prev.shape(1);
    float *G = checked(fn, "gates", gates, 4 * bh);
    float *R = checked(fn, "rec", rec, 4 * bh);
    float *CP = checked(fn, "c_prev", c_prev, bh);
    float *Cn = checked(fn, "c", c, bh);
    float *TC = checked(fn, "tc", tc, bh);
    float *Hn = checked(fn, "h", h, bh);
    py::gil_scoped_release nogil;
    const std::size_t n = static_cast<std::size_t>(bh);
    for (std::size_t k = 0; k < 4 * n; ++k) G[k] += R[k];
    tanh_inplace(G, 4 * n);
    for (std::size_t k = 0; k < 3 * n; ++k) G[k] = G[k] * 0.5f + 0.5f;
    const float *o = G, *i = G + n, *f = G + 2 * n, *g = G + 3 * n;
    for (std::size_t k = 0; k < n; ++k) TC[k] = Cn[k] = f[k] * CP[k] + i[k] * g[k];
    tanh_inplace(TC, n);
    for (std::size_t k = 0; k < n; ++k) Hn[k] = o[k] * TC[k];
}

// One step back: dh += gy; dc += dh * dcc; dgates rows (B, 4, H) = (dh*k_o, dc*k_i, dc*k_f,
// dc*k_g); dc *= f. k holds the gate derivative factors (4, B, H), dcc = o * (1 - tanh(c)^2).
void backward(Arr dh, Arr dc, Arr gy, Arr dcc, Arr k, Arr f, Arr dgates) {
    const char *fn = "lstm_cell_backward";
    if (dc.ndim() != 2) throw py::value_error(std::string(fn) + ": dc must be (batch, hidden)");
    const py::ssize_t B = dc.shape(0), H = dc.shape(1), bh = B * H;
    float *DH = checked(fn, "dh", dh, bh);
    float *DC = checked(fn, "dc", dc, bh);
    float *GY = checked(fn, "gy", gy, bh);
    float *DCC = checked(fn, "dcc", dcc, bh);
    float *K = checked(fn, "k", k, 4 * bh);
    float *F = checked(fn, "f", f, bh);
    float *DG = checked(fn, "dgates", dgates, 4 * bh);
    py::gil_scoped_release nogil;
    for (py::ssize_t b = 0; b < B; ++b) {
        float *dh_ = DH + b * H, *dc_ = DC + b * H, *dg = DG + b * 4 * H;
        const float *gy_ = GY + b * H, *dcc_ = DCC + b * H, *f_ = F + b * H;
        const float *ko = K + b * H, *ki = K + bh + b * H, *kf = K + 2 * bh + b * H, *kg = K + 3 * bh + b * H;
        for (py::ssize_t j = 0; j < H; ++j) {
            const float d = dh_[j] + gy_[j];
            dh_[j] = d;
            const float c = dc_[j] + d * dcc_[j];
            dg[j] = d * ko[j];
            dg[H + j] = c * ki[j];
            dg[2 * H + j] = c * kf[j];
            dg[3 * H + j] = c * kg[j];
            dc_[j] = c * f_[j];
        }
    }
}

}  // namespace

void init_lstm(py::module_ &m) {
    m.def("lstm_cell_forward", &forward, py::arg("gates"), py::arg("rec"), py::arg("c_prev"), py::arg("c"),
          py::arg("tc"), py::arg("h"),
          "one LSTM step's elementwise part on float32: gates (4, B, H) (o, i, f, g; sigmoid ones pre-scaled "
          "by 1/2) += rec and activated in place; c, tanh(c) and h written");
    m.def("lstm_cell_backward", &backward, py::arg("dh"), py::arg("dc"), py::arg("gy"), py::arg("dcc"), py::arg("k"),
          py::arg("f"), py::arg("dgates"),
          "one LSTM step back on float32: dh += gy, dc += dh*dcc, dgates (B, 4H) from k, then dc *= f");
    m.def("_tanh_f32", [](Arr x) {
        float *p = checked("_tanh_f32", "x", x, x.size());
        tb::kernels::tanh_inplace(p, static_cast<std::size_t>(x.size()));
    }, "tanh in place with the fused kernels' tanh (test helper)");
}
