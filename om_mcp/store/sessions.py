"""Host sessions (threads a hook records): which ones are over and still hold
unobserved messages, so a background worker observes their tail.

A hook marks its thread's metadata with `host` when it creates it, and with
`ended_at` when the host says the session ended. A session counts as settled
when it ended after its last message, or when it has been quiet for a while
(a host that crashed sends no end). A SessionStart with no observations to
give lists the project's recent sessions instead (`recent_sessions`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from om_mcp.store.rows import SessionSummary, SettledThread
from om_mcp.store.tx import Tx

# A host session with no new message for this long counts as over.
QUIET_SECONDS = 600.0
# The lease a live process holds while it drains background work (a server's
# poll loop, `om-mcp worker`). A hook that finds it free and work due starts a worker.
WORKER_LEASE = ("worker", "drain")


def quiet_before(seconds: float = QUIET_SECONDS) -> str:
    """The ISO time before which a session without messages counts as quiet."""
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat()


async def settled_threads(
    tx: Tx, quiet_before: str, record_key: str | None = None, limit: int = 50
) -> list[SettledThread]:
    """Host threads with unobserved messages that ended, or saw no message since `quiet_before` (ISO time)."""
    sql = (
        "SELECT c.record_key, c.thread_id, t.resource_id, c.pending_messages, c.pending_tokens, t.updated_at"
        " FROM om_cursors c JOIN threads t ON t.id = c.thread_id"
        f" WHERE c.pending_messages > 0 AND {tx.json_field('t.metadata', 'host')} IS NOT NULL"
        f" AND ({tx.json_field('t.metadata', 'ended_at')} >= t.updated_at OR t.updated_at < $1)"
    )
    params: list[object] = [quiet_before]
    if record_key is not None:
        params.append(record_key)
        sql += f" AND c.record_key = ${len(params)}"
    params.append(limit)
    rows = await tx.fetch(sql + f" ORDER BY t.updated_at LIMIT ${len(params)}", *params)
    return [SettledThread(*row) for row in rows]


async def lending_record(tx: Tx, own_key: str, resource_id: str) -> str | None:
    """The thread-scope record whose log a new session of the resource (project) sees: its own
    once it has one, else the most recently observed session's; None when none has a log."""
    return await tx.fetchval(
        "SELECT r.key FROM om_records r WHERE r.resource_id = $1 AND r.scope = 'thread'"
        " AND (r.observation_tokens > 0 OR EXISTS (SELECT 1 FROM om_chunks c WHERE c.record_key = r.key))"
        " ORDER BY r.key = $2 DESC, COALESCE(r.last_observed_at, '') DESC, r.updated_at DESC LIMIT 1",
        resource_id,
        own_key,
    )


async def session_hints(tx: Tx, key: str, session_id: str) -> tuple[str | None, str | None]:
    """(current task, suggested response): this session's, else the record's most recently active session's."""
    row = await tx.fetchrow(
        "SELECT c.current_task, c.suggested_response FROM om_cursors c JOIN threads t ON t.id = c.thread_id"
        " WHERE c.record_key = $1 AND (c.current_task IS NOT NULL OR c.suggested_response IS NOT NULL)"
        " ORDER BY c.thread_id = $2 DESC, t.updated_at DESC LIMIT 1",
        key,
        session_id,
    )
    return (row[0], row[1]) if row else (None, None)


async def recent_sessions(
    tx: Tx, resource_id: str, exclude_thread: str | None = None, limit: int = 5
) -> list[SessionSummary]:
    """The resource's threads other than `exclude_thread` that hold messages, most recently active
    first: when each started and last changed, its title, first and last user prompt, and how many
    messages it holds (each one indexed lookup on `messages_by_thread`)."""
    rows = await tx.fetch(
        "SELECT t.id, t.title, t.created_at, t.updated_at,"
        " (SELECT COUNT(*) FROM messages m WHERE m.thread_id = t.id),"
        " (SELECT body FROM messages m WHERE m.thread_id = t.id AND m.role = 'user' ORDER BY m.seq LIMIT 1),"
        " (SELECT body FROM messages m WHERE m.thread_id = t.id AND m.role = 'user' ORDER BY m.seq DESC LIMIT 1)"
        " FROM threads t WHERE t.resource_id = $1 AND ($2::text IS NULL OR t.id <> $2)"
        " ORDER BY t.updated_at DESC LIMIT $3",
        resource_id,
        exclude_thread,
        limit,
    )
    return [
        SessionSummary(row[0], row[1], row[2], row[3], int(row[4]), _one_line(row[5]), _one_line(row[6]))
        for row in rows
        if row[4]
    ]


def _one_line(body: str | None) -> str | None:
    """A stored message's searchable text on one line, or None when it has none."""
    return " ".join((body or "").split()) or None
