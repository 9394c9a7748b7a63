// pybind11 bindings of the shared-memory transport: tensorbrain._C.ShmGroup and
// tensorbrain._C.shm_reduce_ranks. Python wraps them in tensorbrain/distributed/_shm/_native.py.
// Every collective releases the GIL for its whole duration (DDP overlaps Python work with it).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "shm.h"

namespace py = pybind11;
using tb_shm::DType;
using tb_shm::Group;

namespace {

DType dtype_of(const py::array &a, const char *what) {
    py::dtype dt = a.dtype();
    char kind = dt.kind();
    auto size = dt.itemsize();
    if (kind == 'b') return DType::Bool;
    if (kind == 'f') {
        if (size == 2) return DType::F16;
        if (size == 4) return DType::F32;
        if (size == 8) return DType::F64;
    }
    if (kind == 'i' || kind == 'u') {
        bool u = kind == 'u';
        switch (size) {
        case 1: return u ? DType::U8 : DType::I8;
        case 2: return u ? DType::U16 : DType::I16;
        case 4: return u ? DType::U32 : DType::I32;
        case 8: return u ? DType::U64 : DType::I64;
        }
    }
    throw std::invalid_argument(std::string("shm: ") + what + " has dtype " +
                                py::str(dt).cast<std::string>() +
                                ", which the shared-memory transport does not support");
}

void check_contig(const py::array &a, const char *what, bool writable) {
    if (!(a.flags() & py::array::c_style))
        throw std::invalid_argument(std::string("shm: ") + what +
                                    " must be C-contiguous (call .contiguous() first)");
    if (writable && !a.writeable())
        throw std::invalid_argument(std::string("shm: ") + what + " is read-only");
}

const void *cptr(const py::array &a) { return a.data(); }
void *mptr(py::array &a) { return a.mutable_data(); }

void same_dtype(const py::array &a, const py::array &b) {
    if (!a.dtype().is(b.dtype()) && !a.dtype().equal(b.dtype()))
        throw std::invalid_argument("shm: input dtype " + py::str(a.dtype()).cast<std::string>() +
                                    " differs from output dtype " +
                                    py::str(b.dtype()).cast<std::string>());
}

}  // namespace

