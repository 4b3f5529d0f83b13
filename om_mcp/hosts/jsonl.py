"""Reading an append-only JSONL transcript a piece at a time (Codex, Cursor, VS Code).

The state is the byte offset past the last complete line read, how many lines
came before it, and the hash of the first line. A file that no longer starts
the same way, or is shorter than the offset, is read again from the top;
harmless, because each adapter names its messages by the line they come from
(or the host's own ids), so what is read twice is stored once. A last line
without its newline is still being written and waits for the next read.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class JsonlState:
    offset: int = 0
    lines: int = 0  # complete lines before `offset`
    head_hash: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # what an adapter carries across reads
    rescans: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> JsonlState:
        if not data:
            return cls()
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def read_lines(path: str | os.PathLike[str], state: JsonlState) -> tuple[list[tuple[int, dict[str, Any]]], JsonlState]:
    """(line number, object) for each complete JSON-object line after `state`, and the new state.
    A missing file gives nothing and the same state."""
    try:
        handle = open(path, "rb")
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return [], state
    with handle:
        size = os.fstat(handle.fileno()).st_size
        first = handle.readline()
        head = hashlib.sha1(first).hexdigest() if first.endswith(b"\n") else None
        if state.offset and (state.offset > size or (state.head_hash is not None and head != state.head_hash)):
            state = JsonlState(rescans=state.rescans + 1)
        handle.seek(state.offset)
        data = handle.read()
    found: list[tuple[int, dict[str, Any]]] = []
    offset, number = state.offset, state.lines
    for raw in data.split(b"\n")[:-1]:
        offset += len(raw) + 1
        number += 1
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append((number, value))
    return found, JsonlState(offset, number, head if offset else None, dict(state.extra), state.rescans)
