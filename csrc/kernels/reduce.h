// Elementwise in-place reductions on raw contiguous buffers: dst = dst (op) src.
//
// Plain C++ (no Python): other native code (the shared-memory transport in csrc/shm/, ...) includes
// this header to reduce straight into its buffers. The Python binding and the argument checks that
// give Python users clear errors live in bind.cpp; the NumPy twin of every function here is in
// tensorbrain/_kernels.py and tests/test_kernels.py holds the two to bit-for-bit parity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tb::kernels {

enum class DType { float16, float32, float64, int8, int16, int32, int64, uint8, bool_ };
// The op names are the plain strings "sum", "prod", "min", "max", "band", "bor", "bxor".
// AVG is not an op: reduce with "sum", then scale_into(dst, 1/n).
enum class Op { sum, prod, min, max, band, bor, bxor };

// Parse a name; return false when unknown (no exception, so callers choose their error).
bool parse_op(std::string_view name, Op *out);
bool parse_dtype(std::string_view numpy_name, DType *out);
const char *op_name(Op op);
const char *dtype_name(DType dt);
bool is_floating(DType dt);
std::size_t itemsize(DType dt);

// dst[i] = dst[i] (op) src[i] for i < n, the NumPy ufunc semantics: integers wrap around, floats
// propagate NaN through min/max, bool sum/max = or, prod/min = and. float16 is combined in float32
// and rounded to nearest-even back to half, which is what NumPy's half loops do.
// Throws std::invalid_argument for a bitwise op on a floating dtype.
void reduce_into(void *dst, const void *src, std::size_t n, DType dt, Op op);

// dst[i] *= factor for floating dtypes (float16 multiplies in float32, float32 in float32 with
// factor rounded to float32, float64 in double). Throws std::invalid_argument for other dtypes.
void scale_into(void *dst, std::size_t n, DType dt, double factor);

// Which loops run on this CPU: "avx2+f16c" or "baseline" (chosen once, at first use).
const char *cpu_path();
// Whether the loops that have an AVX-512 body (the packed GEMM, gemm_avx512.cpp; the row kernels
// of fused_avx512.cpp) run it: on a CPU with AVX-512F unless a test forced another path. Every
// other loop runs the cpu_path() bodies.
bool use_avx512();
// Tests only: run "baseline", "avx2+f16c" or "avx512" (the AVX2 loops and the AVX-512 bodies)
// regardless of the CPU check ("auto" undoes it). Returns false for an unknown name or a path
// this CPU cannot run. Not thread-safe.
bool force_cpu_path(std::string_view name);

// IEEE binary16 <-> binary32, round to nearest-even, NaN payload kept as NumPy does.
float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);

}  // namespace tb::kernels
