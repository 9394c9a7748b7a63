"""The mpi backend's collective check as one MPI reduction of a fixed-size check message
(``csrc/kernels/fingerprint.cpp`` has its layout and the C op) that marks the result when two
ranks' fingerprints differ, with an all_reduce whose data fits its payload inside it. Why this is
safe and what it costs: docs/reliability.md, "Collective mismatches: the fingerprint". The op is
made by MPI_Op_create through ctypes (mpi4py can only wrap a Python function as an op, which
would cost a Python call per reduction step) from the C function's address in ``tensorbrain._C``.
"""
from __future__ import annotations

import ctypes
import os
import time
from typing import TYPE_CHECKING

import numpy as np

from ... import _config, _native
from .. import _work
from .._fingerprint import header_word
from .._mpi_lib import loaded_libmpi
from ..errors import DistBackendError
from . import _staging
from ._mpi_requests import _FOLLOW_UP_S, _FP_SLOTS, _NULL, _QUICK_POLLS_FP, Requests
from ._validate import BITWISE

#: payload dtypes and ops in the C kernel's order (tb::kernels::DType / Op); float16 is left to
#: the regular path, which rounds once at the end instead of after every partial sum
_SKIP_DTYPES = ("float16",)
_CONTROL_SUMMED = 2
HEADER_BYTES = 40  # five int64 words before the payload

_op_cache: dict = {}  # per process: {"op": MPI.Op, "type": MPI.Datatype} or {"why": str}


def _setup(MPI) -> dict:
    if _op_cache:
        return _op_cache
    C = _native.loaded()
    if C is None or not hasattr(C, "fp_reduce_address"):
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
            # float MIN/MAX with NumPy's NaN semantics: MPICH's own keep whichever operand a
            # comparison with NaN favours, so ranks reducing in another order disagree (every
            # rank of a group must use the same op: InlineCheck._learn_peers agrees on it)
            _op_cache["minmax"] = {key: _create_op(MPI, address)
                                   for key, address in C.minmax_addresses().items()}
        except (OSError, AttributeError, RuntimeError) as exc:
            _op_cache.clear()
            _op_cache["why"] = f"registering the check's MPI op failed: {exc}"
    return _op_cache


def _create_op(MPI, address: int):
    """``MPI_Op_create(address, commute=1)`` in the MPI library this process loaded."""
    libs = loaded_libmpi()
    for lib in libs:
        fn = getattr(lib, "MPI_Op_create", None)
        if fn is None:
            continue
        handle = ctypes.create_string_buffer(MPI._sizeof(MPI.Op))
        rc = fn(ctypes.c_void_p(address), ctypes.c_int(1), handle)
        if rc != 0:
            raise RuntimeError(f"MPI_Op_create returned {rc} ({lib._name})")
        return MPI.Op.fromhandle(int.from_bytes(handle.raw, "little"))
    raise RuntimeError(f"no MPI_Op_create in the loaded MPI libraries {[lib._name for lib in libs]}")


