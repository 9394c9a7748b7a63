"""tbrun's host lists (DeepSpeed's ``--hostfile``, horovodrun's ``-H``): one agent per host.

A list naming only this host runs here with one worker per slot. A list with other hosts makes
this tbrun a driver: it starts ``tbrun --nnodes N --node_rank i --master_addr HOST0 ...`` on
every host over plain ``ssh`` (``--ssh_port``, ``--ssh_opts``, and the user's ssh config apply),
in the same working directory and Python, with ``PYTHONPATH`` and ``TB_*`` variables passed
on; the rendezvous is on the first host. Each remote tbrun watches its stdin (the ssh channel):
when the driver ends, is interrupted or killed, or ssh drops, the remote tbrun stops its
workers. A failure on one host stops every host's workers (the agents' own rule), and the
driver exits with the first non-zero status.
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid

__all__ = ["parse_hosts", "read_hostfile", "apply_hosts", "run_fanout", "watch_stdin"]


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


def apply_hosts(ns, is_local) -> list | None:
    """Fold a one-host list (this host) into tbrun's options (per-node count from its slots).
    Returns the host list when it names other hosts (the ssh fan-out), else None."""
    hosts = read_hostfile(ns.hostfile) if ns.hostfile else parse_hosts(ns.hosts)
    what = "--hostfile" if ns.hostfile else "-H"
    if len(hosts) > 1 or not is_local(hosts[0][0]):
        total = sum(n for _, n in hosts)
        if ns.np is not None and ns.np != total:
            raise HostsError(f"-np {ns.np} does not match the {total} slot(s) of {what}")
        return hosts
    slots = hosts[0][1]
    if ns.np is not None and ns.np != slots:
        raise HostsError(f"-np {ns.np} does not match the {slots} slot(s) of {what}")
    ns.np = None
    ns.nproc_per_node = str(slots)
    return None


# options of the driver that the remote tbruns must not get (value-taking ones first)
_DRIVER_ONLY = {"--hostfile": 1, "-H": 1, "--hosts": 1, "-np": 1, "--ssh_port": 1,
                "--ssh-port": 1, "--ssh_opts": 1, "--ssh-opts": 1, "--nnodes": 1,
                "--node_rank": 1, "--node-rank": 1, "--master_addr": 1, "--master-addr": 1,
                "--nproc_per_node": 1, "--nproc-per-node": 1, "--num_gpus": 1, "--num-gpus": 1,
                "--num_nodes": 1, "--num-nodes": 1, "--num_processes": 1, "--num-processes": 1,
                "--num_machines": 1, "--num-machines": 1, "--machine_rank": 1,
                "--machine-rank": 1, "--main_process_ip": 1, "--main-process-ip": 1,
                "--rdzv_endpoint": 1, "--rdzv-endpoint": 1, "--standalone": 0}


def remote_options(argv: list, script_at: int) -> list:
    """tbrun's own options from ``argv`` (before the script) minus the driver's."""
    out, i = [], 0
    opts = argv[:script_at]
    while i < len(opts):
        a = opts[i]
        name = a.split("=", 1)[0]
        if name in _DRIVER_ONLY:
            i += 1 + (_DRIVER_ONLY[name] if "=" not in a else 0)
            continue
        out.append(a)
        i += 1
    return out


def _remote_command(host_rank, nhosts, slots, master, port, run_id, options, target) -> str:
    keep = {k: v for k, v in os.environ.items()
            if k == "PYTHONPATH" or k.startswith(("TB_", "NCCL_", "OMP_"))}
    argv = [sys.executable, "-m", "tensorbrain.distributed.run", "--_watch_stdin",
            "--nnodes", str(nhosts), "--node_rank", str(host_rank), "--master_addr", master,
            "--master_port", str(port), "--nproc_per_node", str(slots), "--rdzv_id", run_id,
            *options, *target]
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(keep.items()))
    return (f"cd {shlex.quote(os.getcwd())} && exec env {env} "
            + " ".join(shlex.quote(a) for a in argv))


def run_fanout(hosts, ns, argv, script_at, notice) -> int:
    """Start one tbrun per host over ssh and wait for all; returns the exit status."""
    from . import _output
    master = hosts[0][0]
    port = ns.master_port if ns.master_port is not None else 29500
    run_id = ns.rdzv_id or uuid.uuid4().hex[:12]
    options = remote_options(argv, script_at)
    if ns.local_rank_arg and not any(o.startswith("--_local_rank_arg") for o in options):
        options.append(f"--_local_rank_arg={ns.local_rank_arg}")  # decided here, from --hostfile
    target = argv[script_at:]
    ssh = ["ssh", "-o", "BatchMode=yes"]
    if ns.ssh_port:
        ssh += ["-p", str(ns.ssh_port)]
    ssh += shlex.split(ns.ssh_opts or "")
    notice(f"run {run_id}: starting {len(hosts)} agent(s) over ssh ("
           + ", ".join(f"{h}:{n}" for h, n in hosts) + f"), rendezvous at {master}:{port}")
    procs, pumps = [], []
    for i, (host, slots) in enumerate(hosts):
        cmd = _remote_command(i, len(hosts), slots, master, port, run_id, options, target)
        p = subprocess.Popen([*ssh, host, cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        procs.append((host, p))
        for pipe, out in ((p.stdout, sys.stdout.buffer), (p.stderr, sys.stderr.buffer)):
            t = threading.Thread(target=_output.pump, args=(pipe, out, b"", None, None),
                                 daemon=True)
            t.start()
            pumps.append(t)
    stop: dict[str, int | None] = {"sig": None}

    def on_signal(signum, frame):
        stop["sig"] = signum

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {sg: signal.signal(sg, on_signal) for sg in handled}
    status, ended_at = 0, None
    try:
        while any(p.poll() is None for _, p in procs):
            time.sleep(0.1)
            for host, p in procs:
                if p.returncode not in (None, 0) and status == 0:
                    status, ended_at = p.returncode, time.monotonic()
                    notice(f"the agent on {host} exited with status {p.returncode}; stopping "
                           "every host's workers")
            if stop["sig"] is not None or (ended_at and time.monotonic() - ended_at > 10):
                break
        if any(p.poll() is None for _, p in procs):
            # closing an agent's stdin (its ssh channel) makes it stop its workers and exit
            for _, p in procs:
                try:
                    if p.stdin is not None:
                        p.stdin.close()
                except OSError:
                    pass
            deadline = time.monotonic() + ns.stop_timeout + 10
            for _, p in procs:
                try:
                    p.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
    finally:
        for sg, h in old.items():
            signal.signal(sg, h)
        for t in pumps:
            t.join(2.0)
    sig = stop["sig"]
    if sig is not None:
        notice(f"received {signal.Signals(sig).name}; stopped the agents on every host")
        return 128 + sig
    for _, p in procs:
        if status == 0 and p.returncode != 0:
            status = p.returncode
    return 1 if status == 255 else status  # 255: ssh itself failed (named in its own message)


def watch_stdin(on_eof) -> None:
    """Call ``on_eof()`` (from a thread) when stdin reaches end of file: the driver is gone."""
    def run():
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        on_eof()
    threading.Thread(target=run, daemon=True).start()
