"""Atomic file writes shared by every checkpoint writer (``tb.save``'s safetensors files,
whole-object files, a distributed checkpoint's per-rank files): a private temp folder next to the
target, fsync, rename, fsync of the folder.

A writer works in ``.<name>.tbtmp-<host>-<pid>-XXXX.tmp/``, a folder of its own, so the next save
to the same path can tell a dead writer's leftover (removed, with everything in it) from a live
writer's (kept), and a SIGKILL between write and rename leaves the previous file whole. It is a
folder, not a file, because safetensors' ``save_file`` (0.8) itself writes through a temp file
named ``.tmpXXXXXX`` next to the path it is given and renames it: killed inside ``save_file``, it
used to leave that file in the user's folder, where nothing could tell whose it was. Now it lands
in the writer's folder and goes with it.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile


def write(path, fill, fsync: bool = True) -> None:
    """Write ``path`` atomically: ``fill(tmp_path)`` writes a temp file, then it replaces ``path``.

    Args:
        path: the file to (over)write.
        fill: called with the temp file's path; writes the whole content there.
        fsync: flush the file and the folder to disk before and after the rename.

    Raises:
        OSError: the file system failed (disk full, permissions); the message names ``path``.
        Whatever else ``fill`` raises. In every case the temp folder is removed and ``path`` is
        unchanged.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    _remove_stale_temps(path)
    try:
        work = tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=".tmp", dir=folder)
    except OSError as exc:
        raise _naming(exc, path) from exc
    tmp = os.path.join(work, os.path.basename(path))
    try:
        fill(tmp)
        if fsync:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise _naming(exc, path) from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if fsync:
        fsync_dir(folder)  # make the rename itself durable


def safetensors_fill(save_file, arrays: dict, metadata: dict | None = None):
    """A ``fill`` for :func:`write` that runs safetensors' ``save_file(arrays, tmp, metadata)``.

    safetensors reports I/O failures as ``SafetensorError('Error while serializing: I/O error:
    No space left on device (os error 28)')``, which ``except OSError`` misses; they are raised
    as the ``OSError`` they are (``write`` then names the file).

    Args:
        save_file: ``safetensors.numpy.save_file``.
        arrays: ``{name: contiguous array}``.
        metadata: the header's string map.

    Returns:
        The ``fill(tmp_path)`` callable.
    """
    def fill(tmp):
        try:
            save_file(arrays, tmp, metadata=metadata)
        except OSError:
            raise
        except Exception as exc:
            found = re.search(r"\(os error (\d+)\)", str(exc))
            if found is None:
                raise
            code = int(found.group(1))
            raise OSError(code, os.strerror(code)) from exc
    return fill


def _naming(exc: OSError, path: str) -> OSError:
    """``exc`` worded with the file being written (a failed write() names no file)."""
    if exc.errno is None:
        return exc
    return OSError(exc.errno, f"{exc.strerror or os.strerror(exc.errno)} while writing "
                              f"{path!r} (the previous file, if any, is unchanged)", path)


def fsync_dir(folder: str) -> None:
    """fsync a folder (a rename in it becomes durable); errors are ignored.

    Args:
        folder: the folder.
    """
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _host() -> str:
    return socket.gethostname().replace("-", "_").replace(os.sep, "_")


def _temp_prefix(path) -> str:
    """``.<name>.tbtmp-<host>-<pid>-``: a writer's temp folder names its host and pid, so the next
    save to the same path can tell a dead writer's leftover from a live writer's."""
    return f".{os.path.basename(path)}.tbtmp-{_host()}-{os.getpid()}-"


def remove(entry: str) -> None:
    """Delete a leftover temp file or folder; gone already is fine.

    Args:
        entry: the path of the file or folder.
    """
    if os.path.isdir(entry) and not os.path.islink(entry):
        shutil.rmtree(entry, ignore_errors=True)
        return
    try:
        os.unlink(entry)
    except OSError:
        pass


def _remove_stale_temps(path) -> None:
    """Delete temp folders (and the temp files of earlier versions) of ``path`` left by writers
    on this host whose process is gone (a save killed mid-write). Those of live writers and of
    other hosts are left alone."""
    folder = os.path.dirname(os.path.abspath(path))
    head = f".{os.path.basename(path)}.tbtmp-{_host()}-"
    try:
        names = [n for n in os.listdir(folder) if n.startswith(head) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        pid = name[len(head):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _pid_running(int(pid)):
            continue
        remove(os.path.join(folder, name))


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
