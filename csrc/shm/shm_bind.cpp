// pybind11 bindings of the shared-memory transport: tensorbrain._C.ShmGroup and
// tensorbrain._C.shm_reduce_ranks. Python wraps them in tensorbrain/distributed/_shm/_native.py.
// Every collective releases the GIL for its whole duration (DDP overlaps Python work with it).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "kernels/reduce.h"
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

// The dtype as the collective fingerprint records it (shm_reduce.h: a DType's value, complex,
// or "another dtype"); never throws: the byte-moving collectives take any dtype.
int fp_dtype(const py::array &a) {
    py::dtype dt = a.dtype();
    char kind = dt.kind();
    auto size = dt.itemsize();
    if (kind == 'c') {
        if (size == 8) return tb_shm::kFpComplex64;
        if (size == 16) return tb_shm::kFpComplex128;
        return tb_shm::kFpOtherDtype;
    }
    if (kind == 'b' || ((kind == 'f') && (size == 2 || size == 4 || size == 8)) ||
        ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)))
        return static_cast<int>(dtype_of(a, "buffer"));
    return tb_shm::kFpOtherDtype;
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

// all_reduce_inplace's eligibility: the dtypes the tcp backend reduces (tensorbrain._kernels.DTYPES:
// float16/32/64, int8/16/32/64, uint8, bool) for SUM, float32/64 for AVG (float16 AVG divides
// before the sum: the Python path does that). Kind and itemsize are C struct reads, no Python call.
bool fast_dtype(const py::array &a, bool avg, DType *d, tb::kernels::DType *kd) {
    py::dtype dt = a.dtype();
    char kind = dt.kind();
    auto size = dt.itemsize();
    if (kind == 'f' && (size == 4 || size == 8)) {
        *d = size == 4 ? DType::F32 : DType::F64;
        *kd = size == 4 ? tb::kernels::DType::float32 : tb::kernels::DType::float64;
        return true;
    }
    if (avg) return false;
    if (kind == 'f' && size == 2) *d = DType::F16;
    else if (kind == 'b') *d = DType::Bool;
    else if (kind == 'u' && size == 1) *d = DType::U8;
    else if (kind == 'i' && size == 1) *d = DType::I8;
    else if (kind == 'i' && size == 2) *d = DType::I16;
    else if (kind == 'i' && size == 4) *d = DType::I32;
    else if (kind == 'i' && size == 8) *d = DType::I64;
    else return false;
    return true;
}

struct BusyMark {
    Group &g;
    explicit BusyMark(Group &g_) : g(g_) { g.busy.store(1, std::memory_order_seq_cst); }
    ~BusyMark() { g.busy.store(0, std::memory_order_seq_cst); }
};

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
        .def("all_reduce_inplace",
             [](Group &g, py::handle obj, bool avg) -> bool {
                 // The fast path's whole call: False (nothing done) unless obj is a writable
                 // C-contiguous NumPy array of a dtype the op takes; then SUM (AVG: SUM, each
                 // reduced slice x 1/size with the kernel the Python path uses: the same bits)
                 // in place.
                 if (!py::isinstance<py::array>(obj)) return false;
                 auto a = py::reinterpret_borrow<py::array>(obj);
                 if (!(a.flags() & py::array::c_style) || !a.writeable()) return false;
                 DType d;
                 tb::kernels::DType kd;
                 if (!fast_dtype(a, avg, &d, &kd)) return false;
                 void *p = a.mutable_data();
                 std::size_t n = static_cast<std::size_t>(a.size());
                 py::gil_scoped_release nogil;
                 BusyMark mark(g);
                 // AVG: the 1/size scale runs inside the reduce step (shm.cpp, scale_slice).
                 double scale = avg && g.size() > 1 ? 1.0 / g.size() : 0.0;
                 g.all_reduce(p, p, n, d, tb_shm::Op::Sum, scale);
                 return true;
             },
             py::arg("array"), py::arg("avg"))
        .def("arena_array",
             [](py::object self) {
                 // This rank's slot of a resident-arena segment as uint8; the array keeps the
                 // group (and so the mapping) alive.
                 Group &g = self.cast<Group &>();
                 if (g.closed()) throw std::invalid_argument("shm: arena_array on a closed group");
                 return py::array(py::dtype("uint8"),
                                  {static_cast<py::ssize_t>(g.slot_bytes())}, {1},
                                  g.slot(g.rank()), self);
             })
        .def("arena_publish", &Group::arena_publish, py::arg("elems"), py::arg("count"),
             py::arg("chunk"), "Publish that the first elems of this rank's slot are final.")
        .def("arena_target", &Group::arena_target, py::arg("region"), py::arg("bytes"),
             "Before this rank's first publish of a reduction: its inputs are in, and its "
             "result goes into, its region (the second buffer of its slot; bytes must fit it) "
             "instead of its slot.")
        .def("arena_reduce",
             [](Group &g, std::size_t count, const std::string &dtype, bool avg,
                std::size_t chunk, const std::vector<std::size_t> &offs,
                const std::vector<py::array> &outs) {
                 if (dtype != "float32" && dtype != "float64")
                     throw std::invalid_argument("shm: arena_reduce takes float32 or float64, "
                                                 "not " + dtype);
                 DType d = dtype == "float32" ? DType::F32 : DType::F64;
                 if (offs.size() != outs.size())
                     throw std::invalid_argument("shm: arena_reduce needs one offset per output");
                 std::vector<Group::Out> to;
                 for (std::size_t k = 0; k < outs.size(); ++k) {
                     py::array a = outs[k];
                     check_contig(a, "arena_reduce output", true);
                     if (dtype_of(a, "arena_reduce output") != d ||
                         offs[k] + static_cast<std::size_t>(a.size()) > count)
                         throw std::invalid_argument("shm: arena_reduce output " +
                                                     std::to_string(k) + " is not " + dtype +
                                                     " inside the arena");
                     to.push_back({offs[k], static_cast<std::size_t>(a.size()),
                                   static_cast<char *>(a.mutable_data())});
                 }
                 double scale = avg && g.size() > 1 ? 1.0 / g.size() : 0.0;
                 py::gil_scoped_release nogil;
                 BusyMark mark(g);
                 return g.arena_reduce(count, d, scale, chunk, to);
             },
             py::arg("count"), py::arg("dtype"), py::arg("avg"), py::arg("chunk"),
             py::arg("offsets") = std::vector<std::size_t>{},
             py::arg("outputs") = std::vector<py::array>{},
             "Reduce (sum, or average) the first count elements of every rank's slot into "
             "every slot, and into outputs (arena offsets, arrays) on this rank (collective; "
             "see shm.h, resident arena). Returns the chunks this rank reduced.")
        .def("abort_if_busy", &Group::abort_if_busy,
             "Abort the group if a fast-path collective is running in it (the SIGINT watcher).")
        .def("broadcast",
             [](Group &g, py::array buf, int root) {
                 check_contig(buf, "broadcast buffer", true);
                 void *p = mptr(buf);
                 std::size_t nb = static_cast<std::size_t>(buf.nbytes());
                 int fd = fp_dtype(buf);
                 py::gil_scoped_release nogil;
                 g.broadcast(p, nb, root, fd);
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
                 int fd = fp_dtype(in);
                 py::gil_scoped_release nogil;
                 g.all_gather(ip, opp, nb, fd);
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
                 int fd = fp_dtype(in);
                 py::gil_scoped_release nogil;
                 g.all_to_all(ip, opp, s, fd);
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
