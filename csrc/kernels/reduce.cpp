// The reduction kernels of reduce.h: names, the CPU dispatch and the error messages. The loops
// themselves are in reduce_loops.h, compiled here for baseline CPUs and in reduce_avx2.cpp with
// AVX2+F16C. No -ffast-math anywhere, so NaN/inf and rounding follow IEEE exactly like NumPy.
#include "kernels/reduce.h"

#include <stdexcept>
#include <string>

#define TB_KERNEL_NS baseline
#include "kernels/reduce_loops.h"
#undef TB_KERNEL_NS

namespace tb::kernels {

bool avx2_kernels_built();
bool avx512_kernels_built();
namespace avx2 {
bool reduce_into(void *dst, const void *src, std::size_t n, DType dt, Op op);
bool scale_into(void *dst, std::size_t n, DType dt, double factor);
}  // namespace avx2

namespace {
bool cpu_has_avx2() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    static const bool yes = avx2_kernels_built() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    return yes;
#else
    return false;
#endif
}
bool cpu_has_avx512() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    static const bool yes = avx512_kernels_built() && cpu_has_avx2() && __builtin_cpu_supports("avx512f");
    return yes;
#else
    return false;
#endif
}
// -1: by CPU; 0: baseline; 1: avx2; 2: avx2 with the AVX-512 GEMM (set only by tests,
// single-threaded)
int forced_path = -1;
bool use_avx2() { return forced_path < 0 ? cpu_has_avx2() : forced_path >= 1; }
}  // namespace

const char *cpu_path() { return use_avx2() ? "avx2+f16c" : "baseline"; }

bool use_avx512() { return forced_path < 0 ? cpu_has_avx512() : forced_path == 2; }

bool force_cpu_path(std::string_view name) {
    if (name == "auto") forced_path = -1;
    else if (name == "baseline") forced_path = 0;
    else if (name == "avx2+f16c" && cpu_has_avx2()) forced_path = 1;
    else if (name == "avx512" && cpu_has_avx512()) forced_path = 2;
    else return false;
    return true;
}

float half_to_float(std::uint16_t h) { return baseline::half_bits_to_float(h); }
std::uint16_t float_to_half(float f) { return baseline::float_to_half_bits(f); }

bool parse_op(std::string_view name, Op *out) {
    static const std::pair<std::string_view, Op> ops[] = {
        {"sum", Op::sum}, {"prod", Op::prod}, {"min", Op::min}, {"max", Op::max},
        {"band", Op::band}, {"bor", Op::bor}, {"bxor", Op::bxor}};
    for (auto &[n, op] : ops)
        if (n == name) { *out = op; return true; }
    return false;
}

bool parse_dtype(std::string_view name, DType *out) {
    static const std::pair<std::string_view, DType> dts[] = {
        {"float16", DType::float16}, {"float32", DType::float32}, {"float64", DType::float64},
        {"int8", DType::int8}, {"int16", DType::int16}, {"int32", DType::int32},
        {"int64", DType::int64}, {"uint8", DType::uint8}, {"bool", DType::bool_}};
    for (auto &[n, dt] : dts)
        if (n == name) { *out = dt; return true; }
    return false;
}

const char *op_name(Op op) {
    switch (op) {
        case Op::sum: return "sum"; case Op::prod: return "prod"; case Op::min: return "min";
        case Op::max: return "max"; case Op::band: return "band"; case Op::bor: return "bor";
        case Op::bxor: return "bxor";
    }
    return "?";
}

const char *dtype_name(DType dt) {
    switch (dt) {
        case DType::float16: return "float16"; case DType::float32: return "float32";
        case DType::float64: return "float64"; case DType::int8: return "int8";
        case DType::int16: return "int16"; case DType::int32: return "int32";
        case DType::int64: return "int64"; case DType::uint8: return "uint8";
        case DType::bool_: return "bool";
    }
    return "?";
}

bool is_floating(DType dt) {
    return dt == DType::float16 || dt == DType::float32 || dt == DType::float64;
}

std::size_t itemsize(DType dt) {
    switch (dt) {
        case DType::float16: case DType::int16: return 2;
        case DType::float32: case DType::int32: return 4;
        case DType::float64: case DType::int64: return 8;
        default: return 1;
    }
}

void reduce_into(void *dst, const void *src, std::size_t n, DType dt, Op op) {
    bool ok = use_avx2() ? avx2::reduce_into(dst, src, n, dt, op) : baseline::reduce_into(dst, src, n, dt, op);
    if (!ok)
        throw std::invalid_argument(std::string("op '") + op_name(op) + "' needs an integer or bool dtype, got " +
                                    dtype_name(dt));
}

void scale_into(void *dst, std::size_t n, DType dt, double factor) {
    bool ok = use_avx2() ? avx2::scale_into(dst, n, dt, factor) : baseline::scale_into(dst, n, dt, factor);
    if (!ok)
        throw std::invalid_argument(std::string("scale_into needs a floating dtype, got ") + dtype_name(dt));
}

}  // namespace tb::kernels
