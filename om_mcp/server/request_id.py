"""The id of a JSON-RPC request whose line cannot be parsed, found in its raw bytes.

A line that is not valid UTF-8, holds raw control bytes, nests deeper than any
parser goes, or is too long to keep still usually says, near its start or its end,
`"method": ...` and `"id": 7`. An answer to such a line should carry that id, or the
client waits for its own timeout. `RequestId` walks the line's bytes as they go by
(keeping none of them but a short id), following strings and nesting by counting,
never by recursion, and knows the top-level `id` when the object has a `method`
(only a request's id: echoing a response's would settle one of the client's own
requests with our error). It gives up, answering None, past SCAN_BYTES.
"""

from __future__ import annotations

import json
import re

SCAN_BYTES = 256 * 1024 * 1024  # a line longer than this is answered without its id
ID_BYTES = 1024  # an id longer than this is not one we answer with
_WS = b" \t\r\n"
_STRING_STOP = re.compile(rb'["\\]')
_STRUCTURE = re.compile(rb'["\[\]{}:,]')
_BARE_END = re.compile(rb"[,}\]\s]")


class RequestId:
    def __init__(self) -> None:
        self.scanned = 0
        self.dead = False  # not an object, or too long to look at
        self.started = False
        self.depth = 0
        self.in_string = False
        self.escaped = False
        self.expect_key = False  # at the top: the next string is a key
        self.key: bytes | None = None
        self.keys: set[bytes] = set()
        self.capture: bytearray | None = None  # a top-level key, or the id's string
        self.capturing_id = False
        self.want_value = False  # just after `"id":`
        self.bare: bytearray | None = None  # the id as a number (or a literal)
        self.found: str | int | None = None
        self.has_id = False

    def feed(self, data: bytes) -> None:
        if self.dead:
            return
        self.scanned += len(data)
        if self.scanned > SCAN_BYTES:
            self.dead = True
            return
        i, n = 0, len(data)
        while i < n:
            if self.in_string:
                i = self._string(data, i)
                continue
            if self.bare is not None:
                found = _BARE_END.search(data, i)
                end = n if found is None else found.start()
                self._keep_bare(data[i:end])
                if found is None:
                    return
                self._end_bare()
                i = end
                continue
            if not self.started or self.want_value:
                while i < n and data[i] in _WS:
                    i += 1
                if i == n:
                    return
                if not self.started:
                    self.started = True
                    if data[i : i + 1] != b"{":
                        self.dead = True
                        return
                elif data[i : i + 1] not in (b'"', b"[", b"{"):
                    self.want_value = False
                    self.bare = bytearray()
                    continue
            found = _STRUCTURE.search(data, i)
            if found is None:
                return
            char, i = found.group(), found.end()
            if char == b'"':
                self._open_string()
            elif char in (b"{", b"["):
                self.want_value = False
                self.depth += 1
                if self.depth == 1:
                    self.expect_key = True
            elif char in (b"}", b"]"):
                self.depth -= 1
                if self.depth <= 0:
                    self.dead = True  # the object ended: nothing after it matters
                    return
            elif self.depth == 1:
                if char == b",":
                    self.expect_key = True
                elif char == b":":
                    self.expect_key = False
                    self.want_value = self.key == b"id"

    def _open_string(self) -> None:
        self.in_string = True
        top = self.depth == 1
        self.capturing_id = top and self.want_value
        self.capture = bytearray() if top and (self.expect_key or self.capturing_id) else None
        self.want_value = False

    def _string(self, data: bytes, i: int) -> int:
        if self.escaped:
            self._keep(data[i : i + 1])
            self.escaped = False
            return i + 1
        found = _STRING_STOP.search(data, i)
        if found is None:
            self._keep(data[i:])
            return len(data)
        self._keep(data[i : found.start()])
        if found.group() == b"\\":
            self._keep(b"\\")
            self.escaped = True
            return found.end()
        self.in_string = False
        self._end_string()
        return found.end()

    def _keep(self, piece: bytes) -> None:
        if self.capture is not None:
            if len(self.capture) + len(piece) > ID_BYTES:
                self.capture = None
                if self.capturing_id:
                    self._set_id(None)
            else:
                self.capture += piece

    def _end_string(self) -> None:
        raw, self.capture = self.capture, None
        if self.depth != 1:
            return
        if self.capturing_id:
            self.capturing_id = False
            self._set_id(_decode(raw) if raw is not None else None)
        elif self.expect_key and raw is not None:
            self.key = bytes(raw)
            self.keys.add(self.key)
            self.expect_key = False

    def _keep_bare(self, piece: bytes) -> None:
        assert self.bare is not None
        if len(self.bare) + len(piece) <= ID_BYTES:
            self.bare += piece

    def _end_bare(self) -> None:
        raw, self.bare = bytes(self.bare or b""), None
        number = int(raw) if re.fullmatch(rb"-?(0|[1-9][0-9]*)", raw) else None  # a float, bool, null: no id
        self._set_id(number)

    def _set_id(self, value: str | int | None) -> None:
        if not self.has_id:  # the first id wins, as a parser keeping the last would not know better
            self.has_id = True
            self.found = value

    def result(self) -> str | int | None:
        """The request's id, or None: not a request, no usable id, or not found."""
        if self.bare is not None and not self.dead:
            self._end_bare()
        return self.found if b"method" in self.keys else None


def _decode(raw: bytes | bytearray) -> str | None:
    try:
        text = json.loads(b'"' + bytes(raw) + b'"')
        text.encode("utf-8")  # a lone surrogate cannot go back out as UTF-8
    except (ValueError, UnicodeEncodeError):
        return None
    return text if isinstance(text, str) else None


def request_id(line: bytes) -> str | int | None:
    """`RequestId` over one whole line."""
    scan = RequestId()
    scan.feed(line)
    return scan.result()
