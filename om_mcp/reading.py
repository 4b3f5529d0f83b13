"""What reading a host's session gives, and where the next read starts: the one shape every
host's reader returns (`hosts/`) and the recorder stores (`engine/recorder/`).

A reader is handed the position the last read stopped at and returns the messages after it,
with the position to save. `state` is the reader's own (JSON-able) memory of the file: offsets,
the first line's hash, tool names still waiting for their results; the recorder keeps it with
the session (the store's `ingest_state`) without looking inside.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Position:
    """Where the last read of a session stopped (all zero: read from the start)."""

    offset: int = 0  # bytes of the file consumed (0 for a reader that folds the whole file)
    last_id: str | None = None  # the last message (or record) read
    state: dict[str, Any] | None = None  # the reader's own state, plain JSON

    @property
    def started(self) -> bool:
        """Has anything been read before?"""
        return bool(self.offset or self.last_id)


@dataclass
class Reading:
    """One read: the messages after the position (plain dicts: id, role, content, metadata,
    created_at), the position to save, and what the read met on the way."""

    messages: list[dict[str, Any]]
    position: Position
    rescanned: bool = False  # the file was found rewritten or truncated and read again from the top
    more: bool = False  # the read stopped at its bound: what is left waits for the next read
    unreadable: int = 0  # lines that were not JSON objects: skipped, never read again
    problems: list[str] = field(default_factory=list)  # one line each, for the hook's log
