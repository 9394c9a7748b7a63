"""The quorum: which replicas form the group, decided through the store (no leader process).

Keys (under the Manager's prefix of the store)::

    signature/<g>          the model/config signature (JSON) of group rank g, set by the first
    joiners                counter: processes that asked to join (new ones, replacements)
    joiner/<k>             the k-th joiner's record; joiner/<k>/verdict: admitted or refused
    ready                  counter: replica groups whose processes have all asked (the doorbell)
    round                  the latest decided round
    q/<R>/m/<id>           a member's record for round R (step, suspects, pid, host)
    q/<R>/n                counter: members that entered round R
    q/<R>/decision         round R's decision (JSON), written once by compare-and-set

A round happens only when the membership may change: at the start, after a failed step, and
when the step's commit vote says a joiner waits (``Manager.should_commit``). Every member of
the previous round enters the next one. Whoever sees that everyone expected has arrived (or
everyone but the members some arrived member suspects of having died, or the quorum timeout
passed) proposes a decision; the first proposal wins (``compare_set``) and every member reads
that one, so all agree. A decision lists the members in rank order (the survivors in their old
order, then the admitted joiners), the highest step among them and the member that holds it
(the source of the live state), the members that must recover from it, and who was dropped or
refused, and why.

A replica is a *replica group* of ``group_size`` processes (1 for DDP; the shard dimension of
a 2-D mesh otherwise); ranks are laid out group by group, so the default group's ranks form the
mesh ``(replicas, group_size)``. A group takes part only whole: a joining group is admitted once
all its processes have asked, and a group that lost a process is dropped as a whole (its other
processes find themselves left out and ask to join again, with the replacement).

Records are JSON: ``{"id", "step", "suspects", "sig", "pid", "host", "group", "group_rank",
"group_size"}``. ``step`` is -1 for a process without state (a new one); in a round where every
member is new (the first), replica group 0's processes are the sources and the others take
their state, as DDP broadcasts rank 0's parameters. The source of each group rank sends to the
processes of the same group rank that recover.
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from datetime import timedelta

from .. import _liveness
from ..errors import DistError, DistStoreError

_POLL_S = 0.05  # how often a waiting member looks at the others' records when it may decide


@dataclass
class Decision:
    """One round's outcome, as every member reads it from the store."""
    round: int
    members: list          # replica ids in rank order
    records: dict          # id -> the record it entered the round with (joiners: their join)
    handled: list          # joiner indices handled so far (admitted or refused)
    ready: int             # the doorbell's count this decision accounts for
    step: int              # the highest step among the members
    sources: dict          # group rank (str) -> the member whose state that rank's recoverers take
    recovering: list       # ids that receive their source's state
    dropped: list = field(default_factory=list)   # [{"id", "why"}]
    refused: list = field(default_factory=list)   # [{"k", "id", "why"}]
    error: str | None = None

    def to_json(self) -> bytes:
        """The decision as stored."""
        return json.dumps(self.__dict__, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Decision:
        """Parse a stored decision.

        Args:
            raw: the stored bytes.
        """
        return cls(**json.loads(raw))


class Refused(DistError):
    """This replica may not join: its model, optimizer or config differs from the group's."""


class Dropped(Exception):
    """This replica is not in the round's decision (it was too late: frozen, or too slow)."""

    def __init__(self, decision: Decision):
        super().__init__(f"dropped in round {decision.round}")
        self.decision = decision


def record(replica_id: str, step: int, sig: str, suspects=(), group: str | None = None,
           group_rank: int = 0, group_size: int = 1) -> dict:
    """This process's record for a round or a join request.

    Args:
        replica_id: the process's id.
        step: its committed step (-1: no state yet).
        sig: the hash of its signature.
        suspects: ids it saw fail.
        group: its replica group's name (default: its own id, a group of one).
        group_rank: its rank in the replica group.
        group_size: the replica group's size.

    Returns:
        The record.
    """
    return {"id": replica_id, "step": int(step), "suspects": sorted(suspects), "sig": sig,
            "pid": os.getpid(), "host": socket.gethostname(), "group": group or replica_id,
            "group_rank": int(group_rank), "group_size": int(group_size)}


class Quorum:
    """The store protocol of the module docstring, for one replica.

    Args:
        store: the store (a client; must outlive any replica: tbrun's agent store, or one the
            job runs apart).
        timeout: seconds a round waits for missing members before deciding without them.
        min_replicas: the fewest members a decision may have.
    """

    def __init__(self, store, timeout: float, min_replicas: int):
        self.store = store
        self.timeout = float(timeout)
        self.min_replicas = int(min_replicas)

    # ***** small store helpers *****
    def _get(self, key: str, timeout: float):
        """The value of ``key``, waiting up to ``timeout`` seconds; None if still absent."""
        try:
            self.store.wait([key], timedelta(seconds=max(timeout, 0.001)))
        except DistStoreError as exc:
            if str(exc).startswith("timed out"):
                return None
            raise
        return self.store.get(key)

    def _present(self, key: str) -> bool:
        return self.store.check([key])

    # ***** signature: a replacement with another model or config is refused before it joins *****
    def claim_signature(self, signature: dict, group_rank: int = 0) -> dict:
        """Set the signature of ``group_rank`` if none is set; return the job's (maybe another).

        Args:
            signature: this process's signature.
            group_rank: its rank in its replica group (shards may differ by rank).

        Returns:
            The job's signature for that group rank.
        """
        mine = json.dumps(signature, sort_keys=True).encode()
        return json.loads(self.store.compare_set(f"signature/{group_rank}", b"", mine))

    # ***** joining *****
    def register(self, rec: dict) -> int:
        """Ask to join: returns this joiner's index (1, 2, ...).

        Args:
            rec: the joiner's record.
        """
        k = int(self.store.add("joiners", 1))
        self.store.set(f"joiner/{k}", json.dumps({**rec, "k": k}).encode())
        # the last process of a replica group to ask rings the doorbell
        if int(self.store.add(f"group/{rec['group']}/asked", 1)) % rec["group_size"] == 0:
            self.store.add("ready", 1)
        return k

    def pending(self) -> int:
        """Replica groups that have asked to join so far, whole (the doorbell: one store read)."""
        return int(self.store.add("ready", 0))

    def wait_admitted(self, k: int, rec: dict, initial: int, join_timeout: float,
                      last_call: float) -> Decision:
        """Wait until joiner ``k`` is admitted (the decision of its round) or refused.

        Before any group exists, the first round is decided as soon as ``initial`` processes
        have asked; after ``last_call`` seconds without one, any joiner may decide it with the
        whole replica groups there are, if they reach ``min_replicas``.

        Raises:
            Refused: the job refused this process (the reason is the message).
            DistError: no round admitted it within ``join_timeout`` seconds.
        """
        start = time.monotonic()
        deadline = start + join_timeout
        while True:
            if not self._present("round"):
                count = int(self.store.add("joiners", 0))
                if count >= initial or time.monotonic() - start >= last_call:
                    self._bootstrap(count)
            left = deadline - time.monotonic()
            raw = self._get(f"joiner/{k}/verdict", min(0.5, max(left, 0.001)))
            if raw is not None:
                verdict = json.loads(raw)
                if "refused" in verdict:
                    raise Refused(verdict["refused"])
                return self.decision(verdict["round"])
            if time.monotonic() >= deadline:
                count = int(self.store.add("joiners", 0))
                state = (f"the job is at round {int(self.store.get('round'))}"
                         if self._present("round") else
                         f"no round was formed: {count} process(es) asked to join, the first "
                         f"round needs {initial} (or {self.min_replicas} whole replica group(s) "
                         "after the last call)")
                raise DistError(f"replica {rec['id']} was not admitted within {join_timeout:g} "
                                f"s ({state}); the running replicas admit joiners at their next "
                                "step boundary (a replica group once all its processes asked): "
                                "are they running, and on the same store?")

    def _bootstrap(self, count: int) -> None:
        """Decide the first round with the whole replica groups among joiners 1..count."""
        members, records, handled, refused = self._joiners([], count, [], {})
        if len({records[m]["group"] for m in members}) < self.min_replicas:
            return
        self._publish(_finish(Decision(
            round=0, members=members, records=records, handled=handled,
            ready=self.pending(), step=-1, sources={}, recovering=[], refused=refused)))

    def _joiners(self, handled: list, count: int, members: list, sigs: dict) -> tuple:
        """Admit the whole replica groups among the unhandled joiners 1..count: ``(members,
        records of the admitted, handled, refused)``. ``sigs``: group rank -> the signature
        hash the job's members have (empty in the first round: the first joiner's)."""
        pending: dict = {}
        for k in range(1, count + 1):
            if k in handled:
                continue
            raw = self._get(f"joiner/{k}", 0.2)
            if raw is None:
                continue  # asked, record not written yet: a later round takes it
            rec = json.loads(raw)
            pending.setdefault(rec["group"], {})[rec["group_rank"]] = rec
        members, records, handled, refused = list(members), {}, list(handled), []
        for ranks in pending.values():
            size = next(iter(ranks.values()))["group_size"]
            if set(ranks) != set(range(size)):
                continue  # not whole yet
            bad = None
            for g, rec in sorted(ranks.items()):
                sigs.setdefault(g, rec["sig"])
                if rec["sig"] != sigs[g]:
                    bad = _foreign(rec, sigs[g])
            handled += [rec["k"] for rec in ranks.values()]
            if bad is not None:
                refused += [{"k": rec["k"], "id": rec["id"], "why": bad} for rec in ranks.values()]
                continue
            for g in range(size):
                members.append(ranks[g]["id"])
                records[ranks[g]["id"]] = ranks[g]
        return members, records, sorted(handled), refused

    # ***** rounds *****
    def decision(self, round_: int) -> Decision:
        """The decision of round ``round_`` (which exists).

        Args:
            round_: the round.
        """
        return Decision.from_json(self.store.get(f"q/{round_}/decision"))

    def enter(self, prev: Decision, rec: dict) -> Decision:
        """Enter round ``prev.round + 1`` as a member of ``prev`` and return its decision.

        Raises:
            Dropped: the round was decided without this process (or without a process of its
                replica group).
        """
        r = prev.round + 1
        s = self.store
        me = rec["id"]
        s.set(f"q/{r}/m/{me}", json.dumps(rec).encode())
        arrived = int(s.add(f"q/{r}/n", 1))
        expected = list(prev.members)
        deadline = time.monotonic() + self.timeout
        key = f"q/{r}/decision"
        last = arrived >= len(expected)
        while True:
            if not last:
                wait = _POLL_S if rec["suspects"] else min(0.5, deadline - time.monotonic())
                raw = self._get(key, wait)
                if raw is not None:
                    return self._mine(Decision.from_json(raw), me)
            present = {m: json.loads(s.get(f"q/{r}/m/{m}")) for m in expected
                       if self._present(f"q/{r}/m/{m}")}
            suspects = {x for p in present.values() for x in p["suspects"]}
            late = time.monotonic() >= deadline
            if set(present) >= set(expected) - suspects or late:
                d = self._decide(r, prev, present, suspects, late)
                if d is not None:
                    return self._mine(self._publish(d), me)
            last = False

    def _decide(self, r: int, prev: Decision, present: dict, suspects: set,
                late: bool) -> Decision | None:
        """A proposal for round ``r`` (None: wait on, the minimum may still be reached)."""
        gone = [m for m in prev.members if m not in present]
        broken = {prev.records[m]["group"] for m in gone}
        members = [m for m in prev.members if m in present and present[m]["group"] not in broken]
        dropped = [{"id": m, "why": ("it failed during the step (reported by its peers)"
                                     if m in suspects else
                                     f"it did not arrive within the quorum timeout of "
                                     f"{self.timeout:g} s") + _state(prev.records.get(m, {})),
                    "record": prev.records.get(m, {})} for m in gone]
        dropped += [{"id": m, "why": "its replica group lost a process",
                     "record": prev.records.get(m, {})}
                    for m in prev.members if m in present and present[m]["group"] in broken]
        records = {m: present[m] for m in members}
        sigs = {present[m]["group_rank"]: present[m]["sig"] for m in members}
        ready = self.pending()
        members, joined, handled, refused = self._joiners(
            prev.handled, int(self.store.add("joiners", 0)), members, sigs)
        records.update(joined)
        groups = {records[m]["group"] for m in members}
        if len(groups) < self.min_replicas:
            if not late:
                return None
            missing = ", ".join(_describe(d) for d in dropped) or "none dropped"
            return Decision(round=r, members=[], records=records, handled=prev.handled,
                            ready=prev.ready, step=-1, sources={}, recovering=[],
                            dropped=dropped,
                            error=f"the quorum of round {r} cannot reach min_replicas="
                                  f"{self.min_replicas}: {len(groups)} replica(s) left "
                                  f"({', '.join(members)}); missing: {missing}")
        return _finish(Decision(round=r, members=members, records=records, handled=handled,
                                ready=ready, step=-1, sources={}, recovering=[],
                                dropped=dropped, refused=refused))

    def _publish(self, d: Decision) -> Decision:
        """Write ``d`` unless another proposal won; answer joiners; return the winner."""
        raw = d.to_json()
        won = self.store.compare_set(f"q/{d.round}/decision", b"", raw)
        d = Decision.from_json(won)
        self.answer_joiners(d)
        return d

    def answer_joiners(self, d: Decision) -> None:
        """Write the verdicts of ``d``'s joiners and advance ``round`` (every member does it:
        the same values, so whoever dies after the decision cannot leave a joiner waiting).

        Args:
            d: the decision.
        """
        s = self.store
        for m in d.members:
            k = d.records.get(m, {}).get("k")  # only joiners' records carry their index
            if k is not None:
                s.set(f"joiner/{k}/verdict", json.dumps({"round": d.round}).encode())
        for ref in d.refused:
            s.set(f"joiner/{ref['k']}/verdict", json.dumps({"refused": ref["why"]}).encode())
        if d.error is None:
            s.set("round", str(d.round).encode())

    @staticmethod
    def _mine(d: Decision, me: str) -> Decision:
        if d.error is None and me not in d.members:
            raise Dropped(d)
        return d


def _finish(d: Decision) -> Decision:
    """Fill in the step, the sources (per group rank: the first member with the highest step)
    and the members that recover from them."""
    steps = {m: d.records[m]["step"] for m in d.members}
    d.step = max(steps.values())
    d.sources = {}
    for m in d.members:
        g = str(d.records[m]["group_rank"])
        if steps[m] == d.step and g not in d.sources:
            d.sources[g] = m
    d.recovering = [m for m in d.members if m not in d.sources.values()
                    and (steps[m] < d.step or steps[m] < 0)]
    return d


def _foreign(theirs: dict, ours: str) -> str:
    return (f"replica {theirs['id']} (process {theirs['pid']} on {theirs['host']}) has another "
            f"model, optimizer or config than the job (signature {theirs['sig'][:12]}, the "
            f"job's {ours[:12]})")


def _state(rec: dict) -> str:
    """'; it died (...)' or '; it is stopped (...)' for a same-host replica (/proc), else ''."""
    if rec.get("host") != socket.gethostname() or not rec.get("pid"):
        return ""
    state = _liveness.proc_state(int(rec["pid"]))
    return f"; it {state}" if state else ""


def _describe(d: dict) -> str:
    rec = d.get("record") or {}
    where = f" (process {rec['pid']} on {rec['host']})" if rec.get("pid") else ""
    return f"{d['id']}{where}: {d['why']}"
