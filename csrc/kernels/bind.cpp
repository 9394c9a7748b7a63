// Python bindings of reduce.h: tensorbrain._C.reduce_into / scale_into. Checks every argument
// with errors that name shapes and dtypes (the NumPy twin in tensorbrain/_kernels.py raises the
// same types with the same words), then runs the kernel with the GIL released.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/pyarray.h"
#include "kernels/reduce.h"

namespace py = pybind11;
using namespace tb::kernels;

namespace {

using tb::kernels::shape_str;

std::string dtype_str(const py::array &a) { return py::str(a.dtype()).cast<std::string>(); }

// From the descriptor's kind/itemsize/byteorder fields (C struct reads): building the dtype's
// name with py::str on every call cost several microseconds, more than a small reduction itself.
bool dtype_of(const py::dtype &d, DType *out) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    constexpr char native_order = '>';
#else
    constexpr char native_order = '<';
#endif
    const char order = d.byteorder();  // '=' native, '|' not applicable, '<' / '>' explicit
    if ((order == '<' || order == '>') && order != native_order) return false;
    const py::ssize_t size = d.itemsize();
    switch (d.kind()) {
        case 'f': *out = size == 2 ? DType::float16 : size == 4 ? DType::float32 : DType::float64; return size == 2 || size == 4 || size == 8;
        case 'i': *out = size == 1 ? DType::int8 : size == 2 ? DType::int16 : size == 4 ? DType::int32 : DType::int64; return size == 1 || size == 2 || size == 4 || size == 8;
        case 'u': *out = DType::uint8; return size == 1;
        case 'b': *out = DType::bool_; return size == 1;
        default: return false;
    }
}

DType checked_dtype(const char *fn, const char *arg, const py::array &a) {
    DType dt;
    if (!dtype_of(a.dtype(), &dt))
        throw py::type_error(std::string(fn) + ": unsupported dtype " + dtype_str(a) + " for " + arg +
                             "; supported: float16, float32, float64, int8, int16, int32, int64, uint8, bool");
    return dt;
}

void check_writable_contiguous(const char *fn, const char *arg, const py::array &a) {
    if (!(a.flags() & py::array::c_style))
        throw py::value_error(std::string(fn) + ": " + arg + " must be C-contiguous (got shape " + shape_str(a) +
                              " with non-contiguous strides); pass np.ascontiguousarray(" + arg + ")");
    if (std::string(arg) == "dst" && !a.writeable())
        throw py::value_error(std::string(fn) + ": dst is read-only; it is written in place");
}

void py_reduce_into(py::array dst, py::array src, const std::string &op_text) {
    const char *fn = "reduce_into";
    Op op;
    if (!parse_op(op_text, &op))
        throw py::value_error("reduce_into: unknown op '" + op_text +
                              "'; expected one of sum, prod, min, max, band, bor, bxor (AVG is sum then scale_into)");
    DType dt = checked_dtype(fn, "dst", dst);
    DType src_dt;
    if (!dtype_of(src.dtype(), &src_dt) || src_dt != dt)
        throw py::type_error("reduce_into: dtype mismatch: dst is " + dtype_str(dst) + ", src is " + dtype_str(src) +
                             "; cast src to dst's dtype first");
    if (is_floating(dt) && (op == Op::band || op == Op::bor || op == Op::bxor))
        throw py::type_error("reduce_into: op '" + op_text + "' needs an integer or bool dtype, got " + dtype_str(dst));
    if (dst.ndim() != src.ndim() || !std::equal(dst.shape(), dst.shape() + dst.ndim(), src.shape()))
        throw py::value_error("reduce_into: shape mismatch: dst " + shape_str(dst) + " vs src " + shape_str(src));
    check_writable_contiguous(fn, "dst", dst);
    check_writable_contiguous(fn, "src", src);
    void *d = dst.mutable_data();
    const void *s = src.data();
    const std::size_t n = static_cast<std::size_t>(dst.size());
    py::gil_scoped_release nogil;
    reduce_into(d, s, n, dt, op);
}

void py_scale_into(py::array dst, double factor) {
    DType dt = checked_dtype("scale_into", "dst", dst);
    if (!is_floating(dt))
        throw py::type_error("scale_into: needs a floating dtype (float16/32/64), got " + dtype_str(dst) +
                             "; averaging integers is not defined here, divide explicitly");
    check_writable_contiguous("scale_into", "dst", dst);
    void *d = dst.mutable_data();
    const std::size_t n = static_cast<std::size_t>(dst.size());
    py::gil_scoped_release nogil;
    scale_into(d, n, dt, factor);
}

}  // namespace

void init_kernels(py::module_ &m) {
    m.def("reduce_into", &py_reduce_into, py::arg("dst"), py::arg("src"), py::arg("op"),
          "dst = dst (op) src elementwise, in place. op in {sum, prod, min, max, band, bor, bxor}.");
    m.def("scale_into", &py_scale_into, py::arg("dst"), py::arg("factor"),
          "dst *= factor in place (floating dtypes; float16 multiplies in float32).");
    m.def("_cpu_path", &cpu_path, "which loops run: 'avx2+f16c' or 'baseline'");
    m.def("_avx512", &use_avx512, "whether the loops with an AVX-512 body (the packed GEMM, the row kernels) run it");
    m.def("_force_cpu_path", [](const std::string &name) {
        if (!force_cpu_path(name))
            throw py::value_error("_force_cpu_path: '" + name + "' is unknown or not supported by this CPU");
    }, "tests only: run the 'baseline', 'avx2+f16c' or 'avx512' (AVX2 loops and the AVX-512 bodies) loops "
       "regardless of the CPU ('auto' undoes it)");
    // Lets tests compare the C++ float32 -> float16 rounding with NumPy's astype on many values.
    m.def("_float_to_half_bits", [](py::array_t<float, py::array::c_style> x) {
        py::array_t<std::uint16_t> out(x.size());
        auto *o = out.mutable_data();
        const float *p = x.data();
        for (py::ssize_t i = 0; i < x.size(); ++i) o[i] = float_to_half(p[i]);
        return out;
    }, "float32 -> float16 bits with the kernel's rounding (test helper)");
}
