"""The quorum: which replicas form the group, decided through the store (no leader process).

Keys (under the Manager's prefix of the store)::

    signature              the group's model/config signature (JSON), set by the first replica
    joiners                counter: replicas that asked to join (new ones, replacements)
    joiner/<k>             the k-th joiner's record; joiner/<k>/verdict: admitted or refused
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

Records are JSON: ``{"id", "step", "suspects", "sig", "pid", "host"}``. ``step`` is -1 for a
replica without state (a new process); in a round where every member is new (the first),
member 0 is the source and the others take its state, as DDP broadcasts rank 0's parameters.
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
    joined: int            # joiners up to this index were handled (admitted or refused)
    step: int              # the highest step among the members
    source: str            # the member whose state the recovering ones receive
    recovering: list       # ids that receive the source's state
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


def record(replica_id: str, step: int, sig: str, suspects=()) -> dict:
    """This replica's record for a round or a join request.

    Args:
        replica_id: the replica's id.
        step: its committed step (-1: no state yet).
        sig: the hash of its signature.
        suspects: ids it saw fail.

    Returns:
        The record.
    """
    return {"id": replica_id, "step": int(step), "suspects": sorted(suspects), "sig": sig,
            "pid": os.getpid(), "host": socket.gethostname()}


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
    def claim_signature(self, signature: dict) -> dict:
        """Set the group's signature if none is set; return the group's (maybe another one).

        Args:
            signature: this replica's signature.

        Returns:
            The group's signature.
        """
        mine = json.dumps(signature, sort_keys=True).encode()
        return json.loads(self.store.compare_set("signature", b"", mine))

    # ***** joining *****
    def register(self, rec: dict) -> int:
        """Ask to join: returns this joiner's index (1, 2, ...).

        Args:
            rec: the joiner's record.
        """
        k = int(self.store.add("joiners", 1))
        self.store.set(f"joiner/{k}", json.dumps({**rec, "k": k}).encode())
        return k

    def pending(self) -> int:
        """How many replicas have asked to join so far (the doorbell: one store read)."""
        return int(self.store.add("joiners", 0))

    def wait_admitted(self, k: int, rec: dict, initial: int, join_timeout: float,
                      last_call: float) -> Decision:
        """Wait until joiner ``k`` is admitted (the decision of its round) or refused.

        Before any group exists, the ``initial``-th joiner decides the first round at once;
        after ``last_call`` seconds without one, any joiner may decide it with the joiners
        there are, if they reach ``min_replicas``.

        Raises:
            Refused: the group refused this replica (the reason is the message).
            DistError: no group admitted it within ``join_timeout`` seconds.
        """
        start = time.monotonic()
        deadline = start + join_timeout
        while True:
            if not self._present("round"):
                count = self.pending()
                if count >= initial or (time.monotonic() - start >= last_call
                                        and count >= self.min_replicas):
                    self._bootstrap(min(count, max(initial, self.min_replicas)))
            left = deadline - time.monotonic()
            raw = self._get(f"joiner/{k}/verdict", min(0.5, max(left, 0.001)))
            if raw is not None:
                verdict = json.loads(raw)
                if "refused" in verdict:
                    raise Refused(verdict["refused"])
                return self.decision(verdict["round"])
            if time.monotonic() >= deadline:
                count = self.pending()
                state = (f"the group is at round {int(self.store.get('round'))}"
                         if self._present("round") else
                         f"no group was formed: {count} replica(s) asked to join, the first "
                         f"round needs {initial} (or {self.min_replicas} after the last call)")
                raise DistError(f"replica {rec['id']} was not admitted within {join_timeout:g} "
                                f"s ({state}); the running replicas admit joiners at their next "
                                "step boundary: are they running, and on the same store?")

    def _bootstrap(self, n: int) -> None:
        """Decide the first round with joiners 1..n (if nobody has)."""
        recs = [json.loads(self.store.get(f"joiner/{k}")) for k in range(1, n + 1)]
        sig = recs[0]["sig"]
        members = [r for r in recs if r["sig"] == sig]
        refused = [{"k": k, "id": r["id"], "why": _foreign(r, recs[0])}
                   for k, r in enumerate(recs, 1) if r["sig"] != sig]
        d = Decision(round=0, members=[r["id"] for r in members],
                     records={r["id"]: r for r in members}, joined=n, step=-1,
                     source=members[0]["id"], recovering=[r["id"] for r in members[1:]],
                     refused=refused)
        self._publish(d)

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
            Dropped: the round was decided without this replica.
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
        members = [m for m in prev.members if m in present]
        records = dict(present)
        dropped = [{"id": m, "why": ("it failed during the step (reported by its peers)"
                                     if m in suspects else
                                     f"it did not arrive within the quorum timeout of "
                                     f"{self.timeout:g} s") + _state(prev.records.get(m, {})),
                    "record": prev.records.get(m, {})}
                   for m in prev.members if m not in present]
        sig = next(iter(present.values()))["sig"] if present else ""
        joined, refused = prev.joined, []
        count = self.pending()
        while joined < count:
            raw = self._get(f"joiner/{joined + 1}", 1.0)
            if raw is None:
                break  # registered, record not written yet: the next round takes it
            joined += 1
            j = json.loads(raw)
            if j["sig"] != sig:
                refused.append({"k": joined, "id": j["id"],
                                "why": _foreign(j, next(iter(present.values())))})
            elif j["id"] not in members:
                members.append(j["id"])
                records[j["id"]] = j
        if len(members) < self.min_replicas:
            if not late:
                return None
            missing = ", ".join(_describe(d) for d in dropped) or "none dropped"
            return Decision(round=r, members=[], records=records, joined=prev.joined, step=-1,
                            source="", recovering=[], dropped=dropped,
                            error=f"the quorum of round {r} cannot reach min_replicas="
                                  f"{self.min_replicas}: {len(members)} replica(s) left "
                                  f"({', '.join(members)}); missing: {missing}")
        steps = {m: records[m]["step"] for m in members}
        top = max(steps.values())
        source = next(m for m in members if steps[m] == top)
        recovering = [m for m in members if m != source and (steps[m] < top or steps[m] < 0)]
        return Decision(round=r, members=members, records=records, joined=joined, step=top,
                        source=source, recovering=recovering, dropped=dropped, refused=refused)

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


def _foreign(theirs: dict, ours: dict) -> str:
    return (f"replica {theirs['id']} (process {theirs['pid']} on {theirs['host']}) has another "
            f"model, optimizer or config than the group (signature {theirs['sig'][:12]}, the "
            f"group's {ours['sig'][:12]})")


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
