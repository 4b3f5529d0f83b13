"""Reading a host's files in bounded time and memory: the one reader every host adapter uses.

A hook runs on every prompt, so whatever sits at the transcript path must not cost it
more than a bounded read: a 1 GiB line without a newline, `/dev/zero`, a FIFO nobody
writes to. Here:

* only a regular file is read (it is opened without blocking, then checked), anything
  else is `NotReadable`;
* a line longer than `max_line` bytes is skipped (never held: its bytes stream past and
  are counted in `skipped`); one run reads `max_run` bytes, and then the line that straddles
  that bound to its end (so a run always gets past a line, and reads at most `max_run +
  max_line`), and `Lines.more` says that more is waiting; `Lines.end` (plus `Lines.skipping`, when the run stopped
  inside a long line) is where the next run resumes;
* a last line without its newline is being written: it is left for the next run,
  unless it is already too long to keep.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field

MAX_LINE_BYTES = 16 * 1024 * 1024  # one transcript entry; a big pasted image is a few MB
MAX_RUN_BYTES = 64 * 1024 * 1024  # one hook's read; the rest waits for the next hook
CHUNK = 1 << 20
HEAD_BYTES = 64 * 1024  # of the first line, hashed to notice a file rewritten from the start


class NotReadable(OSError):
    """The path is not a regular file (a FIFO, a device, a directory) or is too big to read."""


@dataclass
class Lines:
    lines: list[tuple[int, bytes]]  # (offset of the line, the line without its newline)
    end: int  # where the next run starts
    skipping: bool = False  # the run stopped inside a line that is being skipped
    more: bool = False  # stopped at max_run: more is there
    skipped: list[tuple[int, int]] = field(default_factory=list)  # (offset, length) of lines too long


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor for `path`, which must be a regular file (FileNotFoundError as usual)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)  # O_NONBLOCK: opening a FIFO does not wait for a writer
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise NotReadable(f"{os.fspath(path)}: {kind}; only a regular file is read")
    except BaseException:
        os.close(fd)
        raise
    return fd


def line_at(fd: int, offset: int, limit: int = MAX_LINE_BYTES) -> bytes | None:
    """The line starting at `offset` with its newline, read at most `limit` bytes far; None
    when it has no newline within that."""
    os.lseek(fd, offset, os.SEEK_SET)
    data = b""
    while len(data) < limit and (chunk := os.read(fd, min(CHUNK, limit - len(data)))):
        newline = chunk.find(b"\n")
        if newline >= 0:
            return data + chunk[: newline + 1]
        data += chunk
    return None


def prefix(fd: int, size: int) -> bytes:
    """The file's first `size` bytes (fewer when it is shorter)."""
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while len(data) < size and (chunk := os.read(fd, size - len(data))):
        data += chunk
    return data


def head_hash(fd: int) -> str | None:
    """The hash of the file's first line (of its first HEAD_BYTES when longer), None while that
    line is not complete: a file that no longer starts the same was rewritten."""
    data = prefix(fd, HEAD_BYTES)
    newline = data.find(b"\n")
    if newline < 0 and len(data) < HEAD_BYTES:
        return None
    return hashlib.sha1(data[: newline + 1] if newline >= 0 else data).hexdigest()


def read_lines(
    path: str | os.PathLike[str],
    offset: int = 0,
    skipping: bool = False,
    *,
    max_line: int = MAX_LINE_BYTES,
    max_run: int = MAX_RUN_BYTES,
) -> Lines:
    """The complete lines of `path` from `offset` (see the module text for the bounds)."""
    fd = open_regular(path)
    try:
        return scan(fd, offset, skipping, max_line=max_line, max_run=max_run)
    finally:
        os.close(fd)


def scan(
    fd: int, offset: int, skipping: bool = False, *, max_line: int = MAX_LINE_BYTES, max_run: int = MAX_RUN_BYTES
) -> Lines:
    """`read_lines` on an open descriptor."""
    return _scan(fd, offset, skipping, max_line, max_run)


def _scan(fd: int, offset: int, skipping: bool, max_line: int, max_run: int) -> Lines:
    out = Lines([], offset, skipping)
    pending = bytearray()  # the line being read (empty while skipping)
    start = offset  # where that line began
    position = offset
    read = 0
    os.lseek(fd, offset, os.SEEK_SET)
    while True:
        finishing = read >= max_run  # past the bound: only the line that straddles it is read to its end
        if finishing and (out.skipping or not pending):
            break
        chunk = os.read(fd, CHUNK if finishing else min(CHUNK, max_run - read))
        if not chunk:
            break
        if finishing and (newline := chunk.find(b"\n")) >= 0:
            chunk = chunk[: newline + 1]
        read += len(chunk)
        cursor = 0
        while (newline := chunk.find(b"\n", cursor)) >= 0:
            piece = chunk[cursor:newline]
            if out.skipping or len(pending) + len(piece) > max_line:
                out.skipped.append((start, position + newline - start))
            else:
                pending += piece
                out.lines.append((start, bytes(pending)))
            pending.clear()
            out.skipping = False
            start = position + newline + 1
            cursor = newline + 1
        rest = chunk[cursor:]
        if out.skipping or len(pending) + len(rest) > max_line:
            out.skipping = True  # too long already: stream past it
            pending.clear()
        else:
            pending += rest
        position += len(chunk)
    out.end = position if out.skipping else start
    out.more = read >= max_run
    return out


def read_bytes(path: str | os.PathLike[str], max_bytes: int = MAX_RUN_BYTES) -> bytes:
    """A whole small file (a host's JSON document), or NotReadable when it is larger than `max_bytes`."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise NotReadable(f"{os.fspath(path)}: {size:,} bytes, more than the {max_bytes:,} read at most")
        data = b""
        while len(data) <= max_bytes and (chunk := os.read(fd, max_bytes + 1 - len(data))):
            data += chunk
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise NotReadable(f"{os.fspath(path)}: more than the {max_bytes:,} bytes read at most")
    return data


def first_fields(path: str | os.PathLike[str], *names: str, lines: int = 200) -> tuple[str | None, ...]:
    """The first string value of each field among the first `lines` lines of a JSONL file (one bounded run)."""
    import json

    found: dict[str, str] = {}
    try:
        got = read_lines(path, max_run=MAX_LINE_BYTES + 1)
    except OSError:
        return tuple(None for _ in names)
    for _, raw in got.lines[:lines]:
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(entry, dict):
            for name in names:
                if name not in found and isinstance(entry.get(name), str) and entry[name]:
                    found[name] = entry[name]
        if len(found) == len(names):
            break
    return tuple(found.get(n) for n in names)
