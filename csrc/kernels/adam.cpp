// Adam's update in one pass: tensorbrain._C.adam_step (float32). The NumPy twin of the same name
// is in tensorbrain/optim/adam.py, which ran it as eleven full-size passes (8% of a GPT step's
// time; torch fuses it); tests/test_adam_native.py holds the two together, bit for bit: every
// value meets the same float32 operations in the same order (this file is built without FMA,
// so no multiply-add is contracted), and the constants arrive rounded to float32 as NumPy
// rounds a Python float against a float32 array. The scalar loop below does not vectorise (std::sqrt
// keeps errno), so CPUs with AVX2 run adam_avx2.cpp's copy; large parameters are split across
// tb.set_num_threads threads (parallel.h; each value is independent, so the split changes nothing).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/parallel.h"
#include "kernels/reduce.h"

namespace tb::kernels::avx2 {   // adam_avx2.cpp: the same update 8 values at a time; returns how many
std::size_t adam_step(float *P, const float *G, float *M, float *V, std::size_t n, float b1, float omb1, float b2,
                      float omb2, float bias2_sqrt, float eps, float step_size);   // values it did (0: not built)
}  // namespace tb::kernels::avx2

namespace py = pybind11;

namespace {
using Arr = py::array_t<float, 0>;   // no forcecast

float *writable(const char *name, Arr &a, py::ssize_t n) {
    if (!(a.flags() & py::array::c_style) || a.size() != n || !a.writeable())
        throw py::value_error(std::string("adam_step: ") + name + " must be a writable C-contiguous float32 array of " +
                              std::to_string(n) + " values, got shape " + py::str(a.attr("shape")).cast<std::string>());
    return a.mutable_data();
}

// m = m*b1 + g*(1-b1); v = v*b2 + (g*g)*(1-b2); p -= m / (sqrt(v) / bias2_sqrt + eps) * step_size
// The constants come as Python floats (double) and are rounded to float32 here, 1 - b1 and
// 1 - b2 first formed in double, as the twin's NumPy calls do.
void adam_step(Arr p, Arr g, Arr m, Arr v, double beta1, double beta2, double bias2_sqrt_d, double eps_d,
               double step_size_d) {
    const float b1 = static_cast<float>(beta1), one_minus_b1 = static_cast<float>(1.0 - beta1);
    const float b2 = static_cast<float>(beta2), one_minus_b2 = static_cast<float>(1.0 - beta2);
    const float bias2_sqrt = static_cast<float>(bias2_sqrt_d), eps = static_cast<float>(eps_d);
    const float step_size = static_cast<float>(step_size_d);
    const py::ssize_t n = p.size();
    float *P = writable("param", p, n), *M = writable("exp_avg", m, n), *V = writable("exp_avg_sq", v, n);
    if (!(g.flags() & py::array::c_style) || g.size() != n)
        throw py::value_error("adam_step: grad must be a C-contiguous float32 array of " + std::to_string(n) + " values");
    const float *G = g.data();
    py::gil_scoped_release nogil;
    const bool vec = std::strcmp(tb::kernels::cpu_path(), "avx2+f16c") == 0;
    tb::kernels::parallel_for(static_cast<std::size_t>(n), std::size_t{1} << 16, 8, [&](std::size_t b, std::size_t e) {
        std::size_t i = b;
        if (vec)
            i += tb::kernels::avx2::adam_step(P + b, G + b, M + b, V + b, e - b, b1, one_minus_b1, b2, one_minus_b2,
                                              bias2_sqrt, eps, step_size);
        for (; i < e; ++i) {
            const float gi = G[i];
            const float mi = M[i] * b1 + gi * one_minus_b1;
            const float vi = V[i] * b2 + (gi * gi) * one_minus_b2;
            M[i] = mi;
            V[i] = vi;
            P[i] -= mi / (std::sqrt(vi) / bias2_sqrt + eps) * step_size;
        }
    });
}
}  // namespace

void init_adam(py::module_ &m) {
    m.def("adam_step", &adam_step, py::arg("param"), py::arg("grad"), py::arg("exp_avg"), py::arg("exp_avg_sq"),
          py::arg("beta1"), py::arg("beta2"), py::arg("bias2_sqrt"), py::arg("eps"), py::arg("step_size"),
          "Adam's update of one float32 parameter in place, in one pass (twin: tensorbrain.optim.adam.adam_step)");
}
