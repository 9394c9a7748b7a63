"""Ctrl-C while a shared-memory collective waits in native code.

The native transport waits for late peers in ``futex`` with the GIL released, so Python's
SIGINT handler (which raises KeyboardInterrupt) cannot run until the wait ends: before this
module a Ctrl-C on a rank whose peer was late took effect only at the group timeout. Python's C
signal handler also writes the signal number to the *wakeup fd* (``signal.set_wakeup_fd``) the
moment the signal arrives; a watcher thread reads it and aborts the shared-memory groups the main
thread is waiting in. The wait then returns within one futex slice (the abort wakes it), the
collective raises KeyboardInterrupt, and the backend poisons the group (its peers fail at once
with an error saying this rank was interrupted).

Installed lazily, from the main thread, only while SIGINT has Python's default handler and no
one else uses the wakeup fd (asyncio does: then Ctrl-C waits for the group timeout as before).
"""
from __future__ import annotations

import os
import signal
import threading

_lock = threading.Lock()
_installed: bool | None = None
_active: set = set()       # IntraHost objects the main thread is waiting in
_interrupted: set = set()  # of those, the ones a SIGINT aborted


def _install() -> bool:
    global _installed
    if _installed is not None:
        return _installed
    _installed = False
    if threading.current_thread() is not threading.main_thread():
        _installed = None  # try again from the main thread
        return False
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return False
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError):
        os.close(r)
        os.close(w)
        return False
    if old != -1:  # someone else (an event loop) owns it: leave it alone
        signal.set_wakeup_fd(old)
        os.close(r)
        os.close(w)
        return False
    threading.Thread(target=_watch_loop, args=(r,), daemon=True, name="tb-sigint-watch").start()
    _installed = True
    return True


def _watch_loop(r: int) -> None:
    while True:
        try:
            data = os.read(r, 64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGINT in data:
            with _lock:
                hit = list(_active)
                _interrupted.update(hit)
            for transport in hit:
                try:
                    transport.abort()
                except Exception:  # noqa: BLE001 - best effort; the timeout still applies
                    pass


def watch(transport) -> bool:
    """Register ``transport`` while the main thread runs a collective in it (False: not the
    main thread, or the watcher cannot be installed)."""
    if threading.current_thread() is not threading.main_thread() or not _install():
        return False
    with _lock:
        _active.add(transport)
    return True


def unwatch(transport) -> None:
    with _lock:
        _active.discard(transport)


def consume(transport) -> bool:
    """True (once) when a SIGINT aborted ``transport``'s current collective."""
    with _lock:
        if transport in _interrupted:
            _interrupted.discard(transport)
            return True
    return False
