"""Pipeline schedules: GPipe, 1F1B and interleaved 1F1B (torch's
``torch.distributed.pipelining.schedules``).

Each rank runs a fixed list of actions, ``F(stage, micro-batch)`` and ``B(stage, micro-batch)``,
computed identically on every rank (`_orders`). Executing an action: wait for its input (posted
as an ``irecv`` right after the previous action's sends), compute, then post this action's sends
together with the next action's receive in one ``batch_isend_irecv``. Sends are asynchronous: the
backend's worker thread streams a stage's output while the stage computes its next micro-batch.

The first ``step`` checks the pipeline before any activation moves: every rank of the group
exchanges a fingerprint (schedule, micro-batch count, stages held), then shapes flow stage by
stage (each stage runs once on a zero tensor of the shape its predecessor announced), and every
rank learns of the first mismatch and raises it, naming stage and rank, instead of waiting on a
receive that would never match.
"""
from __future__ import annotations

import enum
import time

import numpy as np

from .. import distributed_c10d as c10d
from .stage import PipelineStage, PipeliningShapeError, _fmt

__all__ = ["PipelineScheduleSingle", "PipelineScheduleMulti", "ScheduleGPipe", "Schedule1F1B",
           "ScheduleInterleaved1F1B", "get_schedule_class"]

F, B = 0, 1

#: torch's schedules TensorBrain does not run: the zero-bubble ones split each backward into
#: input and weight halves (a backward pass TensorBrain's autograd does not divide), and
#: DualPipeV also overlaps a forward with a backward of another micro-batch.
NOT_SUPPORTED = ("ScheduleLoopedBFS", "ScheduleInterleavedZeroBubble", "ScheduleZBVZeroBubble",
                 "ScheduleDualPipeV", "_ScheduleForwardOnly")


def __getattr__(name):
    if name in NOT_SUPPORTED:
        raise NotImplementedError(
            f"torch.distributed.pipelining.schedules.{name} is not supported by TensorBrain: "
            f"zero-bubble schedules need the backward split into input and weight gradients, "
            f"which TensorBrain's autograd does not do; use ScheduleGPipe, Schedule1F1B or "
            f"ScheduleInterleaved1F1B instead")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _ComputationType(str, enum.Enum):
    """The action kinds of torch's schedule IR, with torch's string values (``"F"``, ``"B"``,
    ...). TensorBrain's schedules run only forward (``F``) and full-backward (``B``) actions;
    the others name the split backward, FSDP and overlap actions of torch's zero-bubble and
    DualPipe schedules, which are not supported (``get_schedule_class`` says so)."""

    FORWARD = "F"
    BACKWARD_INPUT = "I"
    BACKWARD_WEIGHT = "W"
    UNSHARD = "UNSHARD"
    RESHARD = "RESHARD"
    SEND_F = "SEND_F"
    RECV_F = "RECV_F"
    SEND_B = "SEND_B"
    RECV_B = "RECV_B"
    FULL_BACKWARD = "B"
    OVERLAP_F_B = "OVERLAP_F_B"
    REDUCE_GRAD = "REDUCE_GRAD"

    @staticmethod
    def from_str(action: str) -> _ComputationType:
        """The kind for torch's string (``"F"``).

        Args:
            action: the string.

        Raises:
            RuntimeError: an unknown string, as torch's.
        """
        try:
            return _ComputationType(action)
        except ValueError as exc:
            raise RuntimeError(f"Invalid computation type {action}") from exc


FORWARD, BACKWARD_INPUT, BACKWARD_WEIGHT = (_ComputationType.FORWARD,
                                            _ComputationType.BACKWARD_INPUT,
                                            _ComputationType.BACKWARD_WEIGHT)
UNSHARD, RESHARD, FULL_BACKWARD = (_ComputationType.UNSHARD, _ComputationType.RESHARD,
                                   _ComputationType.FULL_BACKWARD)
SEND_F, RECV_F, SEND_B, RECV_B = (_ComputationType.SEND_F, _ComputationType.RECV_F,
                                  _ComputationType.SEND_B, _ComputationType.RECV_B)
OVERLAP_F_B, REDUCE_GRAD = _ComputationType.OVERLAP_F_B, _ComputationType.REDUCE_GRAD
_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
           "uint8", "bool")
