// The one entry point of tensorbrain._C. Each binding file defines one init_*(py::module_&) and
// registers it here with one declaration line and one call line (pybind11 scikit_build_example
// style), so files in csrc/<area>/ stay independent of each other.
#include <pybind11/pybind11.h>

namespace py = pybind11;

void init_kernels(py::module_ &m);
void init_pool(py::module_ &m);    // csrc/kernels/pool.cpp: max pooling forward/backward
void init_im2col(py::module_ &m);  // csrc/kernels/im2col.cpp: 2-D convolution columns
void init_winograd(py::module_ &m);  // csrc/kernels/winograd.cpp: Winograd F(2x2, 3x3) transforms
void init_lstm(py::module_ &m);    // csrc/kernels/lstm.cpp: the fused LSTM cell
void init_fused(py::module_ &m);   // csrc/kernels/fused.cpp: GELU, softmax, layer norm
void init_gemm(py::module_ &m);    // csrc/kernels/gemm.cpp: GEMM with a pre-packed right operand
void init_blas(py::module_ &m);    // csrc/kernels/blas.cpp: products on a CBLAS loaded at run time (MKL)
void init_parallel(py::module_ &m);  // csrc/kernels/parallel.cpp: the fused kernels' threads
void init_adam(py::module_ &m);    // csrc/kernels/adam.cpp: Adam's update in one pass
void init_sgd(py::module_ &m);     // csrc/kernels/sgd.cpp: SGD's momentum update in one pass
void init_shm(py::module_ &m);
void init_nccl(py::module_ &m);  // csrc/nccl/nccl.cpp: tensorbrain._C.nccl (dlopen, no CUDA needed)
void init_fingerprint(py::module_ &m);  // csrc/kernels/fingerprint.cpp: the mpi collective check's MPI ops

PYBIND11_MODULE(_C, m) {
    m.doc() = "TensorBrain native kernels (private; use tensorbrain._kernels / tensorbrain._native)";
    init_kernels(m);
    init_pool(m);
    init_im2col(m);
    init_winograd(m);
    init_lstm(m);
    init_fused(m);
    init_gemm(m);
    init_blas(m);
    init_parallel(m);
    init_adam(m);
    init_sgd(m);
    init_shm(m);
    init_nccl(m);
    init_fingerprint(m);
}
