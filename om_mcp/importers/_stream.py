"""Read a big JSON array one element at a time, from a file or a zip archive, in bounded memory.

A year of chats exports to a `conversations.json` of 100+ MB. Each top-level element
(one conversation) is decoded on its own by the C decoder, from a buffer that grows
with the element up to `max_chars`; an element cut by the buffer edge is retried after
reading more (the read doubles, so a big conversation costs a few retries).

An element that does not fit (over `max_chars`), is not valid JSON or nests too deep is
never materialised: `Skim` walks past it as the text streams by, keeping only its
depth and a few short top-level strings (its id and title, to name it), and the array
yields an `Unreadable` in its place; the elements after it are read as usual. So
memory stays at about `max_chars` characters plus a read buffer, whatever the input: a
zip member is decompressed as it is read, never whole.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO, Protocol

CHUNK = 1 << 20  # characters per read
MAX_ELEMENT_CHARS = 16 * 1024 * 1024  # one conversation's JSON text, read whole up to this
FIELD_CHARS = 300  # of a skipped element's id and title, kept to name it
NAME_FIELDS = ("uuid", "id", "conversation_id", "name", "title")
_WS = " \t\n\r"
_OUTSIDE = re.compile(r'["\[\]{}:,]')
_INSIDE = re.compile(r'["\\]')
_SCALAR_END = re.compile(r"[,\]}\s]")
ZIP_MAGIC = b"PK\x03\x04"


class Text(Protocol):
    """What the reader reads: an open text file, a `StringIO`, the export's decoded text."""

    def read(self, size: int = -1, /) -> str: ...


class ExportError(ValueError):
    """The export file cannot be read; the message says where and what to do."""


@dataclass
class Unreadable:
    """An element left out, and why; `fields` holds its short top-level strings."""

    index: int
    reason: str
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class Source:
    """The export's JSON text, and how far into the file (bytes, compressed for a zip) reading is."""

    text: Text
    size: int
    position: Callable[[], int]


@contextmanager
def open_export(path: str | Path, member: str = "conversations.json") -> Iterator[Source]:
    """Open the export's JSON text: a `.json` file, or `member` inside a `.zip`."""
    path = Path(path)
    if not path.is_file():
        raise ExportError(f"{path}: no such file")
    with open(path, "rb") as raw:
        size = path.stat().st_size
        if raw.read(4) == ZIP_MAGIC:
            raw.seek(0)
            with _member(raw, path, member) as data:
                yield Source(_text(data, path), size, raw.tell)
            return
        raw.seek(0)
        yield Source(_text(raw, path), size, raw.tell)


@contextmanager
def _member(raw: BinaryIO, path: Path, member: str) -> Iterator[io.RawIOBase]:
    try:
        archive = zipfile.ZipFile(raw)
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise ExportError(f"{path}: a damaged or incomplete zip archive ({error}); download the export again") from None
    with archive:
        names = [n for n in archive.namelist() if n == member or n.endswith("/" + member)]
        if not names:
            raise ExportError(f"{path}: the archive has no {member}")
        try:
            with archive.open(min(names, key=len)) as data:
                yield _Guarded(data, path)
        except NotImplementedError as error:  # an unsupported compression method
            raise ExportError(f"{path}: cannot read {member} in this archive ({error})") from None


class _Guarded(io.RawIOBase):
    """A zip member whose damage (a cut-short or corrupt archive) becomes one ExportError."""

    def __init__(self, data: IO[bytes], path: Path) -> None:
        self.data, self.path = data, path

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            chunk = self.data.read(len(buffer))
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
            raise ExportError(
                f"{self.path}: the archive is damaged or cut short ({error}); download the export again"
            ) from None
        buffer[: len(chunk)] = chunk
        return len(chunk)


def _text(data: Any, path: Path) -> Text:
    binary = io.BufferedReader(data) if isinstance(data, io.RawIOBase) else data
    return _Decoded(io.TextIOWrapper(binary, encoding="utf-8-sig"), path)


class _Decoded:
    """Text whose invalid UTF-8 becomes one ExportError naming the problem."""

    def __init__(self, text: io.TextIOWrapper, path: Path) -> None:
        self._text, self.path = text, path

    def read(self, size: int = -1, /) -> str:
        try:
            return self._text.read(size)
        except UnicodeDecodeError as error:
            raise ExportError(
                f"{self.path}: not UTF-8 text ({error.reason} near byte {error.start} of a read); is it the export?"
            ) from None


