"""Read a big JSON array one element at a time, from a file or a zip archive.

A year of chats exports to a `conversations.json` of 100+ MB. Loading it whole
costs several times its size in memory; here each top-level element (one
conversation) is decoded on its own by the C decoder, so memory stays at about
one conversation plus a read buffer. No dependency: `json.JSONDecoder.raw_decode`
tells where an element ends, and an element cut by the buffer edge is retried
after reading more (the read grows with the element, so a huge conversation
costs a few retries, not one per chunk).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

CHUNK = 1 << 20  # characters per read
_WS = " \t\n\r"


class ExportError(ValueError):
    """The export file cannot be read; the message says where and what to do."""


@contextmanager
def open_export(path: str | Path, member: str = "conversations.json") -> Iterator[TextIO]:
    """Open the export's JSON text: a `.json` file, or `member` inside a `.zip`."""
    path = Path(path)
    if not path.exists():
        raise ExportError(f"{path}: no such file")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n == member or n.endswith("/" + member)]
            if not names:
                raise ExportError(f"{path}: the archive has no {member}")
            with archive.open(min(names, key=len)) as raw:
                yield io.TextIOWrapper(raw, encoding="utf-8-sig")
        return
    with open(path, encoding="utf-8-sig") as text:
        yield text


def iter_array(text: TextIO, where: str = "export", key: str | None = None) -> Iterator[Any]:
    """Yield the elements of the JSON array at the top of `text`.

    The top level may also be an object holding the array under `key` (some
    exports wrap it, e.g. {"conversations": [...]}); that form is read whole.
    """
    decoder = json.JSONDecoder()
    buf = text.read(CHUNK)
    pos = _skip_ws(buf, 0)
    if pos < len(buf) and buf[pos] == "{" and key:
        try:
            whole = json.loads(buf + text.read())
        except json.JSONDecodeError as error:
            raise ExportError(f"{where}: not valid JSON ({error})") from None
        items = whole.get(key) if isinstance(whole, dict) else None
        if not isinstance(items, list):
            raise ExportError(f"{where}: expected a JSON array, or an object with a '{key}' array")
        yield from items
        return
    if pos >= len(buf) or buf[pos] != "[":
        raise ExportError(f"{where}: expected a JSON array of conversations")
    pos += 1
    eof = False
    index = 0
    need_comma = False
    while True:
        pos = _skip_ws(buf, pos)
        while pos >= len(buf) and not eof:
            buf, pos, eof = _refill(text, buf, pos, CHUNK)
            pos = _skip_ws(buf, pos)
        if pos >= len(buf):
            raise ExportError(f"{where}: the file ends inside the array (cut short?)")
        if buf[pos] == "]":
            return
        if need_comma:
            if buf[pos] != ",":
                raise ExportError(f"{where}: expected ',' or ']' after element {index - 1}")
            pos += 1
            need_comma = False
            continue
        want = CHUNK
        while True:
            try:
                value, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as error:
                if eof:
                    raise ExportError(f"{where}: element {index} is not valid JSON ({error.msg})") from None
                # Possibly cut by the buffer edge: read as much again as the element so far.
                want = max(want, len(buf) - pos)
                buf, pos, eof = _refill(text, buf, pos, want)
                continue
            if end == len(buf) and not eof:
                # A number at the very edge may continue in the next read.
                buf, pos, eof = _refill(text, buf, pos, CHUNK)
                continue
            break
        yield value
        index += 1
        pos = end
        need_comma = True


def _refill(text: TextIO, buf: str, pos: int, size: int) -> tuple[str, int, bool]:
    more = text.read(size)
    return buf[pos:] + more, 0, not more


def _skip_ws(buf: str, pos: int) -> int:
    n = len(buf)
    while pos < n and buf[pos] in _WS:
        pos += 1
    return pos
