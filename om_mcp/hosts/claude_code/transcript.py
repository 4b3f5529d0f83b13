"""Incremental reading of a Claude Code session transcript (JSONL).

Claude Code appends one JSON object per line to
`~/.claude/projects/<project>/<session-id>.jsonl`. A hook only needs the lines
added since the last hook, so the reader keeps a small state: the byte offset
just past the last complete line it consumed, plus enough to notice that the
file is no longer the one it was reading:

* the first line's hash (a rewritten file starts differently),
* the uuid of the last consumed entry and where its line starts (a file
  rewritten to the same length, or edited in the middle, no longer has that
  uuid at that offset),
* the file size (an offset past the end means the file was truncated).

When any check fails the reader starts again from the top. That is harmless:
message ids are entry uuids, so entries read twice are the same messages.
A last line without its newline is being written right now; it is left for
the next read. Reading is bounded (`hosts/reader.py`): a regular file only, a
line of at most 16 MiB (a longer one is skipped), at most 64 MiB a read, the
rest the next time.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from om_mcp.hosts import reader

# Tool-use ids whose results have not been seen yet, kept across reads so a
# result in a later read still gets its tool's name. Bounded: a tool call whose
# result never arrives must not grow the state forever.
MAX_PENDING_TOOLS = 500


@dataclass(frozen=True)
class TranscriptState:
    """Where the last read stopped. Plain JSON-able data: store `to_dict()`."""

    offset: int = 0
    last_uuid: str | None = None
    last_uuid_offset: int | None = None
    head_hash: str | None = None
    pending_tools: dict[str, str] = field(default_factory=dict)
    rescans: int = 0  # how often the file was found rewritten or truncated
    skipping: bool = False  # the last read stopped inside a line too long to keep

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> TranscriptState:
        if not data:
            return cls()
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


@dataclass
class ReadResult:
    entries: list[dict[str, Any]]
    state: TranscriptState
    rescanned: bool = False
    bad_lines: list[int] = field(default_factory=list)  # byte offsets of lines that were not JSON
    long_lines: list[tuple[int, int]] = field(default_factory=list)  # (offset, bytes) of lines skipped as too long
    more: bool = False  # the read stopped at its bound: more is waiting for the next one


def read_new(
    path: str | os.PathLike[str], state: TranscriptState | None = None
) -> tuple[list[dict[str, Any]], TranscriptState]:
    """The entries appended to `path` since `state`, and the state to keep.

    A missing file (Claude Code creates it lazily) yields no entries and the
    same state.
    """
    result = read_transcript(path, state)
    return result.entries, result.state


def read_transcript(
    path: str | os.PathLike[str], state: TranscriptState | None = None, max_bytes: int = reader.MAX_RUN_BYTES
) -> ReadResult:
    """`read_new` with the details: whether the file was re-read from the top,
    and which lines were not valid JSON (skipped, never retried). At most `max_bytes` a read
    (and at least one line's worth: `reader.scan`)."""
    state = state or TranscriptState()
    try:
        fd = reader.open_regular(path)
    except FileNotFoundError:
        return ReadResult([], state)
    try:
        size = os.fstat(fd).st_size
        head = reader.head_hash(fd)
        rescanned = False
        if state.offset and not _still_valid(fd, state, size, head):
            state = TranscriptState(rescans=state.rescans + 1)
            rescanned = True
        lines = reader.scan(fd, state.offset, state.skipping, max_run=max_bytes)
    finally:
        os.close(fd)

    entries: list[dict[str, Any]] = []
    bad: list[int] = []
    pending = dict(state.pending_tools)
    last_uuid, last_uuid_offset = state.last_uuid, state.last_uuid_offset
    for line_start, raw in lines.lines:
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):
            bad.append(line_start)
            continue
        if not isinstance(entry, dict):
            bad.append(line_start)
            continue
        entries.append(entry)
        _track_tools(entry, pending)
        if isinstance(entry.get("uuid"), str):
            last_uuid, last_uuid_offset = entry["uuid"], line_start

    new_state = replace(
        state,
        offset=lines.end,
        skipping=lines.skipping,
        last_uuid=last_uuid,
        last_uuid_offset=last_uuid_offset,
        head_hash=head if lines.end else None,
        pending_tools=_bounded(pending),
    )
    return ReadResult(entries, new_state, rescanned, bad, lines.skipped, lines.more)


def _still_valid(fd: int, state: TranscriptState, size: int, head: str | None) -> bool:
    if state.offset > size:
        return False  # truncated
    if state.head_hash is not None and head != state.head_hash:
        return False  # rewritten from the start
    if state.last_uuid is not None and state.last_uuid_offset is not None:
        line = reader.line_at(fd, state.last_uuid_offset)
        try:
            entry = json.loads(line or b"")
        except (ValueError, RecursionError):
            return False
        if not isinstance(entry, dict) or entry.get("uuid") != state.last_uuid:
            return False
    return True


def _track_tools(entry: dict[str, Any], pending: dict[str, str]) -> None:
    content = (entry.get("message") or {}).get("content") if isinstance(entry.get("message"), dict) else None
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") in ("tool_use", "server_tool_use") and isinstance(block.get("id"), str):
            pending[block["id"]] = str(block.get("name") or "")
        elif block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
            pending.pop(block["tool_use_id"], None)


def _bounded(pending: dict[str, str]) -> dict[str, str]:
    if len(pending) <= MAX_PENDING_TOOLS:
        return pending
    return dict(list(pending.items())[-MAX_PENDING_TOOLS:])