_MAX_DIMS = 8


def _orders(kind: str, P: int, V: int, M: int) -> dict:
    """Every rank's action list: {group rank: [(F|B, stage, micro-batch), ...]}."""
    out = {}
    for r in range(P):
        if kind == "gpipe":
            acts = [(F, r, m) for m in range(M)] + [(B, r, m) for m in range(M)]
        elif kind == "1f1b":
            warm = min(P - r - 1, M)
            acts = [(F, r, m) for m in range(warm)]
            for i in range(M - warm):
                acts += [(F, r, warm + i), (B, r, i)]
            acts += [(B, r, m) for m in range(M - warm, M)]
        else:   # interleaved (Megatron-LM's order): micro-batches in groups of P per chunk
            total = M * V

            def at(k, backward, r=r):
                group, pos = divmod(k, P * V)
                chunk = pos // P
                if backward:
                    chunk = V - 1 - chunk
                return (B if backward else F, chunk * P + r, group * P + pos % P)
            warm = min((P - r - 1) * 2 + (V - 1) * P, total)
            acts = [at(k, False) for k in range(warm)]
            for i in range(total - warm):
                acts += [at(warm + i, False), at(i, True)]
            acts += [at(k, True) for k in range(total - warm, total)]
        out[r] = acts
    return out


def _simulate(orders: dict, S: int, P: int, forward_only: bool) -> None:
    """Check that the action lists complete with buffered sends (no cyclic wait)."""
    done, pos = set(), {r: 0 for r in orders}
    progress = True
    while progress:
        progress = False
        for r, acts in orders.items():
            while pos[r] < len(acts):
                k, s, m = acts[pos[r]]
                if forward_only and k == B:
                    pos[r] += 1
                    continue
                need = ((F, s - 1, m) if s > 0 else None) if k == F else \
                    ((B, s + 1, m) if s < S - 1 else (F, s, m))
                if need is not None and need not in done:
                    break
                done.add((k, s, m))
                pos[r] += 1
                progress = True
    stuck = {r: orders[r][pos[r]] for r in orders if pos[r] < len(orders[r])}
    if stuck:
        raise RuntimeError(f"pipeline schedule would deadlock; ranks stuck at {stuck} "
                           f"(please report this)")


def _tag(kind: int, dst_stage: int, mb: int, S: int) -> int:
    return ((mb * S + dst_stage) * 2 + kind) % 32000   # within every backend's tag range


