"""The launcher's agent, one per node: rendezvous with the other nodes, run this node's workers,
watch them, and restart or stop the whole group together (torch's elastic agent).

The nodes meet through a TCPStore served by node 0's agent. Keys live under
``tbrun/<run_id>/``: ``rdzv/<round>/`` for a round's membership and ``attempt/<round>/`` for how
that attempt ends (``failed`` with the first failure, ``done/<node>`` per node). A new round
(restart or membership change) uses new keys, so it never sees the previous one's.
"""
from __future__ import annotations

import json
import signal
import socket
import time
import uuid
from datetime import timedelta

from .. import _launch_compat as _compat
from ..errors import DistError, DistNetworkError, DistStoreError
from ..store import PrefixStore, TCPStore
from .config import Config
from .notice import notice
from .workers import WorkerGroup, exit_text, stop_workers


def is_local(host: str) -> bool:
    """Whether ``host`` names an address of this machine (one we can bind to)."""
    try:
        addrs = {str(i[4][0]) for i in socket.getaddrinfo(host, None)}
    except socket.gaierror:
        return False
    for a in addrs:
        try:
            with socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET) as s:
                s.bind((a, 0))
            return True
        except OSError:
            continue
    return False


class Agent:
    """One per node: rendezvous with the other nodes, run the workers, restart or stop them.

    Args:
        cfg: the node's settings (see :func:`tensorbrain.distributed.run.parse_args`).
    """

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.store_server: TCPStore | None = None
        self.store: PrefixStore | None = None
        self.raw_store: TCPStore | None = None
        self.restarts = 0  # failures restarted so far (TORCHELASTIC_RESTART_COUNT)
        # rendezvous round: + 1 on every restart and every membership change; elastic nodes
        # other than the store's learn the current one from the store
        self.round = None if cfg.elastic else 0
        self.started = False
        self.multi = cfg.max_nodes > 1
        self.group = WorkerGroup(cfg)

    @property
    def workers(self):
        """This node's workers of the current attempt."""
        return self.group.workers

    def error_root(self) -> str:
        """Folder for the workers' TORCHELASTIC_ERROR_FILEs (see :meth:`WorkerGroup.error_root`)."""
        return self.group.error_root()

    # ***** store and rendezvous *****
    @property
    def _kv(self) -> PrefixStore:
        """The run's store (``_open_store`` opens it before any rendezvous)."""
        if self.store is None:
            raise RuntimeError("tbrun agent: the run's store is used before it was opened")
        return self.store

    @property
    def _round(self) -> int:
        """The current rendezvous round (an elastic node learns it when it first joins)."""
        if self.round is None:
            raise RuntimeError("tbrun agent: no rendezvous round was joined yet")
        return self.round

    def _open_store(self):
        cfg = self.cfg
        timeout = timedelta(seconds=cfg.join_timeout)
        # static: node 0 serves the store; elastic: whichever local agent binds the port first
        if (not cfg.elastic and cfg.node_rank == 0) or (cfg.elastic and is_local(cfg.master_addr)):
            try:
                self.store_server = TCPStore(cfg.master_addr, cfg.master_port, None, True, timeout)
            except DistNetworkError:
                if not cfg.elastic:
                    raise
        if self.store_server is not None:
            cfg.master_port = self.store_server.port
            raw = self.store_server
            self.node_rank = 0 if cfg.elastic else cfg.node_rank
            if self.round is None:
                self.round = 0
            if not cfg.run_id:
                cfg.run_id = uuid.uuid4().hex[:12]
            raw.set("tbrun/run_id", cfg.run_id)
        else:
            raw = TCPStore(cfg.master_addr, cfg.master_port, None, False, timeout)
            if not cfg.run_id:
                cfg.run_id = raw.get("tbrun/run_id").decode()
        self.raw_store = raw
        self.store = PrefixStore(f"tbrun/{cfg.run_id}", raw)

    def _rendezvous(self) -> tuple[int, int, int]:
        """Meet the other nodes for this round: (node_rank, rank offset, world size)."""
        cfg = self.cfg
        if not self.multi:
            return 0, 0, cfg.nproc
        me = json.dumps({"host": cfg.local_addr or socket.gethostname(),
                         "nproc": cfg.nproc}).encode()
        if cfg.elastic:
            node_rank, nnodes = self._join_round(me)
            s = PrefixStore(f"rdzv/{self.round}", self._kv)
        else:
            s = PrefixStore(f"rdzv/{self.round}", self._kv)
            node_rank, nnodes = cfg.node_rank, cfg.max_nodes
            claimed = s.compare_set(f"node/{node_rank}", "", me)
            if claimed != me:
                other = json.loads(claimed)["host"]
                raise DistError(f"node rank {node_rank} is already taken by host {other}; give "
                                f"every node its own --node_rank in 0..{nnodes - 1}")
        keys = [f"node/{r}" for r in range(nnodes)]
        try:
            s.wait(keys, timedelta(seconds=cfg.join_timeout))
        except DistStoreError:
            missing = [r for r in range(nnodes) if not s.check([f"node/{r}"])]
            raise DistStoreError(
                f"node(s) {missing} of {nnodes} did not join within {cfg.join_timeout:g} s "
                f"(rendezvous at {cfg.master_addr}:{cfg.master_port}, round {self.round}); "
                "start tbrun on every node with the same --nnodes/--master_addr/--master_port "
                "and its own --node_rank") from None
        infos = [json.loads(v) for v in s.multi_get(keys)]
        offset = sum(i["nproc"] for i in infos[:node_rank])
        world = sum(i["nproc"] for i in infos)
        if node_rank >= nnodes:  # a late node (--fault_tolerant): ranks after the round's
            offset = world + (node_rank - nnodes) * cfg.nproc
        self.nnodes = nnodes
        return node_rank, offset, world

    def _join_round(self, me) -> tuple[int, int]:
        """c10d-style: node ranks by arrival through the store, one round at a time.

        The agent serving the store is node 0 and publishes the current round number. A node
        that finds the round closed (or arrives as it closes) asks the running nodes for a new
        round (key ``late``) and joins round + 1; they stop their workers and join it too."""
        cfg = self.cfg
        if self.store_server is not None:
            self._kv.set("round", str(self.round))
        elif self.round is None:
            self.round = int(self._kv.get("round"))
        while True:
            s = PrefixStore(f"rdzv/{self.round}", self._kv)
            if self.store_server is not None:
                node_rank = 0
            elif s.check(["closed"]) and not cfg.fault_tolerant:
                node_rank = None
            else:
                node_rank = int(s.add("next", 1))
                if node_rank >= cfg.max_nodes:
                    node_rank = None
            if node_rank is not None:
                s.set(f"node/{node_rank}", me)
            n, restarts = self._close_round(s, node_rank)
            if node_rank is not None and node_rank < n:
                self.restarts = restarts
                return node_rank, n
            if node_rank is not None and cfg.fault_tolerant:
                notice(f"round {self.round} closed with {n} node(s) before this node joined; "
                       "its workers join the running ones (--fault_tolerant: nobody restarts)")
                return node_rank, n
            if n >= cfg.max_nodes:
                raise DistError(f"round {self.round} of run {cfg.run_id} already has the maximum "
                                f"of {cfg.max_nodes} node(s) (--nnodes {cfg.min_nodes}:"
                                f"{cfg.max_nodes}); this node is not needed")
            notice(f"round {self.round} closed with {n} node(s) before this node joined; asking "
                   f"the running nodes to start round {self._round + 1} with it")
            s.add("late", 1)
            self.round = self._round + 1

    def _close_round(self, s, node_rank) -> tuple[int, int]:
        """Node 0 decides how many nodes this round has: (nodes, restart count)."""
        cfg = self.cfg
        if node_rank != 0:
            n, restarts = s.get("closed").decode().split()
            return int(n), int(restarts)
        deadline = time.monotonic() + cfg.join_timeout
        last, last_change = 1, time.monotonic()
        while True:
            n = 1 + int(s.add("next", 0))
            if n != last:
                last, last_change = n, time.monotonic()
            now = time.monotonic()
            if n >= cfg.max_nodes or (n >= cfg.min_nodes and now - last_change >= cfg.last_call):
                n = min(n, cfg.max_nodes)
                s.set("closed", f"{n} {self.restarts}")
                return n, self.restarts
            if now > deadline:
                raise DistStoreError(
                    f"node(s) {list(range(n, cfg.min_nodes))} of {cfg.min_nodes} did not join "
                    f"within {cfg.join_timeout:g} s (rendezvous at {cfg.master_addr}:"
                    f"{cfg.master_port}, round {self.round}); start the same tbrun command on "
                    "every node")
            time.sleep(0.05)

    # ***** one attempt *****

    def _worker_envs(self, node_rank, offset, world) -> list[dict]:
        """Each local worker's environment: its ranks, the store, the attempt (see run.py's
        "What each worker sees")."""
        cfg = self.cfg
        base = self.group.base_env()
        envs = []
        for lr in range(cfg.nproc):
            rank = offset + lr
            env = dict(base, RANK=str(rank), LOCAL_RANK=str(lr), WORLD_SIZE=str(world),
                       LOCAL_WORLD_SIZE=str(cfg.nproc), GROUP_RANK=str(node_rank),
                       NODE_RANK=str(node_rank), ROLE_RANK=str(rank),
                       ROLE_WORLD_SIZE=str(world), MASTER_ADDR=cfg.master_addr,
                       MASTER_PORT=str(cfg.master_port), TB_USE_AGENT_STORE="1",
                       TB_RESTART_COUNT=str(self.restarts), TB_ROUND=str(self.round),
                       TB_MAX_RESTARTS=str(cfg.max_restarts), TB_RUN_ID=cfg.run_id,
                       TB_RAW_ESCAPE="1")
            if cfg.fault_tolerant:
                env["TB_FAULT_TOLERANT"] = "1"
            env.update(_compat.worker_env(cfg, self, lr, node_rank))
            envs.append(env)
        return envs

    def _monitor(self, node_rank) -> tuple[str, dict | None]:
        """Watch this attempt until it ends: ("done", None), ("rejoin", None) (a late node
        asked for a new round) or ("failed", description of the first failure)."""
        cfg = self.cfg
        s = PrefixStore(f"attempt/{self.round}", self._kv) if self.multi else None
        rs = PrefixStore(f"rdzv/{self.round}", self._kv) if cfg.elastic else None
        local_done = False
        while True:
            time.sleep(cfg.monitor_interval)
            self.group.poll(time.time())
            failed = [w for w in self.workers if w.returncode not in (None, 0)]
            if failed:
                first = min(failed, key=lambda w: (w.ended_at, w.rank))
                info = self._failure_info(first, node_rank)
                if s is not None:
                    s.compare_set("failed", "", json.dumps(info))
                self.group.stop(signal.SIGTERM)
                info["tail"] = list(first.tail)[-10:]
                info["others"] = [(w.rank, w.returncode, _exception_line(w)) for w in failed
                                  if w is not first]
                return "failed", info
            if not local_done and all(w.returncode == 0 for w in self.workers):
                local_done = True
                if s is None:
                    return "done", None
                s.set(f"done/{node_rank}", "1")
            if s is not None:
                if s.check(["failed"]):
                    info = json.loads(s.get("failed"))
                    self.group.stop(signal.SIGTERM)
                    return "failed", info
                if local_done and s.check([f"done/{r}" for r in range(self.nnodes)]):
                    return "done", None
            if rs is not None and not local_done and self.nnodes < cfg.max_nodes \
                    and rs.check(["late"]):
                notice(f"a node is waiting to join; stopping the workers to start round "
                       f"{self._round + 1} with it")
                self.group.stop(signal.SIGTERM)
                return "rejoin", None

    def _failure_info(self, w, node_rank) -> dict:
        for t in w.readers:  # its pipes are at EOF unless a child still holds them
            t.join(1.0)
        return dict(node=node_rank, host=socket.gethostname(), rank=w.rank,
                    local_rank=w.local_rank, pid=w.proc.pid, code=w.returncode,
                    tail=list(w.tail)[-10:], error=_compat.read_error_file(w.error_file))

    def _monitor_ft(self, node_rank, envs) -> tuple[str, dict | None]:
        """--fault_tolerant: replace each failed worker alone (the others go on and admit the
        replacement live); ("done", None) once every worker ended, or ("failed", the first
        failure that had no replacement left)."""
        cfg = self.cfg
        s = PrefixStore(f"attempt/{self.round}", self._kv) if self.multi else None
        lost: list = []
        beat = 0.0
        while True:
            time.sleep(cfg.monitor_interval)
            self.group.poll(time.time())
            for lr, w in enumerate(self.workers):
                if w.returncode in (None, 0) or w.stopped:
                    continue
                info = self._failure_info(w, node_rank)
                if self.restarts < cfg.max_restarts:
                    self.restarts += 1
                    notice(f"{_failure_line(info)}; starting a replacement, which joins the "
                           f"running workers (replacement {self.restarts} of "
                           f"{cfg.max_restarts})")
                    env = dict(envs[lr], TB_RESTART_COUNT=str(self.restarts),
                               TORCHELASTIC_RESTART_COUNT=str(self.restarts))
                    self.group.replace(lr, env, f"{self.round}_replacement{self.restarts}")
                else:
                    notice(f"{_failure_line(info)}; no replacement left (--max_restarts "
                           f"{cfg.max_restarts}): the other workers go on without it")
                    stop_workers([w], signal.SIGKILL, 0)
                    lost.append(info)
            if s is not None and time.monotonic() - beat > 1.0:
                beat = time.monotonic()
                s.set(f"beat/{node_rank}", str(beat))
            if all(w.returncode is not None for w in self.workers):
                if s is not None:
                    s.set(f"done/{node_rank}", "1")
                if lost:
                    lost[0]["others"] = [(i["rank"], i["code"]) for i in lost[1:]]
                    return "failed", lost[0]
                return "done", None

    def _wait_nodes_ft(self) -> None:
        """--fault_tolerant, node 0: keep the store up until every node that joined (late ones
        too) is done, or has not beaten for 30 s (its agent died)."""
        if not self.multi or self.store_server is None:
            return
        s = PrefixStore(f"attempt/{self.round}", self._kv)
        rs = PrefixStore(f"rdzv/{self.round}", self._kv)
        seen: dict = {}
        while True:
            joined = 1 + int(rs.add("next", 0)) if self.cfg.elastic else self.nnodes
            pending = [r for r in range(joined) if not s.check([f"done/{r}"])]
            now = time.monotonic()
            for r in pending:
                b = s.get(f"beat/{r}") if s.check([f"beat/{r}"]) else None
                if r not in seen or seen[r][0] != b:
                    seen[r] = (b, now)
            if not pending or all(now - seen[r][1] > 30.0 for r in pending):
                return
            time.sleep(0.5)

    def run(self) -> int:
        """Rendezvous, start the workers and watch them until the job ends, restarting the group
        on failures up to ``max_restarts`` times (and on membership changes when elastic).

        Returns:
            int: the exit status: 0 when every worker exited 0, else 1 (a summary names the failed
            rank, its host and exit code).
        """
        cfg = self.cfg
        self._open_store()
        while True:
            node_rank, offset, world = self._rendezvous()
            if not self.started or cfg.elastic:
                self.started = True
                notice(f"run {cfg.run_id}: node {node_rank}, {cfg.nproc} worker(s) (ranks "
                       f"{offset}..{offset + cfg.nproc - 1} of {world}), store at "
                       f"{cfg.master_addr}:{cfg.master_port}")
            envs = self._worker_envs(node_rank, offset, world)
            self.group.start(envs, self._round)
            if cfg.fault_tolerant:
                outcome, info = self._monitor_ft(node_rank, envs)
                self._wait_nodes_ft()
                if outcome == "done":
                    self.group.finish()
                    self._goodbye()
                    return 0
                notice(_summary(info, self.restarts, cfg))
                self._goodbye()
                return 1
            outcome, info = self._monitor(node_rank)
            if outcome == "rejoin":
                self.round = self._round + 1
                continue
            if outcome == "done":
                self.group.finish()
                self._goodbye()
                return 0
            if self.restarts < cfg.max_restarts:
                notice(f"{_failure_line(info)}; restarting all workers (restart "
                       f"{self.restarts + 1} of {cfg.max_restarts})")
                self.restarts += 1
                self.round = self._round + 1
                continue
            notice(_summary(info, self.restarts, cfg))
            self._goodbye()
            return 1

    def _goodbye(self):
        """Node 0 keeps the store up until every node has read the outcome."""
        if not self.multi:
            return
        try:
            n = self._kv.add("bye", 1)
            if self.store_server is not None:
                deadline = time.monotonic() + 10
                while n < self.nnodes and time.monotonic() < deadline:
                    time.sleep(0.05)
                    n = self._kv.add("bye", 0)
        except DistError:
            pass

    def close(self, sig=signal.SIGTERM):
        """Stop the workers still running and release the store, log files and temporary folders.

        Args:
            sig: the signal sent to the workers first (SIGKILL follows after the stop timeout).
        """
        self.group.close(sig)
        for s in (self.raw_store, self.store_server):
            if s is not None:
                s.close()