void init_shm(py::module_ &m) {
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const tb_shm::ShmError &e) {
            py::module_ errors = py::module_::import("tensorbrain.distributed.errors");
            py::object cls = errors.attr(e.kind == 1 ? "DistTimeoutError" : "DistBackendError");
            py::object exc = cls(e.what());
            exc.attr("rank") = e.rank;
            PyErr_SetObject(cls.ptr(), exc.ptr());
        }
    });

    py::class_<Group>(m, "ShmGroup",
                      "Shared-memory collectives for the ranks of one group on one host "
                      "(private; use tensorbrain.distributed._shm).")
        .def(py::init([](const std::string &name, int rank, int nranks, bool create,
                         std::size_t buf_bytes, double timeout_s) {
                 return new Group(name, rank, nranks, create, buf_bytes, timeout_s);
             }),
             py::arg("name"), py::arg("rank"), py::arg("nranks"), py::arg("create"),
             py::arg("buf_bytes"), py::arg("timeout_s"))
        .def_property_readonly("rank", &Group::rank)
        .def_property_readonly("size", &Group::size)
        .def_property_readonly("name", &Group::name)
        .def_property_readonly("buf_bytes", &Group::buf_bytes)
        .def_property_readonly("closed", &Group::closed)
        .def_readwrite("flat_max_bytes", &Group::flat_max_bytes)
        .def_readwrite("timeout_s", &Group::timeout_s)
        .def_property("spin", &Group::spin, &Group::set_spin)
        .def_readwrite("yield_us", &Group::yield_us)
        .def("wait_attached", &Group::wait_attached, py::call_guard<py::gil_scoped_release>())
        .def("abort", &Group::abort)
        .def("close", &Group::close)
        .def("unlink", &Group::unlink)
        .def("barrier", &Group::barrier, py::call_guard<py::gil_scoped_release>())
        .def("all_reduce",
             [](Group &g, py::array in, py::array out, const std::string &op) {
                 check_contig(in, "all_reduce input", false);
                 check_contig(out, "all_reduce output", true);
                 same_dtype(in, out);
                 if (in.size() != out.size())
                     throw std::invalid_argument("shm: all_reduce input has " +
                                                 std::to_string(in.size()) + " elements, output " +
                                                 std::to_string(out.size()));
                 DType d = dtype_of(in, "all_reduce input");
                 auto o = tb_shm::parse_op(op);
                 const void *ip = cptr(in);
                 void *opp = mptr(out);
                 std::size_t n = static_cast<std::size_t>(in.size());
                 py::gil_scoped_release nogil;
                 g.all_reduce(ip, opp, n, d, o);
             },
             py::arg("input"), py::arg("output"), py::arg("op"))
        .def("broadcast",
             [](Group &g, py::array buf, int root) {
                 check_contig(buf, "broadcast buffer", true);
                 void *p = mptr(buf);
                 std::size_t nb = static_cast<std::size_t>(buf.nbytes());
                 py::gil_scoped_release nogil;
                 g.broadcast(p, nb, root);
             },
             py::arg("buffer"), py::arg("root"))
        .def("all_gather",
             [](Group &g, py::array in, py::array out) {
                 check_contig(in, "all_gather input", false);
                 check_contig(out, "all_gather output", true);
                 same_dtype(in, out);
                 if (out.nbytes() != in.nbytes() * g.size())
                     throw std::invalid_argument(
                         "shm: all_gather output must hold world_size * input elements (" +
                         std::to_string(g.size() * in.size()) + "), got " +
                         std::to_string(out.size()));
                 const void *ip = cptr(in);
                 void *opp = mptr(out);
                 std::size_t nb = static_cast<std::size_t>(in.nbytes());
                 py::gil_scoped_release nogil;
                 g.all_gather(ip, opp, nb);
             },
             py::arg("input"), py::arg("output"))
        .def("reduce_scatter",
             [](Group &g, py::array in, py::array out, const std::string &op) {
                 check_contig(in, "reduce_scatter input", false);
                 check_contig(out, "reduce_scatter output", true);
                 same_dtype(in, out);
                 if (in.size() != out.size() * g.size())
                     throw std::invalid_argument(
                         "shm: reduce_scatter input must hold world_size * output elements (" +
                         std::to_string(g.size() * out.size()) + "), got " +
                         std::to_string(in.size()));
                 DType d = dtype_of(in, "reduce_scatter input");
                 auto o = tb_shm::parse_op(op);
                 const void *ip = cptr(in);
                 void *opp = mptr(out);
                 std::size_t c = static_cast<std::size_t>(out.size());
                 py::gil_scoped_release nogil;
                 g.reduce_scatter(ip, opp, c, d, o);
             },
             py::arg("input"), py::arg("output"), py::arg("op"))
        .def("all_to_all",
             [](Group &g, py::array in, py::array out) {
                 check_contig(in, "all_to_all input", false);
                 check_contig(out, "all_to_all output", true);
                 same_dtype(in, out);
                 if (in.nbytes() != out.nbytes() || in.nbytes() % g.size() != 0)
                     throw std::invalid_argument(
                         "shm: all_to_all input and output must have the same size, divisible "
                         "by world_size " + std::to_string(g.size()));
                 const void *ip = cptr(in);
                 void *opp = mptr(out);
                 std::size_t s = static_cast<std::size_t>(in.nbytes()) / g.size();
                 py::gil_scoped_release nogil;
                 g.all_to_all(ip, opp, s);
             },
             py::arg("input"), py::arg("output"));

    m.def("shm_segment_bytes", &tb_shm::segment_bytes, py::arg("nranks"), py::arg("buf_bytes"),
          "Size in bytes of a shared-memory segment for nranks ranks.");
    m.def("shm_header_bytes", &tb_shm::header_bytes, py::arg("nranks"));
    m.def("shm_reduce_ranks",
          [](py::array dst, std::vector<py::array> srcs, const std::string &op) {
              check_contig(dst, "reduce_ranks dst", true);
              if (srcs.empty()) throw std::invalid_argument("shm: reduce_ranks needs a source");
              DType d = dtype_of(dst, "reduce_ranks dst");
              auto o = tb_shm::parse_op(op);
              tb_shm::check_op(d, o);
              std::vector<const void *> ptrs;
              for (auto &s : srcs) {
                  check_contig(s, "reduce_ranks src", false);
                  same_dtype(s, dst);
                  if (s.size() != dst.size())
                      throw std::invalid_argument("shm: reduce_ranks sources must match dst size");
                  ptrs.push_back(s.data());
              }
              void *dp = mptr(dst);
              std::size_t n = static_cast<std::size_t>(dst.size());
              py::gil_scoped_release nogil;
              tb_shm::reduce_ranks(d, o, dp, ptrs.data(), static_cast<int>(ptrs.size()), n);
          },
          py::arg("dst"), py::arg("srcs"), py::arg("op"),
          "dst = op(srcs[0], ..., srcs[n-1]) as the shm transport reduces (float16 in float32).");
}