class _PipelineSchedule:
    _kind = ""

    def __init__(self, stages, n_microbatches, loss_fn=None, args_chunk_spec=None,
                 kwargs_chunk_spec=None, output_merge_spec=None, scale_grads=True):
        if args_chunk_spec is not None or kwargs_chunk_spec is not None \
                or output_merge_spec is not None:
            raise NotImplementedError(f"{type(self).__name__}: chunk/merge specs are not "
                                      f"supported; inputs are split along dimension 0")
        if int(n_microbatches) < 1:
            raise ValueError(f"{type(self).__name__}: n_microbatches={n_microbatches} must be >= 1")
        if not stages or not all(isinstance(s, PipelineStage) for s in stages):
            raise TypeError(f"{type(self).__name__}: needs PipelineStage objects")
        self._stages = sorted(stages, key=lambda s: s.stage_index)
        self._n_microbatches = int(n_microbatches)
        self._loss_fn, self.scale_grads = loss_fn, bool(scale_grads)
        first = self._stages[0]
        self.group, self.S, self.P = first.group, first.num_stages, first.group_size
        if self.S % self.P:
            raise ValueError(f"{type(self).__name__}: num_stages={self.S} is not a multiple of "
                             f"the {self.P} ranks of the pipeline group")
        self.V = self.S // self.P
        me = first.group_rank
        want = [me + v * self.P for v in range(self.V)]
        got = [s.stage_index for s in self._stages]
        if got != want:
            raise ValueError(
                f"{type(self).__name__}: rank {c10d.get_rank()} (group rank {me} of {self.P}) must "
                f"hold stage(s) {want} (stage s lives on group rank s % {self.P}) but holds {got}")
        self._by_index = {s.stage_index: s for s in self._stages}
        self._orders = _orders(self._kind, self.P, self.V, self._n_microbatches)
        _simulate(self._orders, self.S, self.P, forward_only=loss_fn is None)
        self._actions = self._orders[me]
        self._ready = False
        self._mb_meta = None
        self.last_step_stats: dict = {}

    # ***** the first step: fingerprints and shapes *****
    def _fingerprint(self) -> dict:
        return {"schedule": type(self).__name__, "n_microbatches": self._n_microbatches,
                "num_stages": self.S, "stages": [s.stage_index for s in self._stages],
                "loss_fn": self._loss_fn is not None}

    def _check_fingerprints(self) -> None:
        mine = self._fingerprint()
        every: list[dict] = [{}] * self.P
        c10d.all_gather_object(every, mine, group=self.group)
        ranks = c10d.get_process_group_ranks(self.group) if self.group is not None else \
            list(range(self.P))
        ref = every[0]
        for gr, fp in enumerate(every):
            diff = [k for k in ("schedule", "n_microbatches", "num_stages", "loss_fn")
                    if fp[k] != ref[k]]
            if diff:
                raise RuntimeError(
                    f"pipeline mismatch: rank {ranks[gr]} (stage(s) {fp['stages']}) runs "
                    f"{fp['schedule']}(n_microbatches={fp['n_microbatches']}, num_stages="
                    f"{fp['num_stages']}, loss_fn={'set' if fp['loss_fn'] else 'None'}) but rank "
                    f"{ranks[0]} (stage(s) {ref['stages']}) runs {ref['schedule']}("
                    f"n_microbatches={ref['n_microbatches']}, num_stages={ref['num_stages']}, "
                    f"loss_fn={'set' if ref['loss_fn'] else 'None'}); every rank of the pipeline "
                    f"must build the same schedule")

    def _rank_of(self, stage: int) -> int:
        return stage % self.P

    def _send_meta(self, meta, ok: bool, dst_stage: int, device) -> None:
        from ...tensor import Tensor
        buf = np.full(3 + _MAX_DIMS, -1, dtype=np.int64)
        if ok and meta is not None:
            shape, dtype = meta
            buf[0], buf[1], buf[2] = 1, _DTYPES.index(dtype), len(shape)
            buf[3:3 + len(shape)] = shape
        else:
            buf[0] = 0
        # on the stage's device: NCCL moves device memory only
        c10d.send(Tensor._wrap(buf).to(device), group=self.group,
                  group_dst=self._rank_of(dst_stage),
                  tag=_tag(F, dst_stage, 31999, self.S))

    def _recv_meta(self, stage: int, device):
        from ...tensor import Tensor
        buf = Tensor._wrap(np.zeros(3 + _MAX_DIMS, dtype=np.int64)).to(device)
        c10d.recv(buf, group=self.group, group_src=self._rank_of(stage - 1),
                  tag=_tag(F, stage, 31999, self.S))
        b = buf.cpu().numpy()
        if b[0] != 1:
            return None
        return tuple(int(n) for n in b[3:3 + b[2]]), _DTYPES[int(b[1])]

    def _prepare(self, first_mb) -> None:
        from ...tensor import Tensor
        self._check_fingerprints()
        error = ""
        local: dict = {}
        for st in self._stages:
            s = st.stage_index
            meta: tuple | None
            if st.is_first:
                meta, x = (tuple(first_mb.shape), np.dtype(first_mb._data.dtype).name), first_mb
            else:
                meta = local.pop(s) if self.P == 1 else self._recv_meta(s, st.device)
                x = None if meta is None else \
                    Tensor._wrap(np.zeros(meta[0], dtype=np.dtype(meta[1]))).to(st.device)
            out_meta = None
            if meta is not None and not error:
                who = f"stage {s} (rank {st.global_rank})"
                if st.input_meta is not None and st.input_meta != meta:
                    prev = f"stage {s - 1} (rank {self._global(s - 1)})" if s else "the input"
                    error = (f"{who} expects an input of {_fmt(st.input_meta)} (its input_args) "
                             f"but {prev} produces {_fmt(meta)} per micro-batch")
                else:
                    try:
                        out_meta = st._infer(x)
                    except Exception as e:  # noqa: BLE001 - reported to every rank below
                        error = (f"{who} failed on an input of {_fmt(meta)}: "
                                 f"{type(e).__name__}: {e}")
                if not error and st.output_meta is not None and st.output_meta != out_meta:
                    error = (f"{who} produces {_fmt(out_meta)} per micro-batch but its "
                             f"output_args say {_fmt(st.output_meta)}")
                if out_meta is not None and out_meta[1] not in _DTYPES:
                    error = f"{who} produces dtype {out_meta[1]}, which cannot be sent"
            st.in_meta, st.out_meta = meta, out_meta
            if not st.is_last:
                ok = not error and out_meta is not None
                if self.P == 1:
                    local[s + 1] = out_meta if ok else None
                else:
                    self._send_meta(out_meta, ok, s + 1, st.device)
        every = [None] * self.P
        c10d.all_gather_object(every, error, group=self.group)
        first_error = next((e for e in every if e), "")
        if first_error:
            raise PipeliningShapeError(f"pipeline shape check failed: {first_error}")
        self._ready = True

    def _global(self, stage: int) -> int:
        gr = self._rank_of(stage)
        return gr if self.group is None else c10d.get_global_rank(self.group, gr)

    # ***** one step *****
    def step(self, *args, target=None, losses=None, **kwargs):
        """Run one training step over ``n_microbatches`` micro-batches.

        Args:
            *args: on the rank holding stage 0, the whole batch (one tensor, split along
                dimension 0); other ranks pass nothing (anything passed is ignored, as torch).
            target: on the rank holding the last stage, the whole batch's targets for
                ``loss_fn(output, target)``.
            losses: on the last stage's rank, a list that receives each micro-batch's loss.

        Returns:
            Tensor | None: on the last stage's rank, the outputs of all micro-batches
            concatenated; None elsewhere.

        Raises:
            ValueError: a missing input or target, or a batch not divisible by n_microbatches.
            PipeliningShapeError: a stage's shapes disagree with its neighbour's (every rank).
            RuntimeError: the ranks built different schedules (every rank).
        """
        if kwargs:
            raise NotImplementedError("step(): keyword inputs for the stages are not supported")
        M = self._n_microbatches
        first, last = self._by_index.get(0), self._by_index.get(self.S - 1)
        x_mbs = tgt_mbs = None
        if first is not None:
            if len(args) != 1:
                raise ValueError(f"step(): the rank holding stage 0 (rank {c10d.get_rank()}) "
                                 f"must pass the batch, one tensor; got {len(args)} arguments")
            x_mbs = _split(args[0], M, "input")
        if last is not None and self._loss_fn is not None:
            if target is None:
                raise ValueError(f"step(): the rank holding the last stage (rank "
                                 f"{c10d.get_rank()}) must pass target= for loss_fn")
            tgt_mbs = _split(target, M, "target")
        if not self._ready:
            self._prepare(x_mbs[0] if x_mbs is not None else None)
        return self._run(x_mbs, tgt_mbs, losses)

    def _run(self, x_mbs, tgt_mbs, losses):
        from ...tensor import Tensor
        M, train = self._n_microbatches, self._loss_fn is not None
        acts = [a for a in self._actions if train or a[0] == F]
        for st in self._stages:
            st._clear()
        scale = 1.0 / M if self.scale_grads else 1.0
        local: dict = {}        # P == 1: messages between stages of this rank
        works: list = []
        outputs: dict = {}
        mb_losses: dict = {}
        compute, held = 0.0, 0
        t0 = time.perf_counter()

        def recv_op(act):
            k, s, m = act
            st = self._by_index[s]
            if (k == F and st.is_first) or (k == B and st.is_last):
                return None
            if k == B and st.out_meta[1] not in ("float32", "float64", "float16", "bfloat16"):
                return None    # an integer boundary carries no gradient
            if self.P == 1:
                return None
            meta = st.in_meta if k == F else st.out_meta
            buf = Tensor._wrap(np.empty(meta[0], dtype=np.dtype(meta[1]))).to(st.device)
            peer = self._rank_of(s - 1 if k == F else s + 1)
            return buf, c10d.P2POp(c10d.irecv, buf, group=self.group, group_peer=peer,
                                   tag=_tag(k, s, m, self.S))

        def post(ops):
            if ops:
                # finished sends need not be kept (their buffers can go); failures are kept to
                # be raised by wait() below
                works[:] = [ws for ws in works
                            if not all(w.is_completed() and w.exception() is None for w in ws)]
                w = c10d.batch_isend_irecv(ops)
                works.append(w)
                return w
            return []

        pending = recv_op(acts[0]) if acts else None
        pending_work = post([pending[1]]) if pending else []
        for i, (k, s, m) in enumerate(acts):
            st = self._by_index[s]
            if pending is not None:
                for w in pending_work:
                    w.wait()
                inp = pending[0]
            else:
                inp = local.pop((k, s, m), None)
            c0 = time.perf_counter()
            sends = []
            if k == F:
                x = x_mbs[m] if st.is_first else inp
                out = st.forward_one_chunk(m, x, keep=train)
                held = max(held, sum(len(t._cache) for t in self._stages))
                if st.is_last:
                    outputs[m] = out.detach()
                    if train:
                        loss = self._loss_fn(out, tgt_mbs[m])
                        mb_losses[m] = loss
                else:
                    sends.append((out.detach(), s + 1, F))
            else:
                loss = mb_losses.get(m) if st.is_last else None
                g = st.backward_one_chunk(m, grad_out=inp, loss=loss, scale=scale,
                                          last_backward=(m == M - 1))
                if loss is not None:     # the loss's graph would keep the activations alive
                    mb_losses[m] = loss.detach()
                if g is not None:
                    sends.append((g, s - 1, B))
            compute += time.perf_counter() - c0
            ops = []
            for t, dst, kind in sends:
                if self.P == 1:
                    local[(kind, dst, m)] = t
                else:
                    ops.append(c10d.P2POp(c10d.isend, t, group=self.group,
                                          group_peer=self._rank_of(dst),
                                          tag=_tag(kind, dst, m, self.S)))
            pending = recv_op(acts[i + 1]) if i + 1 < len(acts) else None
            if pending is not None:
                ops.append(pending[1])
            w = post(ops)
            pending_work = w if pending is not None else []
        for ws in works:
            for w in ws:
                w.wait()
        self.last_step_stats = {"step_s": time.perf_counter() - t0, "compute_s": compute,
                                "peak_live": {st.stage_index: st.peak_live
                                              for st in self._stages},
                                "peak_live_rank": held}
        if losses is not None and mb_losses:
            losses.extend(mb_losses[m].detach() for m in range(M))
        if self.S - 1 in self._by_index:
            from ... import cat
            return cat([outputs[m] for m in range(M)], 0)
        return None