def _failure_line(info) -> str:
    return (f"rank {info['rank']} (local rank {info['local_rank']} on node {info['node']}, "
            f"{info['host']}, pid {info['pid']}) {exit_text(info['code'])}")


def _exception_line(w) -> str:
    """The last line of a failed worker's uncaught exception (its error file), or ''."""
    err = _compat.read_error_file(w.error_file)
    return err["message"] if err else ""


def _summary(info, attempt, cfg) -> str:
    lines = [f"worker failure after {attempt + 1} attempt(s) (max_restarts={cfg.max_restarts}):",
             f"  first failure: {_failure_line(info)}"]
    err = info.get("error")
    tail = info.get("tail") or []
    shown: set[str] = set()
    if err:
        lines.append(f"  its uncaught exception (TORCHELASTIC_ERROR_FILE): {err['message']}")
        tb_lines = err["traceback"].rstrip("\n").splitlines()[-8:]
        lines += [f"    {t}" for t in tb_lines]
        shown = {t.strip() for t in err["traceback"].splitlines()}
    # the traceback is shown once: its stderr lines that are not part of it (what it printed
    # before dying, a C++ abort, a message from a child) follow, if there are any
    rest = [t for t in tail if t.strip() and t.strip() not in shown]
    if rest:
        lines.append("  last lines of its stderr:" if not err else
                     "  its other last lines on stderr:")
        lines += [f"    {t}" for t in rest]
    elif not tail:
        lines.append("  (it wrote nothing to stderr)")
    if any("EADDRINUSE" in t or "address already in use" in t for t in tail) and \
            any("torch" in t for t in tail):
        # a real PyTorch script: its rank 0 listens on MASTER_PORT, where tbrun's store (our
        # protocol, not torch's) already is; torchrun's agent store would have taken it instead
        lines.append("  hint: this looks like a PyTorch script whose rank 0 tried to serve a "
                     "store on MASTER_PORT, which tbrun's own store holds; run it with tbrun "
                     "--as-torch (TensorBrain in place of torch) or with the real torchrun")
    for rank, code, *message in info.get("others", []):
        said = f": {message[0]}" if message and message[0] else ""
        lines.append(f"  also: rank {rank} {exit_text(code)}{said}")
    lines.append("  the other workers went on without it" if cfg.fault_tolerant else
                 "  the other workers were stopped by tbrun")
    return "\n".join(lines)
