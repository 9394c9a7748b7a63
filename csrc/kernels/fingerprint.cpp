// The mpi backend's collective check as one MPI reduction: a fixed-size message that carries a
// collective's fingerprint and, for a small all_reduce, its data (tensorbrain/distributed/
// backends/_mpi_inline.py is the Python side and says why).
//
// No MPI headers: the function below has MPI_User_function's C signature, and Python registers
// its address with MPI_Op_create. Message layout, in int64 words (kFpMessageBytes in all):
//   0 seq, 1 kind|op|dtype|root, 2 element count, 3 shapes hash or all_to_all balance,
//   4 control: bit 0 mismatch (set by the reduction), bit 1 "word 3 is summed" (all_to_all),
//     bits 8-15 payload dtype (tb::kernels::DType + 1; 0: no payload), bits 16-23 payload op,
//   5.. payload: word 2 elements of that dtype, reduced with that op (reduce.h, NumPy semantics).
// Two messages agree when words 0-2, the control word without bit 0 and (unless summed) word 3
// are equal; otherwise the result's bit 0 is set and its payload is left unreduced. The
// reduction is commutative, and associative wherever the payload op is.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>

#include "kernels/reduce.h"

namespace py = pybind11;
using namespace tb::kernels;

namespace {

constexpr std::size_t kHeaderWords = 5;
constexpr std::size_t kPayloadBytes = 256;
constexpr std::size_t kFpMessageBytes = kHeaderWords * 8 + kPayloadBytes;
constexpr std::uint64_t kMismatch = 1, kSummed = 2;

void fp_reduce_one(const unsigned char *in, unsigned char *inout) {
    std::int64_t a[kHeaderWords], b[kHeaderWords];
    std::memcpy(a, in, sizeof a);
    std::memcpy(b, inout, sizeof b);
    const auto ca = static_cast<std::uint64_t>(a[4]), cb = static_cast<std::uint64_t>(b[4]);
    const bool summed = cb & kSummed;
    bool bad = ((ca | cb) & kMismatch) || a[0] != b[0] || a[1] != b[1] || a[2] != b[2] ||
               ca != cb || (!summed && a[3] != b[3]);
    if (!bad) {
        if (summed)  // all_to_all balances: wrap-around sum, checked for zero by Python
            b[3] = static_cast<std::int64_t>(static_cast<std::uint64_t>(b[3]) + static_cast<std::uint64_t>(a[3]));
        const unsigned dt = (cb >> 8) & 0xFF, op = (cb >> 16) & 0xFF;
        if (dt) {
            const auto n = static_cast<std::uint64_t>(b[2]);
            const auto dtype = static_cast<DType>(dt - 1);
            if (dt - 1 > static_cast<unsigned>(DType::bool_) || op > static_cast<unsigned>(Op::bxor) ||
                n * itemsize(dtype) > kPayloadBytes) {
                bad = true;  // Python never sends this; refuse rather than read past the message
            } else {
                try {
                    reduce_into(inout + kHeaderWords * 8, in + kHeaderWords * 8, n, dtype, static_cast<Op>(op));
                } catch (...) {  // a bitwise op on floats: Python never sends it either
                    bad = true;
                }
            }
        }
    }
    if (bad) b[4] = static_cast<std::int64_t>(cb | kMismatch);
    std::memcpy(inout, b, sizeof b);
}

}  // namespace

// MPI_User_function: (invec, inoutvec, len, datatype). Python always passes count 1 of a
// contiguous datatype of kFpMessageBytes bytes, so len counts whole messages.
extern "C" void tb_fp_reduce(void *invec, void *inoutvec, int *len, void * /*datatype*/) {
    const auto *in = static_cast<const unsigned char *>(invec);
    auto *inout = static_cast<unsigned char *>(inoutvec);
    for (int k = 0; k < *len; ++k)
        fp_reduce_one(in + k * kFpMessageBytes, inout + k * kFpMessageBytes);
}

// MIN and MAX of floats with NumPy's semantics (a NaN wins), as MPI_User_functions over
// MPI_FLOAT / MPI_DOUBLE: MPICH's own MPI_MIN/MPI_MAX keep whichever operand a comparison with
// NaN favours, so ranks that reduce in another order get different results (nan on one rank,
// 1.0 on another: found by fault injection). reduce.h's loops are NumPy's.
#define TB_MINMAX(name, dtype, op)                                                           \
    extern "C" void name(void *in, void *inout, int *len, void * /*datatype*/) {             \
        reduce_into(inout, in, static_cast<std::size_t>(*len), DType::dtype, Op::op);         \
    }
TB_MINMAX(tb_min_f32, float32, min)
TB_MINMAX(tb_max_f32, float32, max)
TB_MINMAX(tb_min_f64, float64, min)
TB_MINMAX(tb_max_f64, float64, max)
#undef TB_MINMAX

void init_fingerprint(py::module_ &m) {
    m.attr("FP_MESSAGE_BYTES") = kFpMessageBytes;
    m.attr("FP_PAYLOAD_BYTES") = kPayloadBytes;
    m.def("fp_reduce_address", [] { return reinterpret_cast<std::uintptr_t>(&tb_fp_reduce); },
          "address of the C function tb_fp_reduce (an MPI_User_function) for MPI_Op_create");
    m.def("minmax_addresses", [] {
        py::dict d;
        d[py::make_tuple("float32", "min")] = reinterpret_cast<std::uintptr_t>(&tb_min_f32);
        d[py::make_tuple("float32", "max")] = reinterpret_cast<std::uintptr_t>(&tb_max_f32);
        d[py::make_tuple("float64", "min")] = reinterpret_cast<std::uintptr_t>(&tb_min_f64);
        d[py::make_tuple("float64", "max")] = reinterpret_cast<std::uintptr_t>(&tb_max_f64);
        return d;
    }, "{(dtype, op): address} of the NaN-propagating MIN/MAX MPI_User_functions");
    // The codes the control word uses, in tb::kernels order, so Python never hard-codes them.
    py::list dtypes, ops;
    for (int i = 0; i <= static_cast<int>(DType::bool_); ++i) dtypes.append(dtype_name(static_cast<DType>(i)));
    for (int i = 0; i <= static_cast<int>(Op::bxor); ++i) ops.append(op_name(static_cast<Op>(i)));
    m.attr("FP_DTYPES") = dtypes;
    m.attr("FP_OPS") = ops;
    m.def("_fp_reduce", [](py::buffer in, py::buffer inout) {  // tests: run the reduction on bytes
        py::buffer_info a = in.request(), b = inout.request(true);
        if (static_cast<std::size_t>(a.size * a.itemsize) != kFpMessageBytes ||
            static_cast<std::size_t>(b.size * b.itemsize) != kFpMessageBytes)
            throw py::value_error("_fp_reduce: both buffers must be FP_MESSAGE_BYTES long");
        int one = 1;
        tb_fp_reduce(a.ptr, b.ptr, &one, nullptr);
    }, py::arg("invec"), py::arg("inoutvec"), "tests only: inoutvec = invec (fp op) inoutvec");
}
