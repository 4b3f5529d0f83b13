"""Reads for looking at a memory: threads with their windows and last cycle, the
inputs of the windows-over-time plots, records due for work.

Each is one statement or a few, bounded by a limit, so `om-mcp status` and the
status page stay fast on a large file.
"""

from __future__ import annotations

import sqlite3

from om_mcp.store.decode import EVENT_COLUMNS, THREAD_COLUMNS, event, thread
from om_mcp.store.rows import Scope
from om_mcp.store.summaries import CYCLE_END_TYPES, SeriesInputs, ThreadState

_ENDS = ",".join(f"'{t}'" for t in CYCLE_END_TYPES)


def _record_key_sql(scope: Scope) -> str:
    return "'thread:' || t.id" if scope == "thread" else "'resource:' || t.resource_id"


def thread_states(
    conn: sqlite3.Connection,
    scope: Scope,
    *,
    resource_id: str | None = None,
    thread_id: str | None = None,
    limit: int = 200,
) -> list[ThreadState]:
    """Threads newest-updated first (of one resource, or one thread), with their record's
    windows under `scope` and their newest cycle-ending event."""
    where, params = [], []
    if resource_id is not None:
        where.append("t.resource_id = ?")
        params.append(resource_id)
    if thread_id is not None:
        where.append("t.id = ?")
        params.append(thread_id)
    rows = conn.execute(
        f"SELECT {THREAD_COLUMNS}, {_record_key_sql(scope)}, COALESCE(c.pending_tokens, 0),"
        " COALESCE(c.pending_messages, 0), COALESCE(r.observation_tokens, 0), COALESCE(r.generation, 0),"
        " r.last_observed_at,"
        f" (SELECT e.id FROM om_events e WHERE e.thread_id = t.id AND e.type IN ({_ENDS})"
        "  AND COALESCE(json_extract(e.payload, '$.retrying'), 0) = 0 ORDER BY e.id DESC LIMIT 1)"
        f" FROM threads t LEFT JOIN om_records r ON r.key = {_record_key_sql(scope)}"
        " LEFT JOIN om_cursors c ON c.record_key = r.key AND c.thread_id = t.id"
        f" {'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY t.updated_at DESC, t.id LIMIT ?",
        (*params, limit),
    ).fetchall()
    out = []
    for row in rows:
        width = len(THREAD_COLUMNS.split(","))
        key, pending, count, observation_tokens, generation, observed_at, event_id = row[width:]
        last = (
            conn.execute(f"SELECT {EVENT_COLUMNS} FROM om_events WHERE id = ?", (event_id,)).fetchone()
            if event_id is not None
            else None
        )
        out.append(
            ThreadState(
                thread=thread(row[:width]),
                record_key=key,
                unobserved_tokens=pending,
                unobserved_messages=count,
                observation_tokens=observation_tokens,
                generation=generation,
                last_observed_at=observed_at,
                last_cycle=event(last) if last else None,
            )
        )
    return out


def series_inputs(conn: sqlite3.Connection, key: str, limit_events: int = 5000) -> SeriesInputs:
    """The record's observable messages (all its threads) and its newest cycle-ending events."""
    scope, _, ident = key.partition(":")
    threads = (
        [ident]
        if scope == "thread"
        else [r[0] for r in conn.execute("SELECT id FROM threads WHERE resource_id = ?", (ident,))]
    )
    messages: list[tuple[int, str, int]] = []
    events = []
    for thread_id in threads:
        messages += conn.execute(
            "SELECT seq, created_at, tokens FROM messages WHERE thread_id = ? AND observable ORDER BY seq", (thread_id,)
        ).fetchall()
        events += conn.execute(
            f"SELECT {EVENT_COLUMNS} FROM om_events WHERE thread_id = ? AND record_key = ? AND type IN ({_ENDS})"
            " ORDER BY id DESC LIMIT ?",
            (thread_id, key, limit_events),
        ).fetchall()
    messages.sort()
    found = sorted((event(r) for r in events), key=lambda e: e.id)[-limit_events:]
    return SeriesInputs(messages=messages, events=found)


def pending_records(conn: sqlite3.Connection) -> list[tuple[str, int, int]]:
    """(record key, unobserved tokens, buffered chunks) of every record with work left."""
    rows = conn.execute(
        "SELECT r.key, (SELECT COALESCE(SUM(pending_tokens), 0) FROM om_cursors c WHERE c.record_key = r.key) AS p,"
        " (SELECT COUNT(*) FROM om_chunks k WHERE k.record_key = r.key) AS n FROM om_records r"
        " WHERE p > 0 OR n > 0 ORDER BY p DESC, r.key"
    ).fetchall()
    return [tuple(r) for r in rows]  # type: ignore[misc]
