"""tbrun's host lists (DeepSpeed's ``--hostfile``, horovodrun's ``-H``).

A list naming only this host runs here with one worker per slot. Starting agents on other
hosts over ssh is not supported yet: the error says to run the same tbrun command on each host.
"""
from __future__ import annotations

import re

__all__ = ["parse_hosts", "read_hostfile", "apply_hosts"]


class HostsError(ValueError):
    """A host list that cannot be read."""


def parse_hosts(text: str) -> list[tuple[str, int]]:
    """horovodrun's ``host1:2,host2:2`` (slots default 1) -> [(host, slots), ...]."""
    out = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        host, sep, slots = item.rpartition(":")
        if not sep:
            host, slots = item, "1"
        if not host or not slots.isdigit() or int(slots) < 1:
            raise HostsError(f"-H {text!r}: expected host:slots[,host:slots...], e.g. a:2,b:2")
        out.append((host, int(slots)))
    if not out:
        raise HostsError(f"-H {text!r}: no host given")
    return out


def read_hostfile(path: str) -> list[tuple[str, int]]:
    """DeepSpeed's hostfile: ``host slots=N`` per line, ``#`` comments, blank lines."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise HostsError(f"--hostfile {path}: {exc.strerror}") from None
    out = []
    for n, line in enumerate(lines, 1):
        line = line.split("#")[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"(\S+)(?:\s+slots\s*=\s*(\d+))?", line)
        if not m or (m.group(2) is not None and int(m.group(2)) < 1):
            raise HostsError(f"--hostfile {path} line {n}: expected 'HOST slots=N', got {line!r}")
        out.append((m.group(1), int(m.group(2) or 1)))
    if not out:
        raise HostsError(f"--hostfile {path}: no host in it")
    return out


def apply_hosts(ns, is_local) -> None:
    """Fold a one-host list into tbrun's options (per-node count from its slots)."""
    hosts = read_hostfile(ns.hostfile) if ns.hostfile else parse_hosts(ns.hosts)
    what = "--hostfile" if ns.hostfile else "-H"
    if len(hosts) > 1 or not is_local(hosts[0][0]):
        raise HostsError(
            f"{what}: starting agents on other hosts over ssh is not supported yet "
            f"({', '.join(h for h, _ in hosts)}); run the same tbrun command on every host, "
            "without --node_rank: node ranks are given by arrival at --rdzv_endpoint HOST:PORT")
    slots = hosts[0][1]
    if ns.np is not None and ns.np != slots:
        raise HostsError(f"-np {ns.np} does not match the {slots} slot(s) of {what}")
    ns.np = None
    ns.nproc_per_node = str(slots)