def iter_array(
    text: Text, where: str = "export", key: str | None = None, max_chars: int = MAX_ELEMENT_CHARS
) -> Iterator[Any]:
    """Yield the elements of the JSON array at the top of `text` (an `Unreadable` for each
    one that is too big, not valid JSON or nested too deep).

    The top level may also be an object holding the array under `key` (some exports
    wrap it, e.g. {"conversations": [...]}); its other members are skimmed past.
    """
    reader = _Reader(text)
    reader.skip_ws()
    if reader.peek() == "{" and key:
        _seek_member(reader, where, key, max_chars)
    elif reader.peek() != "[":
        raise ExportError(f"{where}: expected a JSON array of conversations")
    reader.pos += 1
    decoder = json.JSONDecoder()
    index = 0
    while True:
        reader.skip_ws()
        if reader.peek() == "":
            raise ExportError(f"{where}: the file ends inside the array (cut short?)")
        if reader.peek() == "]":
            return
        if index:
            if reader.peek() != ",":
                raise ExportError(f"{where}: expected ',' or ']' after element {index - 1}")
            reader.pos += 1
            reader.skip_ws()
        yield _element(reader, decoder, where, index, max_chars)
        index += 1


def _element(reader: _Reader, decoder: json.JSONDecoder, where: str, index: int, max_chars: int) -> Any:
    try:  # most elements end inside what is loaded already
        value, end = decoder.raw_decode(reader.buf, reader.pos)
    except (json.JSONDecodeError, RecursionError):
        pass  # cut by the buffer edge, or broken: the walk below tells
    else:
        if end < len(reader.buf) or reader.eof:  # a number at the very edge may go on
            size, reader.pos = end - reader.pos, end
            if size <= max_chars:
                return value
            found = value if isinstance(value, dict) else {}
            fields = {k: v[:FIELD_CHARS] for k in NAME_FIELDS if isinstance(v := found.get(k), str)}
            return Unreadable(index, _too_big(size, max_chars), fields)
    # Walk to the element's end as the text streams by, keeping its text only while it may fit.
    skim, size = Skim(), 0
    keep: list[str] | None = []
    while True:
        ended = skim.feed(reader.buf, reader.pos)
        stop = len(reader.buf) if ended is None else ended
        size += stop - reader.pos
        if keep is not None and size > max_chars:
            keep = None  # too big: what was kept goes, the walk goes on
        if keep is not None:
            keep.append(reader.buf[reader.pos : stop])
        reader.pos = stop
        if ended is not None:
            break
        if reader.eof:
            raise ExportError(f"{where}: the file ends inside element {index} (cut short?)")
        reader.more(CHUNK)
        if reader.eof and skim.scalar:
            break  # a bare scalar that ends the text
    if keep is None:
        return Unreadable(index, _too_big(size, max_chars), skim.fields)
    try:
        value, _ = decoder.raw_decode("".join(keep))
    except json.JSONDecodeError as error:
        return Unreadable(index, f"not valid JSON ({error.msg})", skim.fields)
    except RecursionError:
        return Unreadable(index, "nested too deeply", skim.fields)
    return value


def _too_big(size: int, max_chars: int) -> str:
    return f"{size:,} characters of JSON, over the {max_chars:,} read at most"


def _seek_member(reader: _Reader, where: str, key: str, max_chars: int) -> None:
    """Position the reader at the `[` of the top object's `key` member."""
    reader.pos += 1  # the {
    while True:
        reader.skip_ws()
        if reader.peek() != '"':
            break
        skim = Skim()
        reader.skim(skim)
        name = skim.string
        reader.skip_ws()
        if reader.peek() != ":":
            break
        reader.pos += 1
        reader.skip_ws()
        if name == key and reader.peek() == "[":
            return
        skim = Skim()
        reader.skim(skim)
        if not skim.done:
            break
        reader.skip_ws()
        if reader.peek() == ",":
            reader.pos += 1
    raise ExportError(f"{where}: expected a JSON array, or an object with a '{key}' array")