def message_slots(MPI, comm, n: int) -> list:
    """``n`` persistent all-reduces of one check message on ``comm``: ``(buffer, request,
    int64 view, byte view)`` each (collective: call at the same point on every rank)."""
    slots = []
    for _ in range(n):
        buf = np.zeros(_setup(MPI)["bytes"] // 8, np.int64)
        request = message_request(MPI, comm, buf)
        slots.append((buf, request, buf.data, buf.data.cast("B")))
    return slots


def message_request(MPI, comm, buf: np.ndarray):
    """A persistent all-reduce, through the check's C op, of the check message in ``buf``
    (int64, FP_MESSAGE_BYTES long) on ``comm``."""
    state = _setup(MPI)
    return comm.Allreduce_init(MPI.IN_PLACE, [buf, 1, state["type"]], state["op"])


def control_word(dtype: np.dtype, op: str) -> int:
    """The control word that carries an all_reduce of ``dtype`` by ``op`` inside the message
    (payload dtype and op codes), or 0 when the C kernel does not reduce that pair (cached in
    ``MPIBackend._reduction``'s plan)."""
    dt = _op_cache.get("dtypes", {}).get(np.dtype(dtype).name, 0)
    name = "sum" if op == "avg" else op
    code = _op_cache.get("ops", {}).get(name)
    if not dt or code is None or (np.dtype(dtype).kind in "fc" and name in BITWISE):
        return 0
    return dt << 8 | code << 16


class InlineCheck(Requests):
    """The inline check's half of ``MPIBackend`` (a layer on ``Requests``): agreeing on the
    check's mode, loading check messages, the all_reduces that ride in them (all_reduce's
    ``inline`` implementation and the pipeline's fast step), and the follow-up after a
    mismatch."""

    # ***** required: MPIBackend's state (Requests declares the rest) *****
    _plans: dict                # (dtype, op) -> MPIBackend._reduction's plan

    if TYPE_CHECKING:  # MPIBackend's (declared only: it comes first in the MRO)
        def _reduction(self, dtype, op: str) -> tuple: ...

    # ***** what it gives *****
    def _learn_peers(self) -> None:
        """All-gather (pid, host key, the check mode) once, on the control communicator
        (collective, like the Dup before it), and set up the group's check mode. MPI itself
        cannot say which rank a collective waits for; /proc can say that a same-host rank is
        stopped (SIGSTOP, a debugger) or gone, as on tcp."""
        import hashlib

        from .._liveness import host_id
        key = int.from_bytes(hashlib.blake2b(host_id().encode(), digest_size=8).digest(),
                             "little", signed=True)
        # ... and how the group checks collectives (_mpi_inline): DETAIL (read once, by the
        # Verifier) must be the same on every rank, the inline check is used when every rank can
        detail = self._verify.detail
        state = _setup(self._MPI)  # with "why" when this process cannot make the check's op
        inline = bool(not detail and _config.get("TB_MPI_INLINE_CHECK") and "why" not in state)
        minmax = state.get("minmax")
        self._peers = np.empty((self.size, 5), np.int64)
        self._ctl.Allgather(np.array([os.getpid(), key, detail, inline, minmax is not None],
                                     np.int64), self._peers)
        if len(set(self._peers[:, 2].tolist())) > 1:
            on = [j for j in range(self.size) if self._peers[j, 2]]
            raise DistBackendError(
                f"group {self.group_name!r}: TB_DISTRIBUTED_DEBUG=DETAIL is set on rank(s) {on} "
                f"but not on the others; set it the same on every rank")
        self._fp_inline = bool(self._peers[:, 3].all()) and self.size > 1
        self._fp_msgs = message_slots(self._MPI, self._fpc, _FP_SLOTS) if self._fp_inline else []
        self._inline_max = int(state.get("payload", 0))  # the largest all_reduce in a message
        # the pipeline's fast step (fast_all_reduce): inline mode, and any thread may call MPI
        self._fp_lean = self._fp_inline and self._level == self._MPI.THREAD_MULTIPLE
        # NaN-propagating float MIN/MAX only when every rank has them (one op per collective)
        self._minmax: dict | None = minmax if self._peers[:, 4].all() else None

    def _fp_message(self, words):
        """_fp_slot in inline mode: the check message's five words (all_reduces that ride in
        it load their own: :meth:`_post_inline`); four fingerprint words, as inline mode is
        never on with DETAIL (:meth:`_learn_peers`)."""
        slots = self._fp_msgs
        slot = self._fp_take(slots, words)
        buf, request, view, _ = slots[slot]
        view[0], view[1], view[2], view[3] = words
        view[4] = _CONTROL_SUMMED if words[2] == -1 else 0  # all_to_all: word 3 summed
        return buf, words, request, slot

    def _fp_mismatch(self, op, seq, words) -> None:
        """Inline mode, after a marked result (the same on every rank): all-gather every rank's
        fingerprint once, on the control communicator, so the error names each rank's call;
        raise it (a peer that does not join within the follow-up limit leaves a shorter one)."""
        self._failure.check(op)  # already failed (an earlier mismatch): that error
        limit = min(self.timeout, _FOLLOW_UP_S)
        deadline = time.monotonic() + limit
        try:
            mine = np.array([int(w) for w in words], np.int64)
            rows = np.zeros((self.size, len(mine)), np.int64)
            with self._guard or _NULL:
                req = self._ctl.Iallgather(mine, rows)
            gathered = self._poll(req, deadline)
            if gathered:
                self._verify(rows)  # raises, naming every rank's call
            raise DistBackendError(
                f"MPI {op} (seq {seq}) of group {self.group_name!r} on rank {self.rank}: "
                "collective mismatch between ranks (some rank called another collective, op, "
                "root, dtype or element count" + ("" if gathered else
                f"; the ranks' calls could not be gathered within {limit:g} s"
                f"{self._silent_peers()}") + "). "
                "Every rank must call the same collectives in the same order.")
        except KeyboardInterrupt:  # recorded as such: a bare KeyboardInterrupt says nothing
            self._interrupted(op, seq, " while naming the ranks' calls after a collective mismatch")
            raise
        except BaseException as exc:
            raise self._fail(op, seq, exc) from None

    def _inline_takes(self, call) -> bool:
        """Whether an all_reduce travels inside its check message: one array of a (dtype, op)
        the C kernel reduces, small enough. It depends only on the fingerprint (dtype, op,
        element count), so every rank that agrees on it decides the same."""
        if not self._fp_inline or len(call.inputs) != 1:
            return False
        a = call.inputs[0]
        return bool(self._reduction(a.dtype, call.op)[3]) and a.nbytes <= self._inline_max

    def _allreduce_inline(self, call, seq):
        """all_reduce's ``inline`` implementation: :meth:`_post_inline` on a contiguous host
        copy of the array when it is not one (written back when the result is out)."""
        a, op = call.inputs[0], call.op
        self._may_post("all_reduce")
        plan = self._reduction(a.dtype, op)
        host, write_back = _staging.stage(a)
        words, self._fp_next = self._fp_next, None
        assert words is not None  # execute attached it
        slot = self._fp_take(self._fp_msgs, words)
        return self._post_inline(host, plan, words, slot, seq, call.async_op, write_back,
                                 call.inputs)

    def fast_all_reduce(self):
        """The pipeline's first step in inline mode with any thread allowed to call MPI
        (``_fp_lean``): :meth:`_fast_all_reduce`; else None."""
        return self._fast_all_reduce if self._fp_lean else None

    def _fast_all_reduce(self, a, op: str) -> bool:
        """A synchronous all_reduce of one small contiguous NumPy array with the least Python
        there is: the group's number and fingerprint claimed here, then :meth:`_post_inline`
        (measured: what this costs on top of the raw MPI call is the check's whole cost at 8 B,
        docs/reliability.md). False, having done nothing, for anything else: the pipeline runs
        it (the same checks, number and fingerprint).
        """
        if type(a) is not np.ndarray:
            return False
        plan = self._plans.get((a.dtype, op))
        if plan is None:
            plan = self._reduction(a.dtype, op)  # raises on a pair no path supports
        n = self._fp_n
        slot = n % _FP_SLOTS
        failure = self._failure
        flags = a.flags
        if not (plan[3] and flags.c_contiguous and flags.writeable and
                0 < a.nbytes <= self._inline_max and not self._fp_busy[slot] and
                failure.first is None and not failure.closed):
            return False
        seq = self._seq
        self._seq = seq + 1
        self._fp_n = n + 1
        words = (seq, header_word("all_reduce", op, a.dtype), a.size, 0)
        self._post_inline(a, plan, words, slot, seq, False, None, [a])
        return True

    def _post_inline(self, a, plan, words, slot, seq, async_op, after, result):
        """An all_reduce of the contiguous host array ``a`` inside check message ``slot`` (the
        caller claimed it): the fingerprint ``words`` and ``a``'s bytes into the message, one
        persistent MPI collective, the data back out (scaled for avg, then ``after()``). One
        that finishes within a few polls returns completed; ``async_op``, or a late peer, gives
        a Work polled against the group deadline (as ``Requests._start``'s)."""
        _, _, scale, control = plan
        self._collectives += 1
        buf, request, view, raw = self._fp_msgs[slot]
        view[0], view[1], view[2], view[3] = words
        view[4] = control
        data = (a if a.ndim == 1 else a.reshape(-1)).data.cast("B")  # ((0, 3) cannot cast)
        end = HEADER_BYTES + len(data)
        raw[HEADER_BYTES:end] = data
        MPI, done = self._MPI, False
        try:
            with self._guard or _NULL:
                request.Start()
                for _ in range(0 if async_op else _QUICK_POLLS_FP):
                    if request.Test():
                        done = True
                        break
        except MPI.Exception as exc:
            raise self._fail("all_reduce", seq, exc) from None
        except KeyboardInterrupt:  # Ctrl-C: MPI cannot cancel the op; poison the group
            self._fp_busy[slot] = True
            self._interrupted("all_reduce", seq)
            raise
        if not done:
            self._fp_busy[slot] = True
            return self._track("all_reduce", seq, MPI.REQUEST_NULL,
                               lambda: _unload(data, raw, end, a, scale, after), async_op,
                               fp=(buf, words, request, slot), result=result)
        self._fp_busy[slot] = False
        if view[4] & 1:  # the reduction marked a mismatch
            self._fp_mismatch("all_reduce", seq, words)
        _unload(data, raw, end, a, scale, after)
        return _work.completed("all_reduce", result, None, seq, self.group_name)


def _unload(data, msg, end: int, host, scale, after=None) -> None:
    """An inline all_reduce's result out of its check message ``msg`` into ``data`` (a byte
    view of ``host``), scaled for avg, then ``after()``."""
    data[:] = msg[HEADER_BYTES:end]
    if scale is not None:
        np.multiply(host, host.dtype.type(scale), out=host)
    if after is not None:
        after()
