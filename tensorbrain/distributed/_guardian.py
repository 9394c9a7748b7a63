"""Nothing outlives tbrun, even when tbrun itself is SIGKILLed.

Workers get ``PR_SET_PDEATHSIG`` (the kernel kills a worker when tbrun dies), but what a worker
started (DataLoader workers, a subprocess) is not its child's child of tbrun: it used to survive a
SIGKILLed tbrun in 6 of 6 runs. Each worker leads its own process group (``start_new_session``),
and those groups hold its descendants, so tbrun starts one small *guardian* process and tells it
every worker's group through a pipe. When the pipe reaches end-of-file (tbrun exited or was
killed: the kernel closes its end either way) the guardian SIGKILLs every group it still knows
and removes the run's shared-memory segments (``/dev/shm/tb_<run_id>_*``). Processes that left
their group on purpose (their own ``setsid``) are beyond its reach.
"""
from __future__ import annotations

import subprocess
import sys

_CODE = r"""
import glob, os, signal, sys
groups = set()
for line in sys.stdin:
    line = line.strip()
    if line.startswith("-"):
        groups.discard(int(line[1:]))
    elif line.isdigit():
        groups.add(int(line))
for g in groups:
    try:
        os.killpg(g, signal.SIGKILL)
    except OSError:
        pass
run_id = sys.argv[1]
if run_id:
    for path in glob.glob(f"/dev/shm/tb_{run_id}_*"):
        try:
            os.unlink(path)
        except OSError:
            pass
"""


class Guardian:
    """The guardian process of one tbrun; ``add``/``forget`` worker process groups."""

    def __init__(self, run_id: str):
        self.proc = None
        if not sys.platform.startswith("linux"):
            return
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", _CODE, run_id or ""],
                                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True,
                                         close_fds=True)
        except OSError:
            self.proc = None

    def _write(self, line: str) -> None:
        if self.proc is None or self.proc.stdin is None:
            return
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass

    def add(self, pgid: int) -> None:
        """Kill this process group if tbrun goes away without forgetting it."""
        self._write(str(pgid))

    def forget(self, pgid: int) -> None:
        """The group was stopped and reaped by tbrun itself (its pid may be reused)."""
        self._write(f"-{pgid}")

    def close(self) -> None:
        """Normal exit: the guardian kills what is left of the groups still known, and exits."""
        if self.proc is None:
            return
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.proc = None