class _Reader:
    """A growing window on the text: `buf[pos:]` is what is not consumed yet."""

    def __init__(self, text: Text) -> None:
        self.text, self.buf, self.pos, self.eof = text, "", 0, False
        self.more(CHUNK)

    def more(self, size: int) -> None:
        chunk = self.text.read(max(size, 1))
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        self.eof = not chunk

    def peek(self) -> str:
        while self.pos >= len(self.buf) and not self.eof:
            self.more(CHUNK)
        return self.buf[self.pos] if self.pos < len(self.buf) else ""

    def skip_ws(self) -> None:
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf) or self.eof:
                return
            self.more(CHUNK)

    def skim(self, skim: Skim) -> int:
        """Walk past one value without keeping it; returns its size in characters."""
        size = 0
        while True:
            end = skim.feed(self.buf, self.pos)
            if end is not None:
                size += end - self.pos
                self.pos = end
                return size
            size += len(self.buf) - self.pos
            self.pos = len(self.buf)
            if self.eof:
                return size
            self.more(CHUNK)
            if self.eof:
                skim.feed(self.buf, self.pos)  # a bare scalar that ends the text
                return size


class Skim:
    """One JSON value walked through in pieces, never kept: its depth, whether it ended,
    and, when it is an object, its short top-level string members (`fields`)."""

    def __init__(self) -> None:
        self.depth = 0
        self.started = False
        self.done = False
        self.in_string = False
        self.escaped = False
        self.scalar = False  # a bare number or literal at the top
        self.is_object = False
        self.expect_key = False
        self.key: str | None = None
        self.capture: list[str] | None = None  # the text of the string being kept
        self.captured = 0
        self.fields: dict[str, str] = {}
        self.string: str | None = None  # a bare string at the top, decoded

    def feed(self, buf: str, pos: int) -> int | None:
        """Continue at buf[pos:]; the index just past the value's end, or None for more text."""
        n = len(buf)
        while pos < n:
            if not self.started:
                if buf[pos] in _WS:
                    pos += 1
                    continue
                self.started = True
                self.scalar = buf[pos] not in '"[{'
            if self.in_string:
                end = self._string(buf, pos)
                if end is None:
                    return None
                pos = end
                if self.done:
                    return pos
                continue
            if self.scalar:
                found = _SCALAR_END.search(buf, pos)
                if found is None:
                    return None
                self.done = True
                return found.start()
            found = _OUTSIDE.search(buf, pos)
            if found is None:
                return None
            char, pos = found.group(), found.end()
            if char == '"':
                self._open_string()
            elif char in "[{":
                if self.depth == 0:
                    self.is_object = char == "{"
                    self.expect_key = self.is_object
                self.depth += 1
            elif char in "]}":
                self.depth -= 1
                if self.depth <= 0:
                    self.done = True
                    return pos
            elif self.depth == 1 and self.is_object:
                self.expect_key = char == ","
        return None

    def _open_string(self) -> None:
        self.in_string = True
        self.captured = 0
        top = self.depth == 0
        member = self.depth == 1 and self.is_object
        if top or (member and self.expect_key) or (member and self.key in NAME_FIELDS):
            self.capture = []
        else:
            self.capture = None

    def _string(self, buf: str, pos: int) -> int | None:
        if self.escaped:
            self._keep(buf[pos : pos + 1])
            self.escaped = False
            pos += 1
        found = _INSIDE.search(buf, pos)
        if found is None:
            self._keep(buf[pos:])
            return None
        self._keep(buf[pos : found.start()])
        pos = found.end()
        if found.group() == "\\":
            self._keep("\\")
            self.escaped = True
            return pos
        self.in_string = False
        self._close_string()
        return pos

    def _keep(self, piece: str) -> None:
        if self.capture is not None and self.captured < FIELD_CHARS * 2 and piece:
            piece = piece[: FIELD_CHARS * 2 - self.captured]
            self.capture.append(piece)
            self.captured += len(piece)

    def _close_string(self) -> None:
        text = None
        if self.capture is not None:
            raw = "".join(self.capture)
            try:
                text = json.loads(f'"{raw}"')[:FIELD_CHARS]
            except ValueError:
                text = raw[:FIELD_CHARS]
        if self.depth == 0:
            self.string, self.done = text, True
        elif self.depth == 1 and self.is_object:
            if self.expect_key:
                self.key, self.expect_key = text, False
            elif self.key in NAME_FIELDS and text is not None:
                self.fields.setdefault(self.key, text)
        self.capture = None
