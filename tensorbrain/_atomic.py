"""Atomic file writes shared by every checkpoint writer (``tb.save``'s safetensors files and
whole-object files): a temp file in the target's folder, fsync, rename, fsync of the folder.

A writer's temp file is named ``.<name>.tbtmp-<host>-<pid>-XXXX.tmp``, so the next save to the
same path can tell a dead writer's leftover (removed) from a live writer's file (kept), and a
SIGKILL between write and rename leaves the previous file whole.
"""
from __future__ import annotations

import os
import socket
import tempfile


def write(path, fill) -> None:
    """Write ``path`` atomically: ``fill(tmp_path)`` writes a temp file, then it replaces ``path``.

    Args:
        path: the file to (over)write.
        fill: called with the temp file's path; writes the whole content there.

    Raises:
        Whatever ``fill`` or the file system raises; the temp file is removed and ``path`` is
        unchanged.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    _remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        fill(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _temp_prefix(path) -> str:
    """``.<name>.tbtmp-<host>-<pid>-``: a writer's temp file names its host and pid, so the next
    save to the same path can tell a dead writer's leftover from a live writer's file."""
    host = socket.gethostname().replace("-", "_").replace(os.sep, "_")
    return f".{os.path.basename(path)}.tbtmp-{host}-{os.getpid()}-"


def _remove_stale_temps(path) -> None:
    """Delete temp files of ``path`` left by writers on this host whose process is gone (a save
    killed mid-write). Files of live writers and of other hosts are left alone."""
    folder = os.path.dirname(os.path.abspath(path))
    host = socket.gethostname().replace("-", "_").replace(os.sep, "_")
    head = f".{os.path.basename(path)}.tbtmp-{host}-"
    try:
        names = [n for n in os.listdir(folder) if n.startswith(head) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        pid = name[len(head):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _pid_running(int(pid)):
            continue
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] not in (b"Z", b"X", b"x")
    except OSError:
        return True
