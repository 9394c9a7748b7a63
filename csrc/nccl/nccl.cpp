// tensorbrain._C.nccl: a thin binding to NCCL, loaded at run time with dlopen.
//
// Why dlopen and our own declarations instead of #include <nccl.h> and -lnccl: the package must
// build on machines with no CUDA toolkit and no NCCL (CI, laptops), and `import tensorbrain`
// must never need them. NCCL's C ABI is small and stable, so we declare the handful of types,
// enums and signatures we use (values checked against nccl.h of nvidia-nccl-cu12 2.32.3, and
// unchanged since NCCL 2.10 added ncclAvg) and look the symbols up after dlopen. Which file to
// open (TB_NCCL_LIBRARY, the nvidia-nccl-cu12 wheel, the system path) is decided in Python
// (tensorbrain/distributed/_nccl_lib.py); this file only opens the path it is given.
//
// Pointers and CUDA streams cross the boundary as integers (CuPy's `array.data.ptr` and
// `stream.ptr`), so no CUDA type is needed here either. Every call that can block (communicator
// creation waits for all ranks; collectives may wait for a free slot) runs with the GIL released,
// so the watchdog thread in Python can still query errors and abort the communicator.
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace {

// ***** the NCCL ABI we use (nccl.h, declared by hand) *****
using ncclResult_t = int;    // ncclSuccess = 0, ..., ncclInProgress = 7, ncclTimeout = 8
using ncclDataType_t = int;  // ncclInt8 = 0 ... ncclBfloat16 = 9
using ncclRedOp_t = int;     // ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4
using ncclComm_t = void*;    // opaque `struct ncclComm*`
using cudaStream_t = void*;  // opaque `struct CUstream_st*`
constexpr std::size_t kUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct ncclUniqueId { char internal[kUniqueIdBytes]; };  // passed BY VALUE to ncclCommInitRank

struct Api {
  void* handle = nullptr;
  std::string path;
  ncclResult_t (*GetVersion)(int*) = nullptr;
  ncclResult_t (*GetUniqueId)(ncclUniqueId*) = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
  const char* (*GetLastError)(ncclComm_t) = nullptr;  // NCCL >= 2.13; may be missing
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*CommAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
  ncclResult_t (*CommCount)(ncclComm_t, int*) = nullptr;
  ncclResult_t (*CommCuDevice)(ncclComm_t, int*) = nullptr;
  ncclResult_t (*CommUserRank)(ncclComm_t, int*) = nullptr;
  ncclResult_t (*AllReduce)(const void*, void*, std::size_t, ncclDataType_t, ncclRedOp_t,
                            ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Broadcast)(const void*, void*, std::size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*Reduce)(const void*, void*, std::size_t, ncclDataType_t, ncclRedOp_t, int,
                         ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*AllGather)(const void*, void*, std::size_t, ncclDataType_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*ReduceScatter)(const void*, void*, std::size_t, ncclDataType_t, ncclRedOp_t,
                                ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Send)(const void*, std::size_t, ncclDataType_t, int, ncclComm_t,
                       cudaStream_t) = nullptr;
  ncclResult_t (*Recv)(void*, std::size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*GroupStart)() = nullptr;
  ncclResult_t (*GroupEnd)() = nullptr;
};

Api g_api;
std::mutex g_load_mutex;

class NcclError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

const Api& api() {
  if (g_api.handle == nullptr) {
    throw NcclError(
        "the NCCL library is not loaded; use tensorbrain.distributed.is_nccl_available() (which "
        "loads it from TB_NCCL_LIBRARY, the nvidia-nccl-cu12 wheel or the system path)");
  }
  return g_api;
}

std::string describe(ncclResult_t code) {
  const char* text = g_api.GetErrorString ? g_api.GetErrorString(code) : nullptr;
  return std::string(text ? text : "unknown error") + " (ncclResult_t " + std::to_string(code) + ")";
}

// Raise NcclError naming the call, NCCL's error string and, when the library has it, the
// communicator's last error message (which names the peer or the failing transport).
void check(ncclResult_t code, const char* what, ncclComm_t comm = nullptr) {
  if (code == 0) return;
  std::string message = std::string(what) + " failed: " + describe(code);
  if (g_api.GetLastError != nullptr) {
    const char* last = g_api.GetLastError(comm);
    if (last != nullptr && last[0] != '\0') message += "; NCCL says: " + std::string(last);
  }
  throw NcclError(message);
}

template <typename F>
void resolve(void* handle, const char* name, F& slot, bool required = true) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr && required) {
    throw NcclError(std::string("the NCCL library at ") + g_api.path + " has no symbol " + name +
                    " (TensorBrain needs NCCL >= 2.10)");
  }
  slot = reinterpret_cast<F>(symbol);
}

