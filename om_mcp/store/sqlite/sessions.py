"""Host sessions (threads a hook records): which ones are over and still hold
unobserved messages, so a background worker observes their tail.

A hook marks its thread's metadata with `host` when it creates it, and with
`ended_at` when the host says the session ended. A session counts as settled
when it ended after its last message, or when it has been quiet for a while
(a host that crashed sends no end).
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

from om_mcp.store.rows import SettledThread

# A host session with no new message for this long counts as over.
QUIET_SECONDS = 600.0
# The lease a live process holds while it drains background work (a server's
# poll loop, `om-mcp worker`). A hook that finds it free and work due starts a worker.
WORKER_LEASE = ("worker", "drain")


def quiet_before(seconds: float = QUIET_SECONDS) -> str:
    """The ISO time before which a session without messages counts as quiet."""
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat()


def settled_threads(
    conn: sqlite3.Connection, quiet_before: str, record_key: str | None = None, limit: int = 50
) -> list[SettledThread]:
    """Host threads with unobserved messages that ended, or saw no message since `quiet_before` (ISO time)."""
    sql = (
        "SELECT c.record_key, c.thread_id, t.resource_id, c.pending_messages, c.pending_tokens, t.updated_at"
        " FROM om_cursors c JOIN threads t ON t.id = c.thread_id"
        " WHERE c.pending_messages > 0 AND json_extract(t.metadata, '$.host') IS NOT NULL"
        " AND (json_extract(t.metadata, '$.ended_at') >= t.updated_at OR t.updated_at < ?)"
    )
    params: list[object] = [quiet_before]
    if record_key is not None:
        sql += " AND c.record_key = ?"
        params.append(record_key)
    rows = conn.execute(sql + " ORDER BY t.updated_at LIMIT ?", (*params, limit)).fetchall()
    return [SettledThread(*row) for row in rows]
