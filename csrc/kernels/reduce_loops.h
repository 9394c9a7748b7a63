// The loops behind reduce.h, compiled twice: once for baseline x86-64 / any CPU (reduce.cpp) and
// once with AVX2+F16C (reduce_avx2.cpp), each copy inside its own namespace TB_KERNEL_NS so the
// two never mix at link time. reduce.cpp picks the copy at run time with __builtin_cpu_supports,
// so wheels stay portable while this machine's CPU gets the wide loops.
//
// Keep this header free of anything that instantiates shared inline code out of line (std::string,
// exceptions, iostreams): an AVX2 copy of such code could be picked by the linker for the baseline
// callers and crash older CPUs. Errors are returned as false; reduce.cpp throws.
#ifndef TB_KERNEL_NS
#error "define TB_KERNEL_NS before including kernels/reduce_loops.h"
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/reduce.h"

#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#endif

namespace tb::kernels::TB_KERNEL_NS {
namespace {

inline std::uint32_t bits_of(float f) { std::uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float float_of(std::uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// ***** float16 <-> float32 (software; NumPy's npy_half_to_float / npy_float_to_half) *****
inline float h2f(std::uint16_t h) {
    std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return float_of(sign | 0x7f800000u | (man << 13));      // inf / NaN
    if (exp != 0) return float_of(sign | ((exp + 112) << 23) | (man << 13));  // normal
    float v = static_cast<float>(man) * 5.9604644775390625e-08f;             // man * 2^-24, exact
    return sign ? -v : v;
}

inline std::uint16_t f2h(float f) {
    std::uint32_t x = bits_of(f);
    std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    std::uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {                       // inf or NaN
        if (ax == 0x7f800000u) return sign | 0x7c00u;
        std::uint16_t r = static_cast<std::uint16_t>(0x7c00u + ((ax & 0x7fffffu) >> 13));
        if (r == 0x7c00u) ++r;                     // payload only in the dropped bits: stay NaN
        return sign | r;
    }
    if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
    if (ax < 0x38800000u) {                        // below 2^-14: half subnormal or zero
        if (ax < 0x33000000u) return sign;         // <= 2^-25 rounds to zero (tie goes to even 0)
        std::uint32_t e = ax >> 23;                // 102..112
        std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        std::uint32_t shift = 126 - e;             // 14..24: result in units of 2^-24
        std::uint32_t h = m >> shift;
        std::uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        h += (rem > half) | ((rem == half) & h);   // nearest, ties to even
        return sign | static_cast<std::uint16_t>(h);
    }
    // Normal half: rebias the exponent and round the 13 dropped bits to nearest-even without a
    // branch (a data-dependent branch here cost ~3x in the float16 sum, measured); a carry into
    // the exponent is the right answer, up to inf at 65520.
    std::uint32_t h = (ax - (112u << 23) + 0xfffu + ((ax >> 13) & 1u)) >> 13;
    return sign | static_cast<std::uint16_t>(h);
}

// ***** element functions *****
// Integers combine in an unsigned type at least as wide as int: overflow wraps like NumPy instead
// of being undefined behaviour (int16*int16 would overflow a signed int after promotion).
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
// NumPy's minimum/maximum propagate NaN from either side. Bitwise | (not ||) keeps it branch-free
// so the compiler vectorizes it (|| left float32 max 3x slower than NumPy, measured).
template <class T> inline T nan_min(T a, T b) { return ((a < b) | (a != a)) ? a : b; }
template <class T> inline T nan_max(T a, T b) { return ((a > b) | (a != a)) ? a : b; }

template <class T, class F> inline void loop(void *dst, const void *src, std::size_t n, F f) {
    // No __restrict: dst == src is allowed (scale_into, reduce_into(a, a, op)).
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

template <class T> bool reduce_float(void *d, const void *s, std::size_t n, Op op) {
    switch (op) {
        case Op::sum: loop<T>(d, s, n, [](T a, T b) { return a + b; }); return true;
        case Op::prod: loop<T>(d, s, n, [](T a, T b) { return a * b; }); return true;
        case Op::min: loop<T>(d, s, n, [](T a, T b) { return nan_min(a, b); }); return true;
        case Op::max: loop<T>(d, s, n, [](T a, T b) { return nan_max(a, b); }); return true;
        default: return false;
    }
}

// float16 through float32, rounded once back to half (NumPy's half loops do the same). With F16C
// the conversions are single instructions (vcvtph2ps / vcvtps2ph, round-to-nearest-even, bit-
// identical to the software path for every non-NaN value); f works on floats and __m256 alike.
template <class F> void half_through_float(void *dst, const void *src, std::size_t n, F f) {
    auto *d = static_cast<std::uint16_t *>(dst);
    const auto *s = static_cast<const std::uint16_t *>(src);
    std::size_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(d + i)));
        __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i)));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(d + i), _mm256_cvtps_ph(f(a, b), _MM_FROUND_TO_NEAREST_INT));
    }