// Open `path` (a file path, or a bare soname searched on the system path) and resolve every
// symbol. Loading twice is a no-op when the path is the same and an error otherwise: two NCCLs
// in one process would each keep their own communicators.
void load(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_load_mutex);
  if (g_api.handle != nullptr) {
    if (path == g_api.path) return;
    throw NcclError("NCCL is already loaded from " + g_api.path + "; cannot also load " + path);
  }
  dlerror();
  // RTLD_LOCAL keeps NCCL's symbols out of the global namespace (CuPy may load its own NCCL).
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    throw NcclError("cannot load NCCL from " + path + ": " + (err ? err : "unknown dlopen error"));
  }
  Api loaded;
  loaded.handle = handle;
  loaded.path = path;
  Api saved = g_api;
  g_api.path = path;  // for resolve()'s message
  try {
    resolve(handle, "ncclGetVersion", loaded.GetVersion);
    resolve(handle, "ncclGetUniqueId", loaded.GetUniqueId);
    resolve(handle, "ncclGetErrorString", loaded.GetErrorString);
    resolve(handle, "ncclGetLastError", loaded.GetLastError, /*required=*/false);
    resolve(handle, "ncclCommInitRank", loaded.CommInitRank);
    resolve(handle, "ncclCommDestroy", loaded.CommDestroy);
    resolve(handle, "ncclCommAbort", loaded.CommAbort);
    resolve(handle, "ncclCommGetAsyncError", loaded.CommGetAsyncError);
    resolve(handle, "ncclCommCount", loaded.CommCount);
    resolve(handle, "ncclCommCuDevice", loaded.CommCuDevice);
    resolve(handle, "ncclCommUserRank", loaded.CommUserRank);
    resolve(handle, "ncclAllReduce", loaded.AllReduce);
    resolve(handle, "ncclBroadcast", loaded.Broadcast);
    resolve(handle, "ncclReduce", loaded.Reduce);
    resolve(handle, "ncclAllGather", loaded.AllGather);
    resolve(handle, "ncclReduceScatter", loaded.ReduceScatter);
    resolve(handle, "ncclSend", loaded.Send);
    resolve(handle, "ncclRecv", loaded.Recv);
    resolve(handle, "ncclGroupStart", loaded.GroupStart);
    resolve(handle, "ncclGroupEnd", loaded.GroupEnd);
  } catch (...) {
    g_api = saved;
    dlclose(handle);
    throw;
  }
  g_api = loaded;
}

int get_version() {
  int version = 0;
  check(api().GetVersion(&version), "ncclGetVersion");
  return version;
}

py::bytes get_unique_id() {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  ncclResult_t code;
  {
    // Creating the root's id starts NCCL's bootstrap listener (it may probe network interfaces).
    py::gil_scoped_release release;
    code = api().GetUniqueId(&id);
  }
  check(code, "ncclGetUniqueId");
  return py::bytes(id.internal, kUniqueIdBytes);
}

