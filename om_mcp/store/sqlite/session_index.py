"""The recent sessions of a project, for a SessionStart that has no observations to give.

One row per thread of the resource, newest first: when it started and last
changed, its title, its first and last user prompt and how many messages it
holds. The hook reads it on SQLite (the only store it writes); each count and
prompt is one indexed lookup on `messages_by_thread`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass


@dataclass(frozen=True)
class SessionSummary:
    thread_id: str
    title: str | None
    started_at: str
    updated_at: str
    messages: int
    first_prompt: str | None
    last_prompt: str | None


def recent_sessions(
    conn: sqlite3.Connection, resource_id: str, exclude_thread: str | None = None, limit: int = 5
) -> list[SessionSummary]:
    """The resource's threads other than `exclude_thread`, most recently active first."""
    rows = conn.execute(
        "SELECT t.id, t.title, t.created_at, t.updated_at,"
        " (SELECT COUNT(*) FROM messages m WHERE m.thread_id = t.id),"
        " (SELECT body FROM messages m WHERE m.thread_id = t.id AND m.role = 'user' ORDER BY m.seq LIMIT 1),"
        " (SELECT body FROM messages m WHERE m.thread_id = t.id AND m.role = 'user' ORDER BY m.seq DESC LIMIT 1)"
        " FROM threads t WHERE t.resource_id = ? AND t.id IS NOT ? ORDER BY t.updated_at DESC LIMIT ?",
        (resource_id, exclude_thread, limit),
    ).fetchall()
    return [
        SessionSummary(row[0], row[1], row[2], row[3], int(row[4]), _text(row[5]), _text(row[6]))
        for row in rows
        if row[4]
    ]


def _text(body: str | None) -> str | None:
    """A stored message's searchable text on one line, or None when it has none."""
    flat = " ".join((body or "").split())
    return flat or None
