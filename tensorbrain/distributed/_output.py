"""tbrun's copying of one worker pipe to the console: whole lines, ``\\r`` redraws kept live.

A worker's output is cut into pieces that end in ``\\n`` or ``\\r``; each piece that starts a
line gets the rank prefix, so a progress bar that redraws itself with ``\\r`` (tqdm) shows as
``[rank 0] 40%|####...`` redrawn in place. Complete pieces are written under one lock, so lines of
different ranks never interleave within a line. Text without a terminator yet is held: after a
``\\r`` (a progress bar) for 50 ms, otherwise (a print split over several writes, a prompt) for
0.5 s, then shown as it is and the rest of its line follows without a prefix.
"""
from __future__ import annotations

import collections
import os
import select
import threading

_lock = threading.Lock()
MAX_PIECE = 65536
HOLD_REDRAW = 0.05
HOLD_LINE = 0.5


def emit(stream, data: bytes) -> None:
    """Write ``data`` to a binary stream under the console lock."""
    with _lock:
        stream.write(data)
        stream.flush()


#: a worker line starting with this byte (ASCII record separator) is shown without the
#: ``[rank N]`` prefix; tbrun tells workers it understands it with TB_RAW_ESCAPE=1
RAW_ESCAPE = b"\x1e"


class _Line:
    def __init__(self, console, prefix: bytes, tail, dup=None):
        self.console, self.prefix, self.tail, self.dup = console, prefix, tail, dup
        self.at_start = True      # the next byte starts a console line
        self.redraw = False       # the current line began after a \r
        self.text = b""           # the current line so far (for the stderr tail)

    def pieces(self, data: bytes) -> bytes:
        """Console bytes for complete pieces of ``data``; returns the unterminated rest."""
        out: list[bytes] = []
        start = 0
        for i, b in enumerate(data):
            if b in (10, 13):  # \n \r
                piece = data[start:i + 1]
                self._show(out, piece)
                start = i + 1
        if out and self.console is not None:
            emit(self.console, b"".join(out))
        return data[start:]

    def _show(self, out: list, piece: bytes):
        if self.at_start and piece[:1] == RAW_ESCAPE:  # the worker asks for no prefix here
            piece = piece[1:]
            body = piece[:-1]
        else:
            body = piece[:-1]
            if self.at_start and (body or piece[-1:] == b"\n"):
                out.append(self.prefix)
        out.append(piece)
        self.text += body
        if piece.endswith(b"\n"):
            if self.dup is not None:
                self.dup.offer(self.prefix, self.text)
            if self.tail is not None:
                self.tail.append(self.text.decode("utf-8", "replace"))
            self.text, self.redraw = b"", False
        else:
            self.text, self.redraw = b"", True
        self.at_start = True

    def partial(self, rest: bytes):
        """Show unterminated text now; its line goes on without a prefix."""
        if not rest:
            return
        data = (self.prefix if self.at_start else b"") + rest
        self.text += rest
        self.at_start = False
        if self.console is not None:
            emit(self.console, data)

    def finish(self, rest: bytes):
        """End of the stream: a last line without a newline gets one."""
        if rest:
            self.pieces(rest + b"\n")
        elif not self.at_start:
            self.pieces(b"\n")


class Duplicator:
    """torchrun's ``--duplicate_stdout_filters``: whole lines containing any of the filters
    (``*``: every line) are also appended, prefixed, to one file shared by the workers."""

    def __init__(self, path: str, filters: list):
        self.filters = [f.encode() for f in filters]
        self.file = open(path, "ab")
        self.path = path

    def offer(self, prefix: bytes, text: bytes) -> None:
        if any(f == b"*" or f in text for f in self.filters):
            with _lock:
                self.file.write(prefix + text + b"\n")
                self.file.flush()

    def close(self) -> None:
        self.file.close()


def pump(pipe, console, prefix: bytes, logf, tail: collections.deque | None,
         dup: Duplicator | None = None) -> None:
    """Copy a worker pipe: prefixed pieces to ``console`` (None: not shown), raw to ``logf``,
    matching lines to ``dup``."""
    line = _Line(console, prefix, tail, dup)
    fd = pipe.fileno()
    rest = b""
    try:
        while True:
            hold = None if not rest else (HOLD_REDRAW if line.redraw else HOLD_LINE)
            ready, _, _ = select.select([fd], [], [], hold)
            if not ready:
                line.partial(rest)
                rest = b""
                continue
            chunk = os.read(fd, MAX_PIECE)
            if not chunk:
                break
            if logf is not None:
                logf.write(chunk)
                logf.flush()
            rest = line.pieces(rest + chunk)
            if len(rest) >= MAX_PIECE:
                line.partial(rest)
                rest = b""
        line.finish(rest)
    except (OSError, ValueError):
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass
