"""What the always-on collective check (the fingerprint) costs an ``all_reduce``.

Shared by ``tb-collectives --check-cost`` and ``benchmarks/fingerprint.py``: the same call timed
with the check and, interleaved round by round in the same ranks, without it:

* tcp (sockets or shared memory): the check is in band (op and root in each frame's tag,
  compared by the receiver with kind, dtype, size and sequence number); "without" replaces
  ``_fingerprint.wire_tag`` by a constant 0 for the rounds it times;
* mpi (and any backend whose fingerprint is ``"attached"`` or ``"exchanged"``): "with" is the
  pipeline's call (on mpi by default one MPI reduction of a check message that carries an
  8-byte all_reduce itself, ``backends/_mpi_inline.py``; with ``TB_MPI_INLINE_CHECK=0`` an
  all-gather beside the collective); "without" runs the backend's last all_reduce
  implementation directly, without the executor's fingerprint (mpi: its ``Iallreduce``).

For the inline mpi check it also times the MPI share alone, with raw mpi4py in the same ranks:
a persistent all-reduce of the check message through the check's C op against a persistent
``MPI_SUM`` all-reduce of the same 8 bytes. That difference is what the check adds inside MPI,
whatever Python path calls it.
"""
from __future__ import annotations

import time

import numpy as np

import tensorbrain as tb
import tensorbrain.distributed as dist

#: the sizes of issue 13's goal (< 1 us at 8 B, < 3% at 4 MiB), in float32 elements
SIZES = {"8 B": 2, "4 MiB": 1 << 20}


def measure(be, count: int, iters: int, rounds: int) -> tuple[float, float]:
    """``(median us per call with the check, without it)`` for an all_reduce of ``count``
    float32 elements on the backend object ``be``, interleaved round by round."""
    from ..distributed.backends import tcp as tcp_backend
    from ..distributed.backends.base import Call
    x = np.ones(count, np.float32)
    in_band = be.fingerprint == "in band"
    bare = be.implementations()["all_reduce"][-1].run   # without the executor's fingerprint
    call = Call("all_reduce", [x], [x], "sum", async_op=False)
    real_tag = tcp_backend.FP.wire_tag
    with_t: list[float] = []
    without_t: list[float] = []
    try:
        for _ in range(rounds):
            for checked in (True, False):
                def once():
                    if checked or in_band:
                        be.allreduce([x], "sum", async_op=False)
                    else:
                        bare(call, -1)
                if in_band:  # the tag is the check
                    tcp_backend.FP.wire_tag = real_tag if checked else (lambda *a, **k: 0)
                be.barrier(async_op=False)
                for _ in range(3):
                    once()
                t0 = time.perf_counter()
                for _ in range(iters):
                    once()
                (with_t if checked else without_t).append(
                    (time.perf_counter() - t0) / iters * 1e6)
    finally:
        tcp_backend.FP.wire_tag = real_tag
    return float(np.median(with_t)), float(np.median(without_t))


def measure_mpi_share(inner, iters: int, rounds: int) -> tuple[float, float]:
    """``(median us of a persistent check-message all-reduce carrying 8 bytes, of a persistent
    MPI_SUM all-reduce of 8 bytes)``, raw mpi4py, interleaved round by round."""
    from ..distributed.backends import _mpi_inline
    MPI = inner._MPI
    x = np.ones(2, np.float32)
    plain = inner._fpc.Dup()  # its own communicator: never matches the group's messages
    builtin = plain.Allreduce_init(MPI.IN_PLACE, x, MPI.SUM)
    buf = np.zeros_like(inner._fp_msgs[0][0])
    msg = _mpi_inline.message_request(MPI, plain, buf)
    # an all_reduce of 2 float32, as timed above
    buf[:5] = (0, 1, 2, 0, _mpi_inline.control_word(np.dtype(np.float32), "sum"))
    times: dict[bool, list[float]] = {True: [], False: []}
    try:
        for _ in range(rounds):
            for checked in (True, False):
                req = msg if checked else builtin
                plain.Barrier()
                t0 = time.perf_counter()
                for _ in range(iters):  # (the Python that loads a message is in "with")
                    req.Start()
                    while not req.Test():
                        pass
                times[checked].append((time.perf_counter() - t0) / iters * 1e6)
    finally:
        msg.Free()
        builtin.Free()
        plain.Free()
    return float(np.median(times[True])), float(np.median(times[False]))


def report(out, rounds: int = 15) -> list[dict]:
    """Measure every size of :data:`SIZES` on the default group and print a table with ``out``
    (the slowest rank's figures); returns them as records."""
    be = dist.distributed_c10d._default("check cost").backend
    inline = be.name == "mpi" and be._fp_inline
    how = "in band" if be.fingerprint == "in band" else \
        "one MPI reduction that carries small all_reduces" if inline \
        else f"fingerprint {be.fingerprint} beside each collective"
    out(f"# always-on collective check ({how}): all_reduce float32, median of {rounds} "
        "interleaved rounds, slowest rank")
    out(f"# {'size':>6} {'with us':>10} {'without us':>11} {'cost us':>9} {'cost %':>7}")
    records = []
    for label, count in SIZES.items():
        w, wo = measure(be, count, 200 if count < 1024 else 10, rounds)
        t = tb.tensor(np.array([w, wo], np.float64))
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        w, wo = t.numpy().tolist()
        out(f"# {label:>6} {w:10.1f} {wo:11.1f} {w - wo:9.2f} {100 * (w - wo) / wo:6.1f}%")
        records.append({"kind": "check_cost", "size": label, "with_us": w, "without_us": wo})
    if inline:
        m, b = measure_mpi_share(be, 2000, rounds)
        t = tb.tensor(np.array([m, b], np.float64))
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        m, b = t.numpy().tolist()
        out(f"# MPI's share (raw mpi4py, persistent all-reduce of 8 B): check message with the "
            f"C op {m:.2f} us, MPI_SUM {b:.2f} us, cost {m - b:+.2f} us")
        records.append({"kind": "check_cost_mpi_share", "size": "8 B", "with_us": m,
                        "without_us": b})
    return records
