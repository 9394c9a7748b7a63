"""``Manager``: one replica's side of live recovery (torchft's ``Manager``, on our store and
process groups). See the package docstring for the protocol and ``docs/fault_tolerance.md``.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
from datetime import timedelta
from typing import Any

import numpy as np

from ... import _config
from .. import _liveness, _work
from ..errors import DistError, DistStoreError
from ._quorum import Decision, Dropped, Quorum, Refused, record


def _dist():
    from ... import distributed
    return distributed


class _Reduction:
    """What :meth:`Manager.allreduce` returns: ``wait()`` finishes the average (or records the
    failure and leaves the tensor as it is: the step will not commit)."""

    def __init__(self, manager, tensor, work):
        self._manager, self._tensor, self._work = manager, tensor, work

    def wait(self, timeout=None):
        """Finish the reduction; returns the tensor (averaged unless the step failed)."""
        work, self._work = self._work, None
        if work is not None:
            try:
                work.wait()
            except DistError as exc:
                self._manager.report_error(exc)
                return self._tensor
            from ... import autograd
            with autograd.no_grad():
                self._tensor.div_(self._manager.num_replicas())
        return self._tensor

    def is_completed(self) -> bool:
        """Whether ``wait`` would return at once."""
        return self._work is None or self._work.is_completed()


class Manager:
    """One replica of a job that survives the loss of replicas without stopping.

    Joins the group at construction (the first replicas form it; a later one, a replacement,
    is admitted at the running replicas' next step boundary and receives their live state over
    the process group), then per step: :meth:`start_step` (a new round of the quorum when the
    membership may have changed), :meth:`allreduce` (averaged over the live replicas; a failure
    is recorded, not raised), :meth:`should_commit` (every replica succeeded: apply the step).
    The live replicas are the default process group (``tb.distributed``): it is made again,
    in the same processes, whenever the membership changes.

    Without model and state_dict the manager keeps the membership only (``tb.distributed.elastic``
    moves the state itself, with ``State.sync``).

    Args:
        model: the module whose ``state_dict`` is the replicas' shared state (with ``optimizer``).
        optimizer: its optimizer (its state travels too).
        state_dict: instead of model/optimizer: returns the state (tensors, arrays, numbers,
            strings, dicts and lists of them).
        load_state_dict: loads what ``state_dict`` returned.
        config: what must be equal on every replica besides the model (hyperparameters, data):
            a JSON-able dict; a replacement with another config is refused, named.
        min_replicas: the fewest replicas the group may shrink to; a round that cannot reach it
            raises, naming the missing replicas (default ``TB_FT_MIN_REPLICAS``, 1).
        initial_replicas: how many replicas form the first round (default ``WORLD_SIZE`` or
            ``min_replicas``); after ``join_timeout / 10`` s fewer, at least ``min_replicas``,
            may start.
        timeout: seconds for collectives and for a round to wait for a missing replica (a frozen
            one is dropped after it, named; default ``TB_FT_TIMEOUT``, 60).
        join_timeout: seconds a new replica waits to be admitted.
        backend: the process group's backend (``"tcp"``).
        store: the store (default: a client of ``MASTER_ADDR:MASTER_PORT``, tbrun's agent store).
            It must outlive every replica: never one a replica serves.
        replica_id: this process's name (default ``host:pid``).
        replica_group: the name the processes of one replica group share, when a replica is
            several processes (the shard dimension of a 2-D mesh); the quorum admits and
            drops a replica group whole.
        group_size: processes per replica group (1: one process per replica, as DDP).
        group_rank: this process's rank in its replica group (its shard).

    Raises:
        Refused: this replica's model, optimizer or config differs from the running group's
            (the message names the difference); the group is not disturbed.
        DistError: no group admitted it within ``join_timeout``.
    """

    def __init__(self, model=None, optimizer=None, *, state_dict=None, load_state_dict=None,
                 config=None, min_replicas: int | None = None,
                 initial_replicas: int | None = None, timeout: float | None = None,
                 join_timeout: float = 300.0, backend: str = "tcp", store=None,
                 replica_id: str | None = None, replica_group: str | None = None,
                 group_size: int = 1, group_rank: int = 0):
        if (model is not None and state_dict is not None) or (state_dict is None) != (
                load_state_dict is None):
            raise ValueError("Manager takes model (and optionally optimizer), or both "
                             "state_dict and load_state_dict, or neither (membership only)")
        self.model, self.optimizer = model, optimizer
        self._state_dict = state_dict or (self._model_state if model is not None else None)
        self._load_state_dict = load_state_dict or (self._load_model_state if model is not None
                                                    else None)
        self.config = dict(config or {})
        self.min_replicas = int(min_replicas if min_replicas is not None
                                else _config.get("TB_FT_MIN_REPLICAS"))
        if self.min_replicas < 1:
            raise ValueError(f"min_replicas must be >= 1, got {min_replicas}")
        env_world = int(os.environ.get("WORLD_SIZE", "0") or 0)
        self.initial_replicas = int(initial_replicas or max(env_world, self.min_replicas))
        self.timeout = float(timeout if timeout is not None else _config.get("TB_FT_TIMEOUT"))
        self.join_timeout = float(join_timeout)
        self.backend = backend
        self.replica_id = replica_id or f"{socket.gethostname()}:{os.getpid()}"
        self.group_size, self.group_rank = int(group_size), int(group_rank)
        if self.group_size > 1 and not replica_group:
            raise ValueError("Manager(group_size > 1) needs replica_group: the name the "
                             "processes of one replica group share")
        if not 0 <= self.group_rank < self.group_size:
            raise ValueError(f"group_rank {group_rank} is out of range for group_size "
                             f"{group_size}")
        self.replica_group = replica_group or self.replica_id
        # (replicas, group_size) over the live processes, when group_size > 1
        self.mesh: Any = None
        self._replicate: Any = None  # the replicate dimension's group (None: the default group)
        self.events: list[dict] = []
        raw, pg_raw = _stores(store, self.timeout)
        scope = f"tbft/{_config.get('TB_RUN_ID') or 'run'}"
        from ..store import PrefixStore
        self._quorum = Quorum(PrefixStore(scope, raw), self.timeout, self.min_replicas)
        self._pg_store = PrefixStore(scope, pg_raw)
        self._raw = [raw, pg_raw]
        self.signature = self._signature()
        self._sig = hashlib.sha256(json.dumps(self.signature, sort_keys=True).encode()
                                   ).hexdigest()[:16]
        self._step = -1
        self._decision: Decision | None = None
        self._members: list = []
        self._pg_ok = False
        self._errors: list = []
        self._suspects: set = set()
        self._need_round = False
        self._join()

    # ***** what the replicas share *****
    def _model_state(self) -> dict:
        out = {"model": self.model.state_dict()}
        if self.optimizer is not None:
            out["optimizer"] = self.optimizer.state_dict()
        return out

    def _load_model_state(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        if self.optimizer is not None:
            self.optimizer.load_state_dict(state["optimizer"])

    def _signature(self) -> dict:
        """What a replica must share with the group to join it: parameter and buffer names,
        shapes and dtypes, the optimizer's class and group sizes, and ``config``."""
        sig: dict = {"config": self.config}
        if self.model is not None:
            sig["model"] = [[k, list(v.shape), str(v.dtype)]
                            for k, v in self.model.state_dict().items()]
        if self.optimizer is not None:
            sig["optimizer"] = [type(self.optimizer).__name__,
                                [len(g["params"]) for g in self.optimizer.param_groups]]
        return sig

    # ***** queries *****
    def current_step(self) -> int:
        """Steps committed by the group so far (the next step's index)."""
        return max(self._step, 0)

    def rank(self) -> int:
        """This process's rank among the live ones (changes with the membership)."""
        return self._members.index(self.replica_id)

    def world_size(self) -> int:
        """The number of live processes (replicas x group_size)."""
        return len(self._members)

    def num_replicas(self) -> int:
        """The number of live replica groups."""
        return len(self._members) // self.group_size

    def replica_rank(self) -> int:
        """This process's replica group's index among the live ones."""
        return self.rank() // self.group_size

    def source_rank(self) -> int:
        """The rank whose state this process's group rank took in the last round (the highest
        step; replica group 0's in a new job)."""
        assert self._decision is not None
        return self._decision.members.index(self._decision.sources[str(self.group_rank)])

    def needs_round(self) -> bool:
        """Whether the next :meth:`start_step` begins with a round (a failure, or a joiner)."""
        return self._need_round or not self._pg_ok

    def members(self) -> list:
        """The live replicas' ids, in rank order."""
        return list(self._members)

    # ***** joining and rounds *****
    def _join(self) -> None:
        group = self._quorum.claim_signature(self.signature, self.group_rank)
        if group != json.loads(json.dumps(self.signature, sort_keys=True)):
            raise Refused(f"replica {self.replica_id} may not join: "
                          + _difference(self.signature, group))
        self._apply(self._admit())

    def _record(self, suspects) -> dict:
        return record(self.replica_id, self._step, self._sig, suspects, self.replica_group,
                      self.group_rank, self.group_size)

    def _admit(self) -> Decision:
        """Ask to join and wait for the verdict (as a new replica, or one that was dropped)."""
        rec = self._record(())
        k = self._quorum.register(rec)
        try:
            return self._quorum.wait_admitted(k, rec, self.initial_replicas, self.join_timeout,
                                              last_call=self.join_timeout / 10)
        except Refused as exc:
            group = json.loads(self._quorum.store.get(f"signature/{self.group_rank}"))
            raise Refused(f"{exc}: " + _difference(self.signature, group)) from None

    def _next_round(self) -> Decision:
        assert self._decision is not None
        rec = self._record(self._suspects)
        try:
            d = self._quorum.enter(self._decision, rec)
        except Dropped as exc:
            self._event("dropped", round=exc.decision.round,
                        msg=f"this replica was left out of round {exc.decision.round} (it came "
                            f"after the quorum timeout of {self.timeout:g} s); joining again")
            self._teardown()
            d = self._admit()
        if d.error is not None:
            self._teardown()
            raise DistError(f"replica {self.replica_id}: {d.error}")
        return d

    def _apply(self, d: Decision) -> None:
        """Form the group ``d`` decided and hand the live state to the members that need it;
        on a failure (a member died meanwhile), the next round, until one holds."""
        while True:
            try:
                self._reconfigure(d)
                self._recover(d)
            except DistError as exc:
                self._decision = d
                self._note_failure(exc)
                d = self._next_round()
                continue
            self._decision = d
            self._suspects.clear()
            self._need_round = False
            return

    def _reconfigure(self, d: Decision) -> None:
        old = list(self._members)
        if not (self._pg_ok and old == d.members):
            self._teardown()
            from .. import _groups
            from ..store import PrefixStore
            _groups._WORLD.inits = 0  # every member names this group's keys alike
            self._members = list(d.members)
            _dist().init_process_group(
                self.backend, store=PrefixStore(f"q/{d.round}/pg", self._pg_store),
                rank=d.members.index(self.replica_id), world_size=len(d.members),
                timeout=timedelta(seconds=self.timeout))
            if self.group_size > 1:
                from ..device_mesh import init_device_mesh
                self.mesh = init_device_mesh("cpu", (self.num_replicas(), self.group_size),
                                             mesh_dim_names=("replicate", "shard"))
                self._replicate = self.mesh.get_group("replicate")
            self._pg_ok = True
        self._report(d, old)

    def _recover(self, d: Decision) -> None:
        """Each group rank's source sends its state to that rank's recovering members (point to
        point)."""
        from ..._factories import tensor as tb_tensor
        from .._codec import decode, encode
        dist = _dist()
        mine = [m for m in d.recovering
                if d.records[m]["group_rank"] == self.group_rank]  # my group rank's recoverers
        source = d.sources[str(self.group_rank)]
        if self._state_dict is None or self._load_state_dict is None:
            pass  # membership only: the caller moves the state (elastic's State.sync)
        elif mine and self.replica_id == source:
            blob = np.frombuffer(encode(self._state_dict()), np.uint8).copy()
            size = tb_tensor(np.array([blob.size], np.int64))
            payload = tb_tensor(blob)
            for m in mine:
                dst = d.members.index(m)
                dist.send(size, dst)
                dist.send(payload, dst)
        elif self.replica_id in mine:
            src = d.members.index(source)
            size = tb_tensor(np.zeros(1, np.int64))
            dist.recv(size, src)
            payload = tb_tensor(np.zeros(int(size.numpy()[0]), np.uint8))
            dist.recv(payload, src)
            state = decode(payload.numpy().tobytes())
            assert isinstance(state, dict)
            self._load_state_dict(state)
        self._step = max(d.step, 0)

    def _teardown(self) -> None:
        dist = _dist()
        self._pg_ok = False
        self.mesh = self._replicate = None
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - a failed group's teardown must not mask why
                pass

    # ***** per step *****
    def start_step(self) -> None:
        """Begin a step: a round of the quorum first when the membership may have changed (a
        failed step, a waiting joiner), then the group is reformed and the state handed over."""
        if self._need_round or not self._pg_ok:
            self._apply(self._next_round())
        self._errors.clear()

    def step_failed(self) -> bool:
        """Whether this step has failed so far (it will not commit)."""
        return bool(self._errors)

    def report_error(self, exc: BaseException) -> None:
        """Record a failure of this step (the step will not commit; the next one starts with a
        round). :meth:`allreduce` calls it; call it for your own collectives.

        Args:
            exc: the error.
        """
        self._note_failure(exc)

    def _note_failure(self, exc: BaseException) -> None:
        self._errors.append(exc)
        self._pg_ok = False
        self._need_round = True
        e: BaseException | None = exc
        while e is not None:  # the ranks the backend blamed (tcp: abort frames, /proc)
            for r in getattr(e, "culprits", None) or ():
                if 0 <= r < len(self._members) and self._members[r] != self.replica_id:
                    self._suspects.add(self._members[r])
            e = e.__cause__
        host = socket.gethostname()
        records = self._decision.records if self._decision else {}
        for m in self._members:  # a same-host member whose process is gone or stopped
            rec = records.get(m) or {}
            if m != self.replica_id and rec.get("host") == host and rec.get("pid") and \
                    _liveness.proc_state(int(rec["pid"])):
                self._suspects.add(m)

    def allreduce(self, tensor, sync: bool = False) -> _Reduction:
        """Start averaging ``tensor`` over the live replicas (with replica groups: over the
        replicate dimension, this group rank's peers), in place; ``wait()`` the result.

        A failure (a replica died) is recorded, not raised: the tensor is left as it is and
        :meth:`should_commit` returns False.

        Args:
            tensor: a Tensor.
            sync: reduce in this thread now (no hand-off to the backend's thread: what DDP does
                when there is no core to overlap on, and for its last bucket).

        Returns:
            An object with ``wait()`` (returns the tensor) and ``is_completed()``.
        """
        if self._errors or not self._pg_ok:
            return _Reduction(self, tensor, None)
        try:
            work = _dist().all_reduce(tensor, group=self._replicate, async_op=not sync)
        except DistError as exc:
            self._note_failure(exc)
            return _Reduction(self, tensor, None)
        if sync:
            done = _Reduction(self, tensor, _work.completed("all_reduce", tensor, None, 0, ""))
            done.wait()
            return done
        return _Reduction(self, tensor, work)

    def should_commit(self) -> bool:
        """Whether every live replica finished this step (then apply it: ``optimizer.step()``).

        One 16-byte all_reduce (max) carries each replica's failure flag and, from rank 0, the
        number of replicas waiting to join (one store read): when one waits, or the step failed
        anywhere, the next step starts with a round of the quorum.

        Returns:
            bool: True when the step may be applied; the committed step count advances.
        """
        pending = 0
        if self._pg_ok and not self._errors and self.rank() == 0:
            try:
                pending = self._quorum.pending()
            except DistStoreError as exc:
                self._note_failure(exc)
        vote = np.array([1 if self._errors else 0, pending], np.int64)
        if self._pg_ok:
            from ..._factories import tensor as tb_tensor
            t = tb_tensor(vote)
            try:
                _dist().all_reduce(t, op=_dist().ReduceOp.MAX)
                vote = t.numpy()
            except DistError as exc:
                self._note_failure(exc)
                vote[0] = 1
        ok = not self._errors and int(vote[0]) == 0
        if ok:
            self._step = self.current_step() + 1
        assert self._decision is not None
        if not ok or int(vote[1]) > self._decision.ready:
            self._need_round = True
        return ok

    def shutdown(self) -> None:
        """Leave: destroy the process group and close the store clients."""
        self._teardown()
        for s in self._raw:
            try:
                s.close()
            except Exception:  # noqa: BLE001
                pass

    # ***** reporting *****
    def _event(self, kind: str, **info) -> None:
        info = dict(kind=kind, time=time.time(), replica=self.replica_id, **info)
        self.events.append(info)
        sys.stderr.write(f"[tensorbrain ft] replica {self.replica_id}: {info['msg']}\n")
        sys.stderr.flush()

    def _report(self, d: Decision, old: list) -> None:
        if old == d.members and not d.recovering and not d.refused:
            return
        parts = [f"round {d.round}: world {len(old)} -> {len(d.members)}"]
        for x in d.dropped:
            rec = x.get("record") or {}
            parts.append(f"dropped {x['id']} (rank {old.index(x['id']) if x['id'] in old else '?'}"
                         f", process {rec.get('pid', '?')} on {rec.get('host', '?')}): "
                         f"{x['why']}")
        added = [m for m in d.members if m not in old and m != self.replica_id]
        if not old:
            parts = [f"round {d.round}: joined as rank {d.members.index(self.replica_id)} of "
                     f"{len(d.members)}"]
        elif added:
            parts.append(f"admitted {', '.join(added)}")
        for x in d.refused:
            parts.append(f"refused {x['id']}: {x['why']}")
        if d.recovering:
            parts.append(f"{', '.join(d.recovering)} receive(s) the state of step {max(d.step, 0)}"
                         f" from {', '.join(sorted(set(d.sources.values())))}")
        self._event("round", round=d.round, members=list(d.members), old=old,
                    dropped=[x["id"] for x in d.dropped], msg="; ".join(parts))


def _stores(store, timeout: float):
    """Two clients of the job's store: one for the quorum, one for the process groups."""
    from ..store import TCPStore
    if store is not None:
        return store, store
    host = os.environ.get("MASTER_ADDR")
    port = os.environ.get("MASTER_PORT")
    if not host or not port:
        raise ValueError("Manager needs a store: pass store=..., or set MASTER_ADDR and "
                         "MASTER_PORT to a store that outlives every replica (tbrun's agent "
                         "store does)")
    td = timedelta(seconds=max(timeout, 30.0))
    return (TCPStore(host, int(port), None, False, td), TCPStore(host, int(port), None, False, td))


def _difference(mine: dict, group: dict) -> str:
    """The first way ``mine`` differs from the group's signature, named."""
    if mine.get("config") != group.get("config"):
        keys = sorted(set(mine.get("config", {})) | set(group.get("config", {})))
        diff = [k for k in keys if mine.get("config", {}).get(k) != group.get("config", {}).get(k)]
        return (f"its config differs from the group's in {diff}: this replica has "
                f"{ {k: mine.get('config', {}).get(k) for k in diff} }, the group "
                f"{ {k: group.get('config', {}).get(k) for k in diff} }")
    a, b = mine.get("model") or [], group.get("model") or []
    ga = {k: (s, d) for k, s, d in b}
    for k, shape, dtype in a:
        if k not in ga:
            return f"its model has {k!r}, which the group's has not"
        if ga[k] != (shape, dtype):
            return (f"its model's {k!r} is {dtype} of shape {tuple(shape)}, the group's is "
                    f"{ga[k][1]} of shape {tuple(ga[k][0])}")
    missing = [k for k, _, _ in b if k not in {x[0] for x in a}]
    if missing:
        return f"its model lacks {missing[:5]}, which the group's has"
    if mine.get("optimizer") != group.get("optimizer"):
        return (f"its optimizer is {mine.get('optimizer')}, the group's {group.get('optimizer')}"
                " (class, parameters per group)")
    return "its signature differs from the group's"