def _split(t, M: int, what: str) -> list:
    n = t.shape[0] if t.ndim else 0
    if n == 0 or n % M:
        raise ValueError(f"step(): the {what} has {n} rows along dimension 0, which does not "
                         f"split into n_microbatches={M} equal micro-batches (the loss average "
                         f"over micro-batches equals the full-batch mean only for equal ones)")
    b = n // M
    return [t[i * b:(i + 1) * b] for i in range(M)]


class PipelineScheduleSingle(_PipelineSchedule):
    """Base of the schedules that run one stage per rank."""

    def __init__(self, stage, n_microbatches, loss_fn=None, args_chunk_spec=None,
                 kwargs_chunk_spec=None, output_merge_spec=None, scale_grads=True):
        if not isinstance(stage, PipelineStage):
            raise TypeError(f"{type(self).__name__}: takes one PipelineStage (use "
                            f"ScheduleInterleaved1F1B for several stages per rank)")
        if stage.num_stages != stage.group_size:
            raise ValueError(f"{type(self).__name__}: num_stages={stage.num_stages} must equal "
                             f"the {stage.group_size} ranks of the pipeline group (one stage per "
                             f"rank); use ScheduleInterleaved1F1B for more stages than ranks")
        super().__init__([stage], n_microbatches, loss_fn, args_chunk_spec, kwargs_chunk_spec,
                         output_merge_spec, scale_grads)