#endif
    for (; i < n; ++i) d[i] = f2h(f(h2f(d[i]), h2f(s[i])));
}

bool reduce_half(void *dst, const void *src, std::size_t n, Op op) {
    using H = std::uint16_t;
    switch (op) {
        case Op::sum: half_through_float(dst, src, n, [](auto a, auto b) { return a + b; }); return true;
        case Op::prod: half_through_float(dst, src, n, [](auto a, auto b) { return a * b; }); return true;
        // min/max return one input unchanged, so they never round.
        case Op::min: loop<H>(dst, src, n, [](H a, H b) {
            float fa = h2f(a), fb = h2f(b); return ((fa < fb) | (fa != fa)) ? a : b; }); return true;
        case Op::max: loop<H>(dst, src, n, [](H a, H b) {
            float fa = h2f(a), fb = h2f(b); return ((fa > fb) | (fa != fa)) ? a : b; }); return true;
        default: return false;
    }
}

}  // namespace

bool reduce_into(void *dst, const void *src, std::size_t n, DType dt, Op op) {
    switch (dt) {
        case DType::float16: return reduce_half(dst, src, n, op);
        case DType::float32: return reduce_float<float>(dst, src, n, op);
        case DType::float64: return reduce_float<double>(dst, src, n, op);
        case DType::int8: reduce_int<std::int8_t>(dst, src, n, op); return true;
        case DType::int16: reduce_int<std::int16_t>(dst, src, n, op); return true;
        case DType::int32: reduce_int<std::int32_t>(dst, src, n, op); return true;
        case DType::int64: reduce_int<std::int64_t>(dst, src, n, op); return true;
        case DType::uint8: reduce_int<std::uint8_t>(dst, src, n, op); return true;
        case DType::bool_: reduce_bool(dst, src, n, op); return true;
    }
    return false;
}

bool scale_into(void *dst, std::size_t n, DType dt, double factor) {
    switch (dt) {
        case DType::float16: {
            const float f = static_cast<float>(factor);
#if defined(__F16C__) && defined(__AVX__)
            const __m256 fv = _mm256_set1_ps(f);
            half_through_float(dst, dst, n, [f, fv](auto a, auto) {
                if constexpr (std::is_same_v<decltype(a), float>) return a * f; else return a * fv; });
#else
            half_through_float(dst, dst, n, [f](float a, float) { return a * f; });
#endif
            return true;
        }
        case DType::float32: {
            const float f = static_cast<float>(factor);
            loop<float>(dst, dst, n, [f](float a, float) { return a * f; });
            return true;
        }
        case DType::float64:
            loop<double>(dst, dst, n, [factor](double a, double) { return a * factor; });
            return true;
        default:
            return false;
    }
}

std::uint16_t float_to_half_bits(float f) { return f2h(f); }
float half_bits_to_float(std::uint16_t h) { return h2f(h); }

}  // namespace tb::kernels::TB_KERNEL_NS
