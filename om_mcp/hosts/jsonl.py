"""Reading an append-only JSONL transcript a piece at a time (Codex, Cursor, VS Code).

The state is the byte offset past the last complete line read, how many lines
came before it, and the hash of the first line. A file that no longer starts
the same way, or is shorter than the offset, is read again from the top;
harmless, because each adapter names its messages by the line they come from
(or the host's own ids), so what is read twice is stored once. A last line
without its newline is still being written and waits for the next read.
Reading is bounded by the shared reader (`hosts/reader.py`): a regular file only,
a line over its limit skipped (it still counts as a line), a bounded amount a read.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from om_mcp.hosts import reader


@dataclass(frozen=True)
class JsonlState:
    offset: int = 0
    lines: int = 0  # complete lines before `offset`
    head_hash: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # what an adapter carries across reads
    rescans: int = 0
    skipping: bool = False  # the last read stopped inside a line too long to keep
    more: bool = False  # the last read stopped at its bound: more is waiting for the next one

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> JsonlState:
        if not data:
            return cls()
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def read_lines(
    path: str | os.PathLike[str], state: JsonlState, max_bytes: int = reader.MAX_RUN_BYTES
) -> tuple[list[tuple[int, dict[str, Any]]], JsonlState]:
    """(line number, object) for each complete JSON-object line after `state`, and the new state
    (`more`: the read stopped at `max_bytes`). A missing file gives nothing and the same state."""
    try:
        fd = reader.open_regular(path)
    except (FileNotFoundError, PermissionError):
        return [], state
    try:
        size = os.fstat(fd).st_size
        head = reader.head_hash(fd)
        if state.offset and (state.offset > size or (state.head_hash is not None and head != state.head_hash)):
            state = JsonlState(rescans=state.rescans + 1)
        got = reader.scan(fd, state.offset, state.skipping, max_run=max_bytes)
    finally:
        os.close(fd)
    found: list[tuple[int, dict[str, Any]]] = []
    number = state.lines
    # A line skipped as too long is still a line: later lines keep their numbers.
    for _, raw in sorted([*got.lines, *((at, None) for at, _ in got.skipped)], key=lambda item: item[0]):
        number += 1
        if raw is None or not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            found.append((number, value))
    end = got.end
    return found, JsonlState(
        end, number, head if end else None, dict(state.extra), state.rescans, got.skipping, got.more
    )
