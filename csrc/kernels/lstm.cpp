// The elementwise part of an LSTM step, fused: tensorbrain._C.lstm_cell_forward /
// lstm_cell_backward, and the whole step with its recurrent GEMM on a weight packed once per
// layer call (gemm.h): lstm_step_forward / lstm_step_backward. The NumPy twins of the same names
// are in tensorbrain/_ops/rnn.py; tests/nn/test_rnn_native.py holds the two together.
//
// Why native: a step's gates went through ten NumPy calls forward (and six backward), each a
// pass over a few thousand values, with NumPy's float32 tanh at ~10 ns a value; here one call
// per step, the tanh 8 values at a time (act.h). Gates are in rnn.py's order (o, i, f, g), the
// sigmoid ones pre-scaled by 1/2 so that sigmoid(x) = 0.5 * tanh(x / 2) + 0.5 (one tanh pass).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/act.h"
#include "kernels/gemm.h"
#include "kernels/lstm_cell.h"
#include "kernels/parallel.h"
#include "kernels/reduce.h"

namespace py = pybind11;

namespace tb::kernels {
void check_gemm_args(const char *fn, const PackedMatrix &b, const py::array &a, const py::array &c, bool c_writable);

void tanh_inplace(float *x, std::size_t n) {
    if (use_avx512() && avx512::tanh_inplace(x, n)) return;
    if (std::strcmp(cpu_path(), "avx2+f16c") == 0 && avx2::tanh_inplace(x, n)) return;
    for (std::size_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
}
}  // namespace tb::kernels

namespace {

using tb::kernels::PackedMatrix;
using tb::kernels::tanh_inplace;
using Arr = py::array_t<float, 0>;   // no forcecast: the caller passes float32 arrays as they are

const float *input(const char *fn, const char *name, Arr &a, py::ssize_t size) {
    if (!(a.flags() & py::array::c_style) || a.size() != size)
        throw py::value_error(std::string(fn) + ": " + name + " must be a C-contiguous float32 array of " +
                              std::to_string(size) + " values, got shape " +
                              py::str(a.attr("shape")).cast<std::string>());
    return a.data();
}

float *checked(const char *fn, const char *name, Arr &a, py::ssize_t size) {
    if (!(a.flags() & py::array::c_style) || a.size() != size)
        throw py::value_error(std::string(fn) + ": " + name + " must be a C-contiguous float32 array of " +
                              std::to_string(size) + " values, got shape " +
                              py::str(a.attr("shape")).cast<std::string>());
    if (!a.writeable()) throw py::value_error(std::string(fn) + ": " + name + " is read-only");
    return a.mutable_data();
}

// gates (4, B, H) (+= rec (4, B, H) unless rec is null), then the activations in place;
// c = f*c_prev + i*g, tc = tanh(c), h = o*tc. n = B * H values of each gate, gs apart (n, or
// B * H when these n are some rows of a taller batch: seq_forward's row blocks; rec only with
// gs = n).
void cell_forward(float *G, const float *R, const float *CP, float *Cn, float *TC, float *Hn, std::size_t n,
                  std::size_t gs) {
    if (R != nullptr)
        for (std::size_t k = 0; k < 4 * n; ++k) G[k] += R[k];
    if (tb::kernels::use_avx512() && tb::kernels::avx512::lstm_cell_forward(G, CP, Cn, TC, Hn, n, gs)) return;
    if (std::strcmp(tb::kernels::cpu_path(), "avx2+f16c") == 0 &&
        tb::kernels::avx2::lstm_cell_forward(G, CP, Cn, TC, Hn, n, gs))
        return;
    for (int q = 0; q < 4; ++q) tanh_inplace(G + q * gs, n);
    for (int q = 0; q < 3; ++q)
        for (std::size_t k = 0; k < n; ++k) G[q * gs + k] = G[q * gs + k] * 0.5f + 0.5f;
    const float *o = G, *i = G + gs, *f = G + 2 * gs, *g = G + 3 * gs;
    for (std::size_t k = 0; k < n; ++k) TC[k] = Cn[k] = f[k] * CP[k] + i[k] * g[k];
    tanh_inplace(TC, n);
    for (std::size_t k = 0; k < n; ++k) Hn[k] = o[k] * TC[k];
}

// The checked arrays of a forward step (lstm_cell_forward's, less rec).
struct FwdArgs {
    py::ssize_t bh;
    float *G, *CP, *Cn, *TC, *Hn;
};

FwdArgs fwd_args(const char *fn, Arr &gates, Arr &c_prev, Arr &c, Arr &tc, Arr &h) {
    if (c_prev.ndim() != 2) throw py::value_error(std::string(fn) + ": c_prev must be (batch, hidden)");
    const py::ssize_t bh = c_prev.shape(0) * c_prev.shape(1);
    return {bh, checked(fn, "gates", gates, 4 * bh), checked(fn, "c_prev", c_prev, bh), checked(fn, "c", c, bh),
            checked(fn, "tc", tc, bh), checked(fn, "h", h, bh)};
}

void forward(Arr gates, Arr rec, Arr c_prev, Arr c, Arr tc, Arr h) {
    const char *fn = "lstm_cell_forward";
    const FwdArgs a = fwd_args(fn, gates, c_prev, c, tc, h);
    float *R = checked(fn, "rec", rec, 4 * a.bh);
    py::gil_scoped_release nogil;
    cell_forward(a.G, R, a.CP, a.Cn, a.TC, a.Hn, static_cast<std::size_t>(a.bh), static_cast<std::size_t>(a.bh));
}

// The whole forward step in one call: gates (4, B, H) += h_prev (B, K) @ w (w packed from the
// scaled, permuted W_hh^T (K, 4H) in 4 groups), then cell_forward. The NumPy twin is in rnn.py.
void step_forward(const PackedMatrix &w, Arr h_prev, Arr gates, Arr c_prev, Arr c, Arr tc, Arr h) {
    const char *fn = "lstm_step_forward";
    const FwdArgs a = fwd_args(fn, gates, c_prev, c, tc, h);
    if (w.groups != 4 || w.ng != c_prev.shape(1))
        throw py::value_error(std::string(fn) + ": w must be packed in 4 groups of hidden = " +
                              std::to_string(c_prev.shape(1)) + " columns, got " + std::to_string(w.groups) +
                              " groups of " + std::to_string(w.ng));
    tb::kernels::check_gemm_args(fn, w, h_prev, gates, true);
    if (h_prev.shape(0) != c_prev.shape(0))
        throw py::value_error(std::string(fn) + ": h_prev has " + std::to_string(h_prev.shape(0)) + " rows, c_prev " +
                              std::to_string(c_prev.shape(0)));
    const float *HP = h_prev.data();
    py::gil_scoped_release nogil;
    tb::kernels::gemm_packed(HP, w.k, static_cast<int>(c_prev.shape(0)), w, a.G, true);
    cell_forward(a.G, nullptr, a.CP, a.Cn, a.TC, a.Hn, static_cast<std::size_t>(a.bh), static_cast<std::size_t>(a.bh));
}

// Rows [b0, b1) of the batch (all of it when b1 < 0): lstm_cell.h's loop, AVX-512 where the CPU
// has it. dgates' rows are in torch's gate order (i, f, g, o), unscaled: the gradients of torch's
// pre-activations, which the weight gradients and W_hh's product then take as they are (no
// permuted copies).
void cell_backward(float *DH, float *DC, const float *GY, const float *G, const float *TC, const float *CP, float *DG,
                   py::ssize_t B, py::ssize_t H, py::ssize_t b0 = 0, py::ssize_t b1 = -1) {
    if (b1 < 0) b1 = B;
    if (tb::kernels::use_avx512() && tb::kernels::avx512::lstm_cell_backward(DH, DC, GY, G, TC, CP, DG, B, H, b0, b1))
        return;
    tb::kernels::lstm_loops::cell_backward(DH, DC, GY, G, TC, CP, DG, B, H, b0, b1);
}

// The checked arrays of a backward step (lstm_cell_backward's arguments).
struct BackArgs {
    py::ssize_t B, H;
    float *DH, *DC, *DG;
    const float *GY, *G, *TC, *CP;
};

BackArgs back_args(const char *fn, Arr &dh, Arr &dc, Arr &gy, Arr &gates, Arr &tc, Arr &c_prev, Arr &dgates) {
    if (dc.ndim() != 2) throw py::value_error(std::string(fn) + ": dc must be (batch, hidden)");
    const py::ssize_t B = dc.shape(0), H = dc.shape(1), bh = B * H;
    return {B, H, checked(fn, "dh", dh, bh), checked(fn, "dc", dc, bh), checked(fn, "dgates", dgates, 4 * bh),
            input(fn, "gy", gy, bh), input(fn, "gates", gates, 4 * bh), input(fn, "tc", tc, bh),
            input(fn, "c_prev", c_prev, bh)};
}

void backward(Arr dh, Arr dc, Arr gy, Arr gates, Arr tc, Arr c_prev, Arr dgates) {
    const BackArgs a = back_args("lstm_cell_backward", dh, dc, gy, gates, tc, c_prev, dgates);
    py::gil_scoped_release nogil;
    cell_backward(a.DH, a.DC, a.GY, a.G, a.TC, a.CP, a.DG, a.B, a.H);
}

// The whole backward step in one call: cell_backward, then dh_out (B, K) = dgates (B, 4H) @ w
// (w packed from W_hh (4H, K) as it is, one group). dh_out may be dh itself (read before).
void step_backward(const PackedMatrix &w, Arr dh, Arr dc, Arr gy, Arr gates, Arr tc, Arr c_prev, Arr dgates,
                   Arr dh_out) {
    const char *fn = "lstm_step_backward";
    const BackArgs a = back_args(fn, dh, dc, gy, gates, tc, c_prev, dgates);
    if (w.groups != 1 || w.k != 4 * a.H)
        throw py::value_error(std::string(fn) + ": w must be packed from W_hh (4 * hidden, out) in one group");
    tb::kernels::check_gemm_args(fn, w, dgates, dh_out, true);
    float *DHO = dh_out.mutable_data();
    py::gil_scoped_release nogil;
    cell_backward(a.DH, a.DC, a.GY, a.G, a.TC, a.CP, a.DG, a.B, a.H);
    tb::kernels::gemm_packed(a.DG, w.k, static_cast<int>(a.B), w, DHO, false);
}

// A whole layer's sequence, for a batch that is the same at every step (no packed sequences)
// and no projection: the steps of step_forward / step_backward in one call, in processing order
// (reverse: from the last time step), instead of a Python loop over the steps. Rows of step t
// are [t * B, (t + 1) * B) of y, c, tc, gy, dgates; its gates the t-th (4, B, H) block.
//
// A batch row's states depend only on that row's inputs and earlier states, so the rows are split
// across tb.set_num_threads threads (parallel.h) for the whole sequence: one split per call, no
// wait between steps. Each row meets the same operations in the same order as on one thread
// (the GEMM's per-row sums do not depend on which rows share a tile): the same bits.
constexpr int kSeqRowGrain = 8;   // rows a part at least: the packed GEMM's tiles stay full
struct SeqArgs {
    int T, B, H;
    std::vector<int> order;   // time steps in processing order
};

SeqArgs seq_args(const char *fn, const PackedMatrix &w, int groups, Arr &h0, Arr &c0, Arr &y, bool reverse) {
    if (h0.ndim() != 2 || c0.ndim() != 2 || y.ndim() != 2)
        throw py::value_error(std::string(fn) + ": h0, c0 (batch, hidden) and y (steps * batch, hidden) must be 2-D");
    const auto B = h0.shape(0), H = h0.shape(1);
    if (c0.shape(0) != B || c0.shape(1) != H || y.shape(1) != H || (B > 0 && y.shape(0) % B != 0))
        throw py::value_error(std::string(fn) + ": h0 " + py::str(h0.attr("shape")).cast<std::string>() + ", c0 " +
                              py::str(c0.attr("shape")).cast<std::string>() + " and y " +
                              py::str(y.attr("shape")).cast<std::string>() + " do not match");
    if (w.groups != groups || (groups == 4 ? (w.k != H || w.ng != H) : (w.k != 4 * H || w.n != H)))
        throw py::value_error(std::string(fn) + ": w is not packed for hidden = " + std::to_string(H));
    SeqArgs a{B > 0 ? static_cast<int>(y.shape(0) / B) : 0, static_cast<int>(B), static_cast<int>(H), {}};
    for (int k = 0; k < a.T; ++k) a.order.push_back(reverse ? a.T - 1 - k : k);
    return a;
}

// With proj ((steps * B, 4H): x @ W_ih^T over all steps, one BLAS GEMM made by the caller, in
// torch's gate order, unscaled) and/or bias (4H, torch's order, unscaled: b_ih + b_hh), each
// step's gates are first written from them in the cell's order and scale (lstm_cell.h's
// init_step), before the recurrent product adds to them (gates need not hold anything then).
// One GEMM over all steps beats one per step at these shapes: BLAS runs the 700 rows at its full
// rate, where a step has 20 (10 a thread at two threads) (docs/training.md).
void seq_forward(const PackedMatrix &w, Arr h0, Arr c0, Arr gates, Arr y, Arr c, Arr tc, bool reverse,
                 std::optional<Arr> proj, std::optional<Arr> bias) {
    const char *fn = "lstm_seq_forward";
    const SeqArgs a = seq_args(fn, w, 4, h0, c0, y, reverse);
    const py::ssize_t bh = static_cast<py::ssize_t>(a.B) * a.H, n = a.T * bh, H4 = 4 * static_cast<py::ssize_t>(a.H);
    const float *H0 = input(fn, "h0", h0, bh), *C0 = input(fn, "c0", c0, bh);
    float *G = checked(fn, "gates", gates, 4 * n), *Y = checked(fn, "y", y, n), *C = checked(fn, "c", c, n);
    float *TC = checked(fn, "tc", tc, n);
    const float *P = proj.has_value() ? input(fn, "proj", *proj, 4 * n) : nullptr;
    const float *BI = bias.has_value() ? input(fn, "bias", *bias, H4) : nullptr;
    py::gil_scoped_release nogil;
    tb::kernels::parallel_for(static_cast<std::size_t>(a.B), kSeqRowGrain, 1, [&](std::size_t r0, std::size_t r1) {
        const int b0 = static_cast<int>(r0), m = static_cast<int>(r1 - r0);
        const py::ssize_t e0 = static_cast<py::ssize_t>(b0) * a.H;   // the block's first value in a (B, H) array
        for (std::size_t k = 0; k < a.order.size(); ++k) {
            const py::ssize_t off = a.order[k] * bh, prev = k ? a.order[k - 1] * bh : 0;
            float *g = G + 4 * off + e0;
            if (P != nullptr || BI != nullptr) {
                const float *p = P != nullptr ? P + (static_cast<py::ssize_t>(a.order[k]) * a.B + b0) * H4 : nullptr;
                if (!(tb::kernels::use_avx512() && tb::kernels::avx512::lstm_init_step(g, bh, p, BI, m, a.H)))
                    tb::kernels::lstm_loops::init_step(g, bh, p, BI, m, a.H);
            }
            tb::kernels::gemm_packed((k ? Y + prev : H0) + e0, a.H, m, w, g, true, bh);
            cell_forward(g, nullptr, (k ? C + prev : C0) + e0, C + off + e0, TC + off + e0, Y + off + e0,
                         static_cast<std::size_t>(m) * a.H, static_cast<std::size_t>(bh));
        }
    });
}

void seq_backward(const PackedMatrix &w, Arr dh, Arr dc, Arr gy, Arr gates, Arr tc, Arr c0, Arr c, Arr dgates,
                  bool reverse) {
    const char *fn = "lstm_seq_backward";
    const SeqArgs a = seq_args(fn, w, 1, dh, dc, gy, reverse);
    const py::ssize_t bh = static_cast<py::ssize_t>(a.B) * a.H, n = a.T * bh;
    float *DH = checked(fn, "dh", dh, bh), *DC = checked(fn, "dc", dc, bh), *DG = checked(fn, "dgates", dgates, 4 * n);
    const float *GY = input(fn, "gy", gy, n), *G = input(fn, "gates", gates, 4 * n), *TC = input(fn, "tc", tc, n);
    const float *C0 = input(fn, "c0", c0, bh), *C = input(fn, "c", c, n);
    py::gil_scoped_release nogil;
    tb::kernels::parallel_for(static_cast<std::size_t>(a.B), kSeqRowGrain, 1, [&](std::size_t r0, std::size_t r1) {
        const auto b0 = static_cast<py::ssize_t>(r0), b1 = static_cast<py::ssize_t>(r1);
        for (std::size_t k = a.order.size(); k-- > 0;) {
            const py::ssize_t off = a.order[k] * bh;
            const float *CP = k ? C + a.order[k - 1] * bh : C0;
            cell_backward(DH, DC, GY + off, G + 4 * off, TC + off, CP, DG + 4 * off, a.B, a.H, b0, b1);
            // dgates (B, 4H) row by row: the block's rows of dh
            tb::kernels::gemm_packed(DG + 4 * off + b0 * w.k, w.k, static_cast<int>(b1 - b0), w, DH + b0 * a.H, false);
        }
    });
}

}  // namespace

void init_lstm(py::module_ &m) {
    m.def("lstm_cell_forward", &forward, py::arg("gates"), py::arg("rec"), py::arg("c_prev"), py::arg("c"),
          py::arg("tc"), py::arg("h"),
          "one LSTM step's elementwise part on float32: gates (4, B, H) (o, i, f, g; sigmoid ones pre-scaled "
          "by 1/2) += rec and activated in place; c, tanh(c) and h written");
    m.def("lstm_cell_backward", &backward, py::arg("dh"), py::arg("dc"), py::arg("gy"), py::arg("gates"),
          py::arg("tc"), py::arg("c_prev"), py::arg("dgates"),
          "one LSTM step back on float32 from its activated gates (4, B, H), tanh(c) and c_prev: dh += gy, dc "
          "updated, dgates (B, 4H) written in torch's gate order (i, f, g, o), then dc *= f");
    m.def("lstm_step_forward", &step_forward, py::arg("w"), py::arg("h_prev"), py::arg("gates"), py::arg("c_prev"),
          py::arg("c"), py::arg("tc"), py::arg("h"),
          "one LSTM step forward on float32: gates (4, B, H) += h_prev @ w (a PackedMatrix in 4 groups), then "
          "lstm_cell_forward's gate math");
    m.def("lstm_step_backward", &step_backward, py::arg("w"), py::arg("dh"), py::arg("dc"), py::arg("gy"),
          py::arg("gates"), py::arg("tc"), py::arg("c_prev"), py::arg("dgates"), py::arg("dh_out"),
          "one LSTM step back on float32: lstm_cell_backward, then dh_out = dgates @ w (a PackedMatrix of W_hh as "
          "it is)");
    m.def("lstm_seq_forward", &seq_forward, py::arg("w"), py::arg("h0"), py::arg("c0"), py::arg("gates"), py::arg("y"),
          py::arg("c"), py::arg("tc"), py::arg("reverse"), py::arg("proj") = py::none(), py::arg("bias") = py::none(),
          "every step of an LSTM layer forward on float32, a batch the same at every step: lstm_step_forward's "
          "steps in processing order (gates: the steps' (4, B, H) blocks; y, c, tc: (steps * B, H)); with proj "
          "(steps * B, 4H) = x @ W_ih^T and/or bias (4H), both in torch's gate order and unscaled, each step's "
          "gates are first written from them in the kernels' order and scale");
    m.def("lstm_seq_backward", &seq_backward, py::arg("w"), py::arg("dh"), py::arg("dc"), py::arg("gy"),
          py::arg("gates"), py::arg("tc"), py::arg("c0"), py::arg("c"), py::arg("dgates"), py::arg("reverse"),
          "every step of an LSTM layer back on float32: lstm_step_backward's steps in reverse processing order, "
          "dh and dc carried in place, dgates (steps * B, 4H) written");
    m.def("_tanh_f32", [](Arr x) {
        float *p = checked("_tanh_f32", "x", x, x.size());
        tb::kernels::tanh_inplace(p, static_cast<std::size_t>(x.size()));
    }, "tanh in place with the fused kernels' tanh (test helper)");
}
