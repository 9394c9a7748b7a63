// SGD with momentum in one pass: tensorbrain._C.sgd_step (float32). Its NumPy twin,
// tensorbrain/optim/sgd.py's sgd_step, runs four full-size passes (buf *= mu; buf += g;
// tmp = buf * lr; p -= tmp), which moved about twice the memory of one pass and took a fifth of
// the MLP's training step on the Intel VM; torch fuses it. tests/test_sgd_native.py holds the two
// together bit for bit: every value meets the same float32 operations in the same order (this
// file is built without FMA, so no multiply-add is contracted) and the constants arrive rounded
// to float32 as NumPy rounds a Python float against a float32 array. The loop vectorises as it
// is (no AVX copy needed: it is bound by memory); large parameters are split across
// tb.set_num_threads threads (parallel.h).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "kernels/parallel.h"

namespace py = pybind11;

namespace {
using Arr = py::array_t<float, 0>;   // no forcecast

float *writable(const char *name, Arr &a, py::ssize_t n) {
    if (!(a.flags() & py::array::c_style) || a.size() != n || !a.writeable())
        throw py::value_error(std::string("sgd_step: ") + name + " must be a writable C-contiguous float32 array of " +
                              std::to_string(n) + " values, got shape " + py::str(a.attr("shape")).cast<std::string>());
    return a.mutable_data();
}

// buf = buf*mu + g*damp (+ g when damp is 1); d = nesterov ? buf*mu + g : buf; p -= d*lr
template <bool kDamp, bool kNesterov>
void run(float *P, const float *G, float *B, std::size_t b, std::size_t e, float mu, float damp, float lr) {
    for (std::size_t i = b; i < e; ++i) {
        const float gi = G[i];
        const float v = B[i] * mu + (kDamp ? gi * damp : gi);
        B[i] = v;
        P[i] -= (kNesterov ? v * mu + gi : v) * lr;
    }
}

// Without momentum (buf None): p -= g*lr.
void sgd_step(Arr p, Arr g, std::optional<Arr> buf, double lr_d, double momentum, double damp_d, bool nesterov) {
    const py::ssize_t n = p.size();
    float *P = writable("param", p, n), *B = buf ? writable("momentum_buffer", *buf, n) : nullptr;
    if (!(g.flags() & py::array::c_style) || g.size() != n)
        throw py::value_error("sgd_step: grad must be a C-contiguous float32 array of " + std::to_string(n) + " values");
    const float *G = g.data();
    const float lr = static_cast<float>(lr_d), mu = static_cast<float>(momentum), damp = static_cast<float>(damp_d);
    const bool plain = damp_d == 1.0;
    py::gil_scoped_release nogil;
    tb::kernels::parallel_for(static_cast<std::size_t>(n), std::size_t{1} << 16, 16, [&](std::size_t b, std::size_t e) {
        if (B == nullptr)
            for (std::size_t i = b; i < e; ++i) P[i] -= G[i] * lr;
        else if (plain)
            nesterov ? run<false, true>(P, G, B, b, e, mu, damp, lr) : run<false, false>(P, G, B, b, e, mu, damp, lr);
        else
            nesterov ? run<true, true>(P, G, B, b, e, mu, damp, lr) : run<true, false>(P, G, B, b, e, mu, damp, lr);
    });
}
}  // namespace

void init_sgd(py::module_ &m) {
    m.def("sgd_step", &sgd_step, py::arg("param"), py::arg("grad"), py::arg("momentum_buffer"), py::arg("lr"),
          py::arg("momentum"), py::arg("damp"), py::arg("nesterov"),
          "SGD's update of one float32 parameter in place, in one pass (momentum_buffer None: no momentum; "
          "damp = 1 - dampening; twin: tensorbrain.optim.sgd.sgd_step)");
}
