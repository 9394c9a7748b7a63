"""Where this process sits in the job: rank, world size, local rank, node, master address.

:func:`resolve` is a pure function of an environment mapping, so every launcher's variables can
be tested as a table. Precedence (explicit arguments to ``init_process_group`` win over all):

1. torchrun-style, set by ``tbrun``/``torchrun``/users: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
   ``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` (or ``NODE_RANK``)
2. Open MPI: ``OMPI_COMM_WORLD_RANK``/``_SIZE``/``_LOCAL_RANK``/``_LOCAL_SIZE``
3. MPICH/Hydra (and Intel MPI): ``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID``,
   ``MPI_LOCALNRANKS``; PMIx launchers: ``PMIX_RANK``; MVAPICH2: ``MV2_COMM_WORLD_*``
4. Slurm (``srun``): ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``, ``SLURM_NODEID``,
   ``SLURM_STEP_TASKS_PER_NODE``/``SLURM_TASKS_PER_NODE``; master = first host of
   ``SLURM_STEP_NODELIST``/``SLURM_JOB_NODELIST``/``SLURM_NODELIST`` (compressed, e.g.
   ``node[10,20-25]``)
5. a single process: rank 0 of 1.

``MASTER_ADDR``/``MASTER_PORT`` win whenever set. Otherwise the port is 29500, or under Slurm
15000 + the last four digits of ``SLURM_JOB_ID`` (as PyTorch Lightning does, so two jobs sharing
a node do not collide). Under MPI without ``MASTER_ADDR`` the master is 127.0.0.1 when all ranks
are on one node and unknown (``None``) otherwise.

>>> p = resolve({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
...              "SLURM_NODEID": "2", "SLURM_JOB_NODELIST": "gpu[007-010]", "SLURM_JOB_ID": "123456"})
>>> (p.rank, p.world_size, p.local_rank, p.node_rank, p.master_addr, p.master_port, p.source)
(5, 8, 1, 2, 'gpu007', 18456, 'slurm')
>>> resolve({}).world_size
1
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from collections.abc import Mapping
from typing import overload

DEFAULT_PORT = 29500


@dataclass(frozen=True)
class Placement:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    master_addr: str | None
    master_port: int
    source: str  # which launcher's variables were used: torchrun, openmpi, mpich, ... single


_REQUIRED = object()  # _int's default: the variable must hold an integer


@overload
def _int(env: Mapping[str, str], name: str, default: None, minimum: int = 0) -> int | None: ...
@overload
def _int(env: Mapping[str, str], name: str, default: int = ..., minimum: int = 0) -> int: ...
def _int(env: Mapping[str, str], name: str, default: object = _REQUIRED,
         minimum: int = 0) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        if default is _REQUIRED:
            raise ValueError(f"environment variable {name} is empty; set it to an integer")
        assert default is None or isinstance(default, int)
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"environment variable {name}={value} must be >= {minimum}")
    return value


def _first(env, *names):
    for n in names:
        if env.get(n, "").strip() != "":
            return n
    return None


# (source, rank var, size var, local rank vars, local size vars)
_MPI_FLAVOURS = [
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", ("OMPI_COMM_WORLD_LOCAL_RANK",),
     ("OMPI_COMM_WORLD_LOCAL_SIZE",)),
    ("mpich", "PMI_RANK", "PMI_SIZE", ("MPI_LOCALRANKID",), ("MPI_LOCALNRANKS",)),
    ("mvapich", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", ("MV2_COMM_WORLD_LOCAL_RANK",),
     ("MV2_COMM_WORLD_LOCAL_SIZE",)),
]


def resolve(env: Mapping[str, str]) -> Placement:
    """The placement the environment describes (see the module docstring for the precedence)."""
    found = _torchrun(env) or _mpi(env) or _slurm(env)
    if found is None:
        found = dict(source="single", rank=0, world_size=1, local_rank=0, local_world_size=1,
                     node_rank=0, default_addr="127.0.0.1", default_port=DEFAULT_PORT)
    rank, world = found["rank"], found["world_size"]
    where = f"(from {found['source']} variables)"
    if world < 1:
        raise ValueError(f"world size {world} {where} must be >= 1")
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is out of range for world size {world} {where}; ranks are "
                         f"0..{world - 1}")
    lws, lr = found["local_world_size"], found["local_rank"]
    if not 0 <= lr < max(lws, 1):
        raise ValueError(f"local rank {lr} is out of range for local world size {lws} {where}")
    addr = env.get("MASTER_ADDR", "").strip() or found["default_addr"]
    port = _int(env, "MASTER_PORT", None, minimum=0)
    if port is None:
        port = found["default_port"]
    if not 0 <= port <= 65535:
        raise ValueError(f"MASTER_PORT={port} is not a TCP port (0..65535)")
    return Placement(rank=rank, world_size=world, local_rank=lr, local_world_size=lws,
                     node_rank=found["node_rank"], master_addr=addr, master_port=port,
                     source=found["source"])


def _torchrun(env):
    has_rank, has_size = "RANK" in env, "WORLD_SIZE" in env
    if not (has_rank or has_size):
        return None
    if has_rank != has_size:
        missing = "WORLD_SIZE" if has_rank else "RANK"
        raise ValueError(f"{'RANK' if has_rank else 'WORLD_SIZE'} is set but {missing} is not; "
                         "set both (tbrun/torchrun do) or neither")
    rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE", minimum=1)
    lws = _int(env, "LOCAL_WORLD_SIZE", None, minimum=1)
    lr = _int(env, "LOCAL_RANK", None)
    if lws is None:  # also LOCAL_RANK alone: the node size is unknown, assume one node
        lws = world
    if lr is None:
        lr = rank % lws
    node = _int(env, _first(env, "GROUP_RANK", "NODE_RANK") or "GROUP_RANK", None)
    if node is None:
        node = rank // lws
    return dict(source="torchrun", rank=rank, world_size=world, local_rank=lr,
                local_world_size=lws, node_rank=node, default_addr="127.0.0.1",
                default_port=DEFAULT_PORT)


def _mpi(env):
    for source, rank_var, size_var, lr_vars, lws_vars in _MPI_FLAVOURS:
        if rank_var in env and size_var in env:
            return _mpi_found(env, source, _int(env, rank_var), _int(env, size_var, minimum=1),
                              lr_vars, lws_vars)
    if "PMIX_RANK" in env:  # PMIx launchers (prterun, srun --mpi=pmix) export the rank only
        size_var = _first(env, "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
        if size_var is None:
            raise ValueError("PMIX_RANK is set but no world size variable is (OMPI_COMM_WORLD_SIZE, "
                             "PMI_SIZE or SLURM_NTASKS); set WORLD_SIZE and RANK explicitly")
        return _mpi_found(env, "pmix", _int(env, "PMIX_RANK"), _int(env, size_var, minimum=1),
                          ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"),
                          ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"))
    return None


def _mpi_found(env, source, rank, world, lr_vars, lws_vars):
    lr_var, lws_var = _first(env, *lr_vars), _first(env, *lws_vars)
    lws = _int(env, lws_var, minimum=1) if lws_var else world
    lr = _int(env, lr_var) if lr_var else rank % lws
    # MPI does not export a node index; with the default by-slot mapping node = rank // per-node
    node = rank // lws
    return dict(source=source, rank=rank, world_size=world, local_rank=lr, local_world_size=lws,
                node_rank=node, default_addr="127.0.0.1" if lws == world else None,
                default_port=DEFAULT_PORT)


def _slurm(env):
    if "SLURM_PROCID" not in env or "SLURM_NTASKS" not in env:
        return None
    rank, world = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS", minimum=1)
    node = _int(env, "SLURM_NODEID", 0)
    lr = _int(env, "SLURM_LOCALID", 0)
    per_node = _tasks_on_node(env.get("SLURM_STEP_TASKS_PER_NODE")
                              or env.get("SLURM_TASKS_PER_NODE") or "", node)
    lws = per_node if per_node else world
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") \
        or env.get("SLURM_NODELIST") or ""
    hosts = expand_nodelist(nodelist) if nodelist else []
    job = env.get("SLURM_JOB_ID", "").strip()
    port = 15000 + int(job[-4:]) if job.isdigit() else DEFAULT_PORT
    return dict(source="slurm", rank=rank, world_size=world, local_rank=lr, local_world_size=lws,
                node_rank=node, default_addr=hosts[0] if hosts else "127.0.0.1",
                default_port=port)


def _tasks_on_node(spec: str, node: int) -> int | None:
    """SLURM_TASKS_PER_NODE like ``2(x3),1``: the count for node index ``node``."""
    counts = []
    for part in filter(None, spec.split(",")):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            return None
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts[node] if 0 <= node < len(counts) else None


def expand_nodelist(nodelist: str) -> list[str]:
    """Expand Slurm's compressed host list: ``a[1-3,7],b05`` -> ``[a1, a2, a3, a7, b05]``.

    Zero padding is kept (``n[08-10]`` -> n08 n09 n10); several bracket groups in one name
    (``r[1-2]n[1-2]``) expand as a product, as ``scontrol show hostnames`` does.

    >>> expand_nodelist("node[10,20-22],login")
    ['node10', 'node20', 'node21', 'node22', 'login']
    """
    hosts: list[str] = []
    for item in _split_top(nodelist):
        parts = [""]
        for text, bracket in re.findall(r"([^\[\]]*)(?:\[([^\]]*)\])?", item):
            if not text and not bracket:
                continue
            choices = [text]
            if bracket:
                choices = [text + v for v in _expand_range(bracket, nodelist)]
            parts = [p + c for p in parts for c in choices]
        hosts += [p for p in parts if p]
    return hosts


def _split_top(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s.strip():
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if depth != 0:
        raise ValueError(f"unbalanced brackets in Slurm node list {s!r}")
    return [x for x in out + [cur] if x]


def _expand_range(spec: str, whole: str) -> list[str]:
    values = []
    for piece in spec.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", piece.strip())
        if not m:
            raise ValueError(f"cannot parse {piece!r} in Slurm node list {whole!r}")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        width = len(lo)
        values += [str(v).zfill(width) for v in range(int(lo), int(hi) + 1)]
    return values


# ***** helpers reading this process's environment *****
# These are launcher-set variables (documented in docs/launcher.md), not TensorBrain knobs, so they
# are read here through the one pure resolver rather than declared in _config.

def current() -> Placement:
    """The placement of this process, from ``os.environ``."""
    return resolve(os.environ)


def get_local_rank() -> int:
    """This process's rank on its node (0 when not launched by any launcher)."""
    return current().local_rank


def get_local_world_size() -> int:
    """How many processes of the job run on this node."""
    return current().local_world_size


def get_node_rank() -> int:
    """Index of this node in the job (0 when single-node)."""
    return current().node_rank
