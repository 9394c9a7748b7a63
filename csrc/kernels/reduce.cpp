// The reduction kernels of reduce.h. Written as one small loop per (dtype, op) so the compiler
// vectorizes the integer and float32/64 cases at -O3; no -ffast-math anywhere, so NaN/inf and
// rounding follow IEEE exactly like NumPy.
#include "kernels/reduce.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace tb::kernels {
namespace {

// ***** float16 conversions *****
// Bit-level conversions (no F16C: wheels target baseline x86-64). float_to_half follows NumPy's
// npy_floatbits_to_halfbits: round to nearest-even, overflow to inf, NaN keeps its top payload.
inline std::uint32_t bits_of(float f) { std::uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float float_of(std::uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// ***** per-op element functions *****
// Integers combine in an unsigned type at least as wide as int, so overflow wraps like NumPy
// instead of being undefined behaviour (uint16*uint16 would overflow a signed int).
template <class T>
using wide_unsigned_t = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T> inline T wrap_add(T a, T b) {
    using W = wide_unsigned_t<T>;
    return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
}
template <class T> inline T wrap_mul(T a, T b) {
    using W = wide_unsigned_t<T>;
    return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
}
// NumPy's minimum/maximum propagate NaN from either side.
template <class T> inline T nan_min(T a, T b) { return (std::isnan(a) || a < b) ? a : b; }
template <class T> inline T nan_max(T a, T b) { return (std::isnan(a) || a > b) ? a : b; }

template <class T, class F> void loop(void *dst, const void *src, std::size_t n, F f) {
    T *d = static_cast<T *>(dst);
    const T *s = static_cast<const T *>(src);
    for (std::size_t i = 0; i < n; ++i) d[i] = f(d[i], s[i]);
}

template <class T> void reduce_int(void *d, const void *s, std::size_t n, Op op) {
    switch (op) {
        case Op::sum: return loop<T>(d, s, n, [](T a, T b) { return wrap_add(a, b); });
        case Op::prod: return loop<T>(d, s, n, [](T a, T b) { return wrap_mul(a, b); });
        case Op::min: return loop<T>(d, s, n, [](T a, T b) { return b < a ? b : a; });
        case Op::max: return loop<T>(d, s, n, [](T a, T b) { return b > a ? b : a; });
        case Op::band: return loop<T>(d, s, n, [](T a, T b) { return static_cast<T>(a & b); });
        case Op::bor: return loop<T>(d, s, n, [](T a, T b) { return static_cast<T>(a | b); });
        case Op::bxor: return loop<T>(d, s, n, [](T a, T b) { return static_cast<T>(a ^ b); });
    }
}

// NumPy bools are bytes holding 0 or 1: sum/max = or, prod/min = and.
void reduce_bool(void *d, const void *s, std::size_t n, Op op) {
    using T = std::uint8_t;
    switch (op) {
        case Op::sum: case Op::max: case Op::bor:
            return loop<T>(d, s, n, [](T a, T b) { return static_cast<T>(a | b); });
        case Op::prod: case Op::min: case Op::band:
            return loop<T>(d, s, n, [](T a, T b) { return static_cast<T>(a & b); });
        case Op::bxor: return loop<T>(d, s, n, [](T a, T b) { return static_cast<T>(a ^ b); });
    }
}

template <class T> void reduce_float(void *d, const void *s, std::size_t n, Op op) {
    switch (op) {
        case Op::sum: return loop<T>(d, s, n, [](T a, T b) { return a + b; });
        case Op::prod: return loop<T>(d, s, n, [](T a, T b) { return a * b; });
        case Op::min: return loop<T>(d, s, n, [](T a, T b) { return nan_min(a, b); });
        case Op::max: return loop<T>(d, s, n, [](T a, T b) { return nan_max(a, b); });
        default: break;
    }
    throw std::invalid_argument(std::string("op '") + op_name(op) + "' needs an integer or bool dtype");
}

// float16: combine in float32, round once back to half (NumPy's half loops do the same). min/max
// return one of the inputs unchanged, so they never round.
void reduce_half(void *dst, const void *src, std::size_t n, Op op) {
    using H = std::uint16_t;
    auto through_float = [&](auto f) {
        loop<H>(dst, src, n, [f](H a, H b) { return float_to_half(f(half_to_float(a), half_to_float(b))); });
    };
    switch (op) {
        case Op::sum: return through_float([](float a, float b) { return a + b; });
        case Op::prod: return through_float([](float a, float b) { return a * b; });
        case Op::min: return loop<H>(dst, src, n, [](H a, H b) {
            float fa = half_to_float(a), fb = half_to_float(b);
            return (std::isnan(fa) || fa < fb) ? a : b; });
        case Op::max: return loop<H>(dst, src, n, [](H a, H b) {
            float fa = half_to_float(a), fb = half_to_float(b);
            return (std::isnan(fa) || fa > fb) ? a : b; });
        default: break;
    }
    throw std::invalid_argument(std::string("op '") + op_name(op) + "' needs an integer or bool dtype");
}

}  // namespace

float half_to_float(std::uint16_t h) {
    std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return float_of(sign | 0x7f800000u | (man << 13));      // inf / NaN
    if (exp != 0) return float_of(sign | ((exp + 112) << 23) | (man << 13));  // normal
    // zero or subnormal: man * 2^-24 is exact in float32.
    float v = static_cast<float>(man) * 5.9604644775390625e-08f;
    return sign ? -v : v;
}

std::uint16_t float_to_half(float f) {
    std::uint32_t x = bits_of(f);
    std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    std::uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {                       // inf or NaN
        if (ax == 0x7f800000u) return sign | 0x7c00u;
        std::uint16_t r = static_cast<std::uint16_t>(0x7c00u + ((ax & 0x7fffffu) >> 13));
        if (r == 0x7c00u) ++r;                     // payload only in the low bits: stay NaN
        return sign | r;
    }
    if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
    if (ax < 0x38800000u) {                        // below 2^-14: half subnormal or zero
        if (ax < 0x33000000u) return sign;         // <= 2^-25 rounds to zero (tie goes to even 0)
        std::uint32_t e = ax >> 23;                // 102..112
        std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        std::uint32_t shift = 126 - e;             // 14..24: value = m * 2^(e-150) -> units of 2^-24
        std::uint32_t h = m >> shift;
        std::uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) ++h;
        return sign | static_cast<std::uint16_t>(h);
    }
    // normal half: rebias the exponent, round the 13 dropped mantissa bits to nearest-even; a carry
    // into the exponent is the correct result (up to inf at 65520).
    std::uint32_t h = ((ax >> 13) - (112u << 10));
    std::uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return sign | static_cast<std::uint16_t>(h);
}

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
    switch (dt) {
        case DType::float16: return reduce_half(dst, src, n, op);
        case DType::float32: return reduce_float<float>(dst, src, n, op);
        case DType::float64: return reduce_float<double>(dst, src, n, op);
        case DType::int8: return reduce_int<std::int8_t>(dst, src, n, op);
        case DType::int16: return reduce_int<std::int16_t>(dst, src, n, op);
        case DType::int32: return reduce_int<std::int32_t>(dst, src, n, op);
        case DType::int64: return reduce_int<std::int64_t>(dst, src, n, op);
        case DType::uint8: return reduce_int<std::uint8_t>(dst, src, n, op);
        case DType::bool_: return reduce_bool(dst, src, n, op);
    }
}

void scale_into(void *dst, std::size_t n, DType dt, double factor) {
    switch (dt) {
        case DType::float16: {
            auto *d = static_cast<std::uint16_t *>(dst);
            const float f = static_cast<float>(factor);
            for (std::size_t i = 0; i < n; ++i) d[i] = float_to_half(half_to_float(d[i]) * f);
            return;
        }
        case DType::float32: {
            auto *d = static_cast<float *>(dst);
            const float f = static_cast<float>(factor);
            for (std::size_t i = 0; i < n; ++i) d[i] *= f;
            return;
        }
        case DType::float64: {
            auto *d = static_cast<double *>(dst);
            for (std::size_t i = 0; i < n; ++i) d[i] *= factor;
            return;
        }
        default:
            throw std::invalid_argument(std::string("scale_into needs a floating dtype, got ") + dtype_name(dt));
    }
}

}  // namespace tb::kernels
