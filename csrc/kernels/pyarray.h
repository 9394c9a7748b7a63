// Small checks the kernels' Python bindings share: an array's shape as text for error messages,
// and the float32/float64 C-contiguous check of the column and Winograd kernels (their NumPy
// twins take every other dtype).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

namespace tb::kernels {

inline std::string shape_str(const pybind11::array &a) { return pybind11::str(a.attr("shape")).cast<std::string>(); }

// True for float32, false for float64; raises for a non-contiguous array or another dtype,
// naming `fn` and the argument `what`.
inline bool is_f32(const char *fn, const pybind11::array &a, const char *what) {
    if (!(a.flags() & pybind11::array::c_style))
        throw pybind11::value_error(std::string(fn) + ": " + what + " must be C-contiguous (got shape " + shape_str(a) + ")");
    if (a.dtype().kind() != 'f' || (a.itemsize() != 4 && a.itemsize() != 8))
        throw pybind11::type_error(std::string(fn) + ": float32 or float64 only, got " +
                                   pybind11::str(a.dtype()).cast<std::string>() + " (the NumPy twin takes the others)");
    return a.itemsize() == 4;
}

}  // namespace tb::kernels