inline void* as_ptr(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

// One NCCL communicator (one rank's handle). Created collectively: every rank constructs it with
// the same unique id and world size. destroy() is the orderly end; abort() is for errors and
// timeouts (it returns without waiting for peers and makes pending operations fail).
class Communicator {
 public:
  Communicator(int nranks, const std::string& unique_id, int rank) {
    if (unique_id.size() != kUniqueIdBytes) {
      throw py::value_error("an NCCL unique id is " + std::to_string(kUniqueIdBytes) +
                            " bytes, got " + std::to_string(unique_id.size()));
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
      throw py::value_error("NCCL rank " + std::to_string(rank) + " is out of range for " +
                            std::to_string(nranks) + " ranks");
    }
    ncclUniqueId id;
    std::memcpy(id.internal, unique_id.data(), kUniqueIdBytes);
    const Api& a = api();
    ncclResult_t code;
    {
      py::gil_scoped_release release;  // blocks until all nranks ranks have joined
      code = a.CommInitRank(&comm_, nranks, id, rank);
    }
    check(code, "ncclCommInitRank");
    nranks_ = nranks;
    rank_ = rank;
  }

  // Not destroyed explicitly (e.g. the interpreter is exiting after an error): abort rather than
  // destroy, because ncclCommDestroy may wait for peers that are gone.
  ~Communicator() {
    if (comm_ != nullptr && g_api.handle != nullptr) g_api.CommAbort(comm_);
  }

  void destroy() {
    ncclComm_t comm = release_handle();
    if (comm == nullptr) return;
    ncclResult_t code;
    {
      py::gil_scoped_release release;
      code = api().CommDestroy(comm);
    }
    check(code, "ncclCommDestroy");
  }

  void abort() {
    ncclComm_t comm = release_handle();
    if (comm == nullptr) return;
    ncclResult_t code;
    {
      py::gil_scoped_release release;
      code = api().CommAbort(comm);
    }
    check(code, "ncclCommAbort");
  }

  // 0 while healthy; ncclInProgress (7) while a non-blocking call is pending; any other value
  // is the asynchronous error that ends this communicator (the watchdog polls this).
  int get_async_error() const {
    ncclComm_t comm = live();
    ncclResult_t result = 0;
    check(api().CommGetAsyncError(comm, &result), "ncclCommGetAsyncError", comm);
    return result;
  }

  std::string last_error() const {
    if (g_api.GetLastError == nullptr) return "";
    const char* text = g_api.GetLastError(comm_);
    return text ? text : "";
  }

  int count() const { return query(api().CommCount, "ncclCommCount"); }
  int cu_device() const { return query(api().CommCuDevice, "ncclCommCuDevice"); }
  int user_rank() const { return query(api().CommUserRank, "ncclCommUserRank"); }
  bool alive() const { return comm_ != nullptr; }
  std::uintptr_t handle() const { return reinterpret_cast<std::uintptr_t>(comm_); }

  void all_reduce(std::uintptr_t send, std::uintptr_t recv, std::size_t count, int dtype, int op,
                  std::uintptr_t stream) {
    ncclComm_t comm = live();
    const Api& a = api();
    ncclResult_t code;
    {
      py::gil_scoped_release release;
      code = a.AllReduce(as_ptr(send), as_ptr(recv), count, dtype, op, comm, as_ptr(stream));
    }
    check(code, "ncclAllReduce", comm);
  }

  void broadcast(std::uintptr_t send, std::uintptr_t recv, std::size_t count, int dtype, int root,
                 std::uintptr_t stream) {
    ncclComm_t comm = live();
    const Api& a = api();
    ncclResult_t code;
    {
      py::gil_scoped_release release;
      code = a.Broadcast(as_ptr(send), as_ptr(recv), count, dtype, root, comm, as_ptr(stream));
    }
    check(code, "ncclBroadcast", comm);
  }

  void reduce(std::uintptr_t send, std::uintptr_t recv, std::size_t count, int dtype, int op,
              int root, std::uintptr_t stream) {
    ncclComm_t comm = live();
    const Api& a = api();
    ncclResult_t code;
    {
      py::gil_scoped_release release;
      code = a.Reduce(as_ptr(send), as_ptr(recv), count, dtype, op, root, comm, as_ptr(stream));
    }
    check(code, "ncclReduce", comm);
  }

  void all_gather(std::uintptr_t send, std::uintptr_t recv, std::size_t send_count, int dtype,
                  std::uintptr_t stream) {
    ncclComm_t comm = live();
    const Api& a = api();
    ncclResult_t code;
    {
      py::gil_scoped_release release;
      code = a.AllGather(as_ptr(send), as_ptr(recv), send_count, dtype, comm, as_ptr(stream));
    }
    check(code, "ncclAllGather", comm);
  }

  void reduce_scatter(std::uintptr_t send, std::uintptr_t recv, std::size_t recv_count, int dtype,
                      int op, std::uintptr_t stream) {
    ncclComm_t comm = live();
    const Api& a = api();
    ncclResult_t code;
    {
      py::gil_scoped_release release;
      code = a.ReduceScatter(as_ptr(send), as_ptr(recv), recv_count, dtype, op, comm,
                             as_ptr(stream));
    }
    check(code, "ncclReduceScatter", comm);
  }

  void send(std::uintptr_t buffer, std::size_t count, int dtype, int peer, std::uintptr_t stream) {
    ncclComm_t comm = live();
    const Api& a = api();
    ncclResult_t code;
    {
      py::gil_scoped_release release;
      code = a.Send(as_ptr(buffer), count, dtype, peer, comm, as_ptr(stream));
    }
    check(code, "ncclSend", comm);
  }

  void recv(std::uintptr_t buffer, std::size_t count, int dtype, int peer, std::uintptr_t stream) {
    ncclComm_t comm = live();
    const Api& a = api();
    ncclResult_t code;
    {
      py::gil_scoped_release release;
      code = a.Recv(as_ptr(buffer), count, dtype, peer, comm, as_ptr(stream));
    }
    check(code, "ncclRecv", comm);
  }

 private:
  ncclComm_t live() const {
    if (comm_ == nullptr) {
      throw NcclError("this NCCL communicator (rank " + std::to_string(rank_) + " of " +
                      std::to_string(nranks_) + ") was destroyed or aborted");
    }
    return comm_;
  }

  ncclComm_t release_handle() {
    ncclComm_t comm = comm_;
    comm_ = nullptr;
    return comm;
  }

  int query(ncclResult_t (*fn)(ncclComm_t, int*), const char* what) const {
    ncclComm_t comm = live();
    int value = -1;
    check(fn(comm, &value), what, comm);
    return value;
  }

  ncclComm_t comm_ = nullptr;
  int nranks_ = 0;
  int rank_ = -1;
};

void group_start() { check(api().GroupStart(), "ncclGroupStart"); }

void group_end() {
  const Api& a = api();
  ncclResult_t code;
  {
    py::gil_scoped_release release;  // launches everything queued since group_start
    code = a.GroupEnd();
  }
  check(code, "ncclGroupEnd");
}

}  // namespace

