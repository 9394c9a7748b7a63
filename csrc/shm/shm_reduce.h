// N-ary reduction kernels of the shared-memory transport: dst = op(src[0], src[1], ..., src[n-1]).
//
// Why an n-ary kernel and not H1's binary reduce.h: a rank reduces its slice reading every peer's
// buffer directly, and float16 must be accumulated in float32 ACROSS ALL RANKS and rounded to
// float16 once at the end (a chain of binary float16 adds rounds n-1 times and loses ~1 bit per
// rank). The NumPy twin is tensorbrain/distributed/_shm/_reduce.py::reduce_ranks, which does the
// same thing in the same order, so results match bit for bit (tests/distributed/test_shm_kernels.py).
//
// Order: ((src0 op src1) op src2) ... in rank order, element-wise, in the dtype's own arithmetic
// (float16: float32). Integer sum/prod wrap like NumPy (done in the unsigned type: signed overflow
// is undefined in C++). bool: sum/max/bor = or, prod/min/band = and, bxor = xor. min/max on floats
// propagate NaN like np.minimum/np.maximum.
//
// The loops are blocked (kBlock elements) so the destination block stays in L1 across the n
// passes; each pass is a plain loop over contiguous arrays that GCC vectorises at -O2/-O3.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace tb_shm {

enum class Op : int { Sum = 0, Prod, Min, Max, BAnd, BOr, BXor };
enum class DType : int { Bool = 0, I8, I16, I32, I64, U8, U16, U32, U64, F16, F32, F64 };

inline Op parse_op(const std::string &s) {
    if (s == "sum") return Op::Sum;
    if (s == "prod") return Op::Prod;
    if (s == "min") return Op::Min;
    if (s == "max") return Op::Max;
    if (s == "band") return Op::BAnd;
    if (s == "bor") return Op::BOr;
    if (s == "bxor") return Op::BXor;
    throw std::invalid_argument("shm: unknown reduce op '" + s +
                                "' (expected sum, prod, min, max, band, bor or bxor)");
}

inline std::size_t dtype_size(DType d) {
    switch (d) {
    case DType::Bool: case DType::I8: case DType::U8: return 1;
    case DType::I16: case DType::U16: case DType::F16: return 2;
    case DType::I32: case DType::U32: case DType::F32: return 4;
    default: return 8;
    }
}

inline const char *dtype_name(DType d) {
    static const char *names[] = {"bool", "int8", "int16", "int32", "int64", "uint8",
                                  "uint16", "uint32", "uint64", "float16", "float32", "float64"};
    return names[static_cast<int>(d)];
}

// Fingerprint-only dtype codes (the collective fingerprints of shm.cpp): a DType's value, or one
// of these for dtypes that the byte-moving collectives (broadcast, all_gather, all_to_all) copy
// but no kernel reduces. tensorbrain/distributed/_shm/_layout.py holds the same table.
constexpr int kFpComplex64 = 12, kFpComplex128 = 13, kFpOtherDtype = 254, kFpNoDtype = 255;

inline const char *fp_dtype_name(int code) {
    if (code >= 0 && code <= static_cast<int>(DType::F64)) return dtype_name(static_cast<DType>(code));
    if (code == kFpComplex64) return "complex64";
    if (code == kFpComplex128) return "complex128";
    return "another dtype";
}

inline const char *op_name(Op o) {
    static const char *names[] = {"sum", "prod", "min", "max", "band", "bor", "bxor"};
    return names[static_cast<int>(o)];
}

constexpr std::size_t kBlock = 2048;  // elements per block: 8 KiB of float32, well inside L1

// ***** element-wise binary functors *****
template <typename T> struct Wrap { using type = T; };  // arithmetic type for sum/prod
template <> struct Wrap<int8_t> { using type = uint8_t; };
template <> struct Wrap<int16_t> { using type = uint16_t; };
template <> struct Wrap<int32_t> { using type = uint32_t; };
template <> struct Wrap<int64_t> { using type = uint64_t; };

template <typename T> static inline T f_sum(T a, T b) {
    using W = typename Wrap<T>::type;
    return static_cast<T>(static_cast<W>(static_cast<W>(a) + static_cast<W>(b)));
}
template <typename T> static inline T f_prod(T a, T b) {
    using W = typename Wrap<T>::type;
    if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(int)) {
        // uint8/uint16 promote to int: multiply in unsigned int to avoid signed overflow UB.
        return static_cast<T>(static_cast<W>(static_cast<unsigned>(static_cast<W>(a)) *
                                             static_cast<unsigned>(static_cast<W>(b))));
    } else {
        return static_cast<T>(static_cast<W>(static_cast<W>(a) * static_cast<W>(b)));
    }
}
template <typename T> static inline T f_min(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return (a != a || a < b) ? a : b;  // NaN wins
    else return a < b ? a : b;
}
template <typename T> static inline T f_max(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return (a != a || a > b) ? a : b;
    else return a > b ? a : b;
}

// One pass: d[i] = f(a[i], b[i]) for a block. `a` may alias `d` exactly.
#define TB_SHM_PASS(NAME, EXPR)                                                              \
    template <typename T>                                                                    \
    static inline void NAME(T *d, const T *a, const T *b, std::size_t m) {                  \
        for (std::size_t i = 0; i < m; ++i) { T x = a[i], y = b[i]; d[i] = (EXPR); }         \
    }
TB_SHM_PASS(pass_sum, f_sum<T>(x, y))
TB_SHM_PASS(pass_prod, f_prod<T>(x, y))
TB_SHM_PASS(pass_min, f_min<T>(x, y))
TB_SHM_PASS(pass_max, f_max<T>(x, y))
TB_SHM_PASS(pass_and, static_cast<T>(x & y))
TB_SHM_PASS(pass_or, static_cast<T>(x | y))
TB_SHM_PASS(pass_xor, static_cast<T>(x ^ y))
#undef TB_SHM_PASS