class PipelineScheduleMulti(_PipelineSchedule):
    """Base of the schedules that run several stages per rank."""

    def __init__(self, stages, n_microbatches, loss_fn=None, args_chunk_spec=None,
                 kwargs_chunk_spec=None, output_merge_spec=None, scale_grads=True):
        super().__init__(list(stages), n_microbatches, loss_fn, args_chunk_spec,
                         kwargs_chunk_spec, output_merge_spec, scale_grads)


class ScheduleGPipe(PipelineScheduleSingle):
    """GPipe: all forwards, then all backwards. Holds every micro-batch's activations at once.

    Args:
        stage: this rank's :class:`PipelineStage`.
        n_microbatches: how many micro-batches each batch is split into.
        loss_fn: ``loss_fn(output, target)`` on the last stage; None: forward only.
        scale_grads: divide gradients by ``n_microbatches`` (default, as torch), so they equal
            the gradients of the full batch's mean loss.

    Example:
        >>> sched = ScheduleGPipe(stage, n_microbatches=4, loss_fn=loss)   # doctest: +SKIP
        >>> sched.step(x) if rank == 0 else sched.step(target=y, losses=losses)  # doctest: +SKIP
    """
    _kind = "gpipe"


class Schedule1F1B(PipelineScheduleSingle):
    """1F1B: after a warm-up, each forward is followed by one backward, so a stage holds at most
    ``num_stages - stage_index`` micro-batches' activations instead of all of them.

    Args: as :class:`ScheduleGPipe`.
    """
    _kind = "1f1b"