void init_nccl(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "nccl", "NCCL loaded at run time with dlopen (no CUDA or NCCL needed to build or import).");
  py::register_exception<NcclError>(m, "NcclError", PyExc_RuntimeError);

  m.attr("UNIQUE_ID_BYTES") = kUniqueIdBytes;
  // nccl.h's ncclDataType_t, keyed by NumPy dtype name (float8 types are left out: NumPy has none).
  py::dict dtypes;
  dtypes["int8"] = 0; dtypes["uint8"] = 1; dtypes["int32"] = 2; dtypes["uint32"] = 3;
  dtypes["int64"] = 4; dtypes["uint64"] = 5; dtypes["float16"] = 6; dtypes["float32"] = 7;
  dtypes["float64"] = 8; dtypes["bfloat16"] = 9;
  m.attr("DTYPES") = dtypes;
  py::dict ops;
  ops["sum"] = 0; ops["product"] = 1; ops["max"] = 2; ops["min"] = 3; ops["avg"] = 4;
  m.attr("RED_OPS") = ops;
  m.attr("IN_PROGRESS") = 7;  // ncclInProgress
  m.attr("TIMEOUT") = 8;      // ncclTimeout (NCCL >= 2.29; older versions never return it)

  m.def("load", &load, py::arg("path"),
        "Open the NCCL shared library at `path` (a file, or a soname searched on the system "
        "path) and resolve its symbols. Loading the same path again is a no-op.");
  m.def("is_loaded", [] { return g_api.handle != nullptr; });
  m.def("library_path", [] { return g_api.path; }, "The path NCCL was loaded from ('' if none).");
  m.def("get_version", &get_version, "ncclGetVersion, e.g. 23203 for 2.32.3.");
  m.def("get_unique_id", &get_unique_id, "ncclGetUniqueId: 128 opaque bytes (root rank only).");
  m.def("get_error_string", [](int code) { return describe(code); }, py::arg("code"));
  m.def("group_start", &group_start, "ncclGroupStart: queue the following calls as one launch.");
  m.def("group_end", &group_end, "ncclGroupEnd: launch the calls queued since group_start.");

  py::class_<Communicator>(m, "Communicator")
      .def(py::init<int, const std::string&, int>(), py::arg("nranks"), py::arg("unique_id"),
           py::arg("rank"), "ncclCommInitRank (collective: blocks until every rank has joined).")
      .def("destroy", &Communicator::destroy)
      .def("abort", &Communicator::abort)
      .def("get_async_error", &Communicator::get_async_error)
      .def("last_error", &Communicator::last_error)
      .def("count", &Communicator::count)
      .def("cu_device", &Communicator::cu_device)
      .def("user_rank", &Communicator::user_rank)
      .def_property_readonly("alive", &Communicator::alive)
      .def_property_readonly("handle", &Communicator::handle)
      .def("all_reduce", &Communicator::all_reduce, py::arg("send"), py::arg("recv"),
           py::arg("count"), py::arg("dtype"), py::arg("op"), py::arg("stream"))
      .def("broadcast", &Communicator::broadcast, py::arg("send"), py::arg("recv"),
           py::arg("count"), py::arg("dtype"), py::arg("root"), py::arg("stream"))
      .def("reduce", &Communicator::reduce, py::arg("send"), py::arg("recv"), py::arg("count"),
           py::arg("dtype"), py::arg("op"), py::arg("root"), py::arg("stream"))
      .def("all_gather", &Communicator::all_gather, py::arg("send"), py::arg("recv"),
           py::arg("send_count"), py::arg("dtype"), py::arg("stream"))
      .def("reduce_scatter", &Communicator::reduce_scatter, py::arg("send"), py::arg("recv"),
           py::arg("recv_count"), py::arg("dtype"), py::arg("op"), py::arg("stream"))
      .def("send", &Communicator::send, py::arg("buffer"), py::arg("count"), py::arg("dtype"),
           py::arg("peer"), py::arg("stream"))
      .def("recv", &Communicator::recv, py::arg("buffer"), py::arg("count"), py::arg("dtype"),
           py::arg("peer"), py::arg("stream"));
}