template <typename T>
static void pass(Op op, T *d, const T *a, const T *b, std::size_t m) {
    switch (op) {
    case Op::Sum: pass_sum(d, a, b, m); break;
    case Op::Prod: pass_prod(d, a, b, m); break;
    case Op::Min: pass_min(d, a, b, m); break;
    case Op::Max: pass_max(d, a, b, m); break;
    case Op::BAnd:
        if constexpr (std::is_integral_v<T>) pass_and(d, a, b, m);
        break;
    case Op::BOr:
        if constexpr (std::is_integral_v<T>) pass_or(d, a, b, m);
        break;
    case Op::BXor:
        if constexpr (std::is_integral_v<T>) pass_xor(d, a, b, m);
        break;
    }
}

template <typename T>
static void reduce_typed(Op op, T *dst, const T *const *src, int n, std::size_t count) {
    // In place (dst == src[k], k >= 2): the first pass would overwrite src[k] before it is read,
    // so that source's block is saved first. dst == src[0] or src[1] is safe element-wise.
    int alias = -1;
    for (int k = 2; k < n; ++k)
        if (src[k] == dst) alias = k;
    T saved[kBlock];
    for (std::size_t o = 0; o < count; o += kBlock) {
        std::size_t m = count - o < kBlock ? count - o : kBlock;
        if (alias >= 0) std::memcpy(saved, src[alias] + o, m * sizeof(T));
        pass<T>(op, dst + o, src[0] + o, src[1] + o, m);
        for (int k = 2; k < n; ++k)
            pass<T>(op, dst + o, dst + o, (k == alias ? saved : src[k] + o), m);
    }
}

// bool as bytes 0/1: sum/max/bor -> or, prod/min/band -> and, bxor -> xor (NumPy's bool ufuncs).
static inline void reduce_bool(Op op, uint8_t *dst, const uint8_t *const *src, int n,
                               std::size_t count) {
    Op eff = (op == Op::Sum || op == Op::Max || op == Op::BOr)    ? Op::BOr
             : (op == Op::BXor)                                    ? Op::BXor
                                                                   : Op::BAnd;
    reduce_typed<uint8_t>(eff, dst, src, n, count);
}

// ***** float16: accumulate in float32 across all ranks, round once *****
// _Float16 (GCC >= 12 on x86-64) converts with IEEE round-to-nearest-even, like NumPy's astype.
static inline void reduce_f16(Op op, uint16_t *dst, const uint16_t *const *src, int n,
                              std::size_t count) {
    constexpr std::size_t B = 1024;
    float acc[B], tmp[B];
    for (std::size_t o = 0; o < count; o += B) {
        std::size_t m = count - o < B ? count - o : B;
        const _Float16 *s0 = reinterpret_cast<const _Float16 *>(src[0] + o);
        for (std::size_t i = 0; i < m; ++i) acc[i] = static_cast<float>(s0[i]);
        for (int k = 1; k < n; ++k) {
            const _Float16 *sk = reinterpret_cast<const _Float16 *>(src[k] + o);
            for (std::size_t i = 0; i < m; ++i) tmp[i] = static_cast<float>(sk[i]);
            pass<float>(op, acc, acc, tmp, m);
        }
        _Float16 *d = reinterpret_cast<_Float16 *>(dst + o);
        for (std::size_t i = 0; i < m; ++i) d[i] = static_cast<_Float16>(acc[i]);
    }
}

// Validate (dtype, op) before any rank touches shared memory, so a bad call fails on every rank
// the same way instead of leaving peers waiting.
inline void check_op(DType d, Op op) {
    bool bitwise = op == Op::BAnd || op == Op::BOr || op == Op::BXor;
    if (bitwise && (d == DType::F16 || d == DType::F32 || d == DType::F64))
        throw std::invalid_argument(std::string("shm: bitwise reduce op '") + op_name(op) +
                                    "' is not defined for " + dtype_name(d) +
                                    " (use an integer or bool tensor)");
}

// dst[0:count] = op over src[0..n-1][0:count]. dst may equal any src exactly (in place); it must
// not partially overlap one.
inline void reduce_ranks(DType d, Op op, void *dst, const void *const *src, int n,
                         std::size_t count) {
    if (count == 0) return;
    if (n == 1) {
        if (dst != src[0]) std::memmove(dst, src[0], count * dtype_size(d));
        return;
    }
#define TB_CASE(DT, T)                                                                        \
    case DType::DT:                                                                           \
        reduce_typed<T>(op, static_cast<T *>(dst), reinterpret_cast<const T *const *>(src), n, \
                        count);                                                               \
        return;
    switch (d) {
    case DType::Bool:
        reduce_bool(op, static_cast<uint8_t *>(dst), reinterpret_cast<const uint8_t *const *>(src),
                    n, count);
        return;
    case DType::F16:
        reduce_f16(op, static_cast<uint16_t *>(dst),
                   reinterpret_cast<const uint16_t *const *>(src), n, count);
        return;
    TB_CASE(I8, int8_t) TB_CASE(I16, int16_t) TB_CASE(I32, int32_t) TB_CASE(I64, int64_t)
    TB_CASE(U8, uint8_t) TB_CASE(U16, uint16_t) TB_CASE(U32, uint32_t) TB_CASE(U64, uint64_t)
    TB_CASE(F32, float) TB_CASE(F64, double)
    }
#undef TB_CASE
}

}  // namespace tb_shm