class ScheduleInterleaved1F1B(PipelineScheduleMulti):
    """Interleaved 1F1B (Megatron-LM): each rank holds ``V`` stages (``s, s + P, ...``), which
    cuts the bubble by about ``V``. ``n_microbatches`` must be a multiple of the rank count.

    Args:
        stages: this rank's stages (a list of :class:`PipelineStage`).
        n_microbatches, loss_fn, scale_grads: as :class:`ScheduleGPipe`.

    Raises:
        ValueError: ``n_microbatches`` not a multiple of the pipeline's rank count.
    """
    _kind = "interleaved"

    def __init__(self, stages, n_microbatches, loss_fn=None, args_chunk_spec=None,
                 kwargs_chunk_spec=None, output_merge_spec=None, scale_grads=True):
        stages = list(stages)
        P = stages[0].group_size if stages else 1
        if int(n_microbatches) % P:
            raise ValueError(f"ScheduleInterleaved1F1B: n_microbatches={n_microbatches} must be "
                             f"a multiple of the {P} pipeline ranks")
        super().__init__(stages, n_microbatches, loss_fn, args_chunk_spec, kwargs_chunk_spec,
                         output_merge_spec, scale_grads)


_SCHEDULE_NAMES = {"1F1B": Schedule1F1B, "Interleaved1F1B": ScheduleInterleaved1F1B,
                   "GPipe": ScheduleGPipe, "PipelineScheduleSingle": PipelineScheduleSingle,
                   "PipelineScheduleMulti": PipelineScheduleMulti}
_UNSUPPORTED_NAMES = ("LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV")


def get_schedule_class(schedule_name: str) -> type:
    """The schedule class for a name, case-insensitive (torch's ``get_schedule_class``).

    Training scripts that read the schedule from a config (``"1F1B"``, ``"GPipe"``,
    ``"Interleaved1F1B"``) look the class up with this.

    Args:
        schedule_name: ``"1F1B"``, ``"Interleaved1F1B"``, ``"GPipe"``,
            ``"PipelineScheduleSingle"`` or ``"PipelineScheduleMulti"``, in any case.

    Returns:
        The schedule class, e.g. :class:`Schedule1F1B` for ``"1f1b"``.

    Raises:
        NotImplementedError: a schedule torch has and TensorBrain does not (``"LoopedBFS"``,
            ``"InterleavedZeroBubble"``, ``"ZBVZeroBubble"``, ``"DualPipeV"``).
        ValueError: a name neither knows.

    Example:
        >>> from tensorbrain.distributed.pipelining.schedules import get_schedule_class
        >>> get_schedule_class("1f1b").__name__
        'Schedule1F1B'
    """
    key = str(schedule_name).lower()
    for name, cls in _SCHEDULE_NAMES.items():
        if name.lower() == key:
            return cls
    for name in _UNSUPPORTED_NAMES:
        if name.lower() == key:
            raise NotImplementedError(
                f"get_schedule_class({schedule_name!r}): torch's Schedule{name} is not supported "
                f"by TensorBrain; the schedules are GPipe, 1F1B and Interleaved1F1B")
    raise ValueError(f"Unknown schedule name {schedule_name!r}. The valid options are "
                     f"{list(_SCHEDULE_NAMES)}")
