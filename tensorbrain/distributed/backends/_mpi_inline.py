"""The mpi backend's collective check as one MPI reduction, with small all_reduces inside it.

Every collective on an mpi group is preceded (or accompanied) by an exchange of its fingerprint
(``_fingerprint.py``: seq, kind, op, dtype, count, root). Done as an all-gather beside the
collective it costs MPICH a second collective per call: about 3 us of the ~6 us an 8-byte
all_reduce then took (issue 13 asks < 1 us). This module makes the exchange one MPI reduction
instead, over a fixed-size message (``csrc/kernels/fingerprint.cpp`` has the layout and the C
function MPI calls): the reduction marks the result when two ranks' fingerprints differ, and an
all_reduce whose data fits the message's payload (:data:`PAYLOAD_BYTES`) travels *in* it, so
that all_reduce is one persistent MPI collective, check included, and no second one.

Why it stays safe:

* Every collective of a group, whatever its kind or size, starts with the same MPI call (the
  persistent all-reduce of one message on the group's private fingerprint communicator), so two
  ranks that call different collectives still meet in it and both see the mismatch. Whether the
  data rides in the message depends only on what the fingerprint holds (kind, op, dtype, count),
  so ranks that agree on the fingerprint agree on the path.
* After a mismatch every rank sees the same marked result; they then all-gather their
  fingerprints once (on the control communicator) to name each rank's call, as before.
* The mode is agreed when the group is made (every rank must have the native module and
  ``TB_MPI_INLINE_CHECK`` on, and none ``TB_DISTRIBUTED_DEBUG=DETAIL``, whose call sites need
  the all-gather); otherwise the group uses the all-gather for every collective.

MPI_Op_create is called through ctypes on the MPI library mpi4py loaded (mpi4py can only wrap a
Python function as an op, which would cost a Python call per reduction step); the C function's
address comes from ``tensorbrain._C``.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ... import _config, _native

#: payload dtypes and ops in the C kernel's order (tb::kernels::DType / Op); float16 is left to
#: the regular path, which rounds once at the end instead of after every partial sum
_SKIP_DTYPES = ("float16",)
_CONTROL_SUMMED = 2
HEADER_BYTES = 40  # five int64 words before the payload

_op_cache: dict = {}  # per process: {"op": MPI.Op, "type": MPI.Datatype} or {"why": str}


def why_unavailable(MPI) -> str | None:
    """Why this process cannot use the inline check (None when it can)."""
    state = _setup(MPI)
    return state.get("why")


def _setup(MPI) -> dict:
    if _op_cache:
        return _op_cache
    C = _native.loaded()
    if not _config.get("TB_MPI_INLINE_CHECK"):
        _op_cache["why"] = "TB_MPI_INLINE_CHECK=0"
    elif C is None or not hasattr(C, "fp_reduce_address"):
        _op_cache["why"] = f"tensorbrain._C lacks the check's MPI op ({_native.why_unavailable()})"
    elif MPI.Get_version() < (4, 0):
        _op_cache["why"] = f"MPI {MPI.Get_version()} has no persistent collectives (MPI 4)"
    else:
        try:
            _op_cache["op"] = _create_op(MPI, C.fp_reduce_address())
            _op_cache["type"] = MPI.BYTE.Create_contiguous(C.FP_MESSAGE_BYTES).Commit()
            _op_cache["bytes"] = C.FP_MESSAGE_BYTES
            _op_cache["payload"] = C.FP_PAYLOAD_BYTES
            _op_cache["dtypes"] = {name: i + 1 for i, name in enumerate(C.FP_DTYPES)
                                   if name not in _SKIP_DTYPES}
            _op_cache["ops"] = {name: i for i, name in enumerate(C.FP_OPS)}
        except (OSError, AttributeError, RuntimeError) as exc:
            _op_cache.clear()
            _op_cache["why"] = f"registering the check's MPI op failed: {exc}"
    return _op_cache


def _create_op(MPI, address: int):
    """``MPI_Op_create(address, commute=1)`` in the MPI library this process loaded."""
    with open("/proc/self/maps") as maps:
        libs = sorted({line.split()[-1] for line in maps
                       if "libmpi" in line.rsplit("/", 1)[-1]})
    for path in libs:
        fn = getattr(ctypes.CDLL(path), "MPI_Op_create", None)
        if fn is None:
            continue
        handle = ctypes.create_string_buffer(MPI._sizeof(MPI.Op))
        rc = fn(ctypes.c_void_p(address), ctypes.c_int(1), handle)
        if rc != 0:
            raise RuntimeError(f"MPI_Op_create returned {rc} ({path})")
        return MPI.Op.fromhandle(int.from_bytes(handle.raw, "little"))
    raise RuntimeError(f"no MPI_Op_create in the loaded MPI libraries {libs}")


def message_slots(MPI, comm, n: int) -> list:
    """``n`` persistent all-reduces of one check message on ``comm``: ``(buffer, request,
    int64 view, byte view)`` each (collective: call at the same point on every rank)."""
    state = _setup(MPI)
    slots = []
    for _ in range(n):
        buf = np.zeros(state["bytes"] // 8, np.int64)
        request = comm.Allreduce_init(MPI.IN_PLACE, [buf, 1, state["type"]], state["op"])
        slots.append((buf, request, buf.data, buf.data.cast("B")))
    return slots


_controls: dict = {}  # (dtype, op) -> control word of an inline all_reduce, or 0: not inline


def control_word(dtype: np.dtype, op: str) -> int:
    """The control word that carries an all_reduce of ``dtype`` by ``op`` inside the message
    (payload dtype and op codes), or 0 when the C kernel does not reduce that pair."""
    key = (dtype, op)
    word = _controls.get(key)
    if word is None:
        state = _op_cache
        dt = state.get("dtypes", {}).get(np.dtype(dtype).name, 0)
        name = "sum" if op == "avg" else op
        code = state.get("ops", {}).get(name)
        floating = np.dtype(dtype).kind in "fc"
        if not dt or code is None or (floating and name in ("band", "bor", "bxor")):
            word = 0
        else:
            word = dt << 8 | code << 16
        _controls[key] = word
    return word


def payload_bytes() -> int:
    """The largest all_reduce (in bytes) that travels inside the check message."""
    return int(_op_cache.get("payload", 0))


def plain_control(words) -> int:
    """The control word of a fingerprint without payload (word 3 summed for all_to_all)."""
    return _CONTROL_SUMMED if words[2] == -1 else 0
