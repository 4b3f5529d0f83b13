"""Reads for looking at a memory on PostgreSQL: threads with their windows and last
cycle, the inputs of the windows-over-time plots, records due for work (SQLite's
overview.py, row for row).

Each is one statement or a few, bounded by a limit: on PostgreSQL every statement
is a round trip, so a thread's newest cycle comes in the same statement as the
thread (a LATERAL join), not one query per thread as on SQLite.
"""

from __future__ import annotations

from typing import Any

from om_mcp.store.decode import EVENT_COLUMNS, THREAD_COLUMNS, event, thread
from om_mcp.store.rows import Scope
from om_mcp.store.summaries import CYCLE_END_TYPES, SeriesInputs, ThreadState

_ENDS = ",".join(f"'{t}'" for t in CYCLE_END_TYPES)
_LAST_EVENT = ", ".join(f"e.{c.strip()}" for c in EVENT_COLUMNS.split(","))
# A retried cycle's failure is not where the record stands (SQLite: json_extract(...) = 0).
# `json`, not `jsonb`: it accepts any JSON text the payload holds (jsonb refuses \u0000).
_NOT_RETRYING = "COALESCE(payload::json ->> 'retrying', 'false') IN ('false', '0')"


def _record_key_sql(scope: Scope) -> str:
    return "'thread:' || t.id" if scope == "thread" else "'resource:' || t.resource_id"


async def thread_states(
    conn: Any, scope: Scope, *, resource_id: str | None = None, thread_id: str | None = None, limit: int = 200
) -> list[ThreadState]:
    """Threads newest-updated first (of one resource, or one thread), with their record's
    windows under `scope` and their newest cycle-ending event."""
    where: list[str] = []
    params: list[object] = []
    if resource_id is not None:
        params.append(resource_id)
        where.append(f"t.resource_id = ${len(params)}")
    if thread_id is not None:
        params.append(thread_id)
        where.append(f"t.id = ${len(params)}")
    params.append(limit)
    rows = await conn.fetch(
        f"SELECT {THREAD_COLUMNS}, {_record_key_sql(scope)}, COALESCE(c.pending_tokens, 0),"
        " COALESCE(c.pending_messages, 0), COALESCE(r.observation_tokens, 0), COALESCE(r.generation, 0),"
        f" r.last_observed_at, {_LAST_EVENT}"
        f" FROM threads t LEFT JOIN om_records r ON r.key = {_record_key_sql(scope)}"
        " LEFT JOIN om_cursors c ON c.record_key = r.key AND c.thread_id = t.id"
        f" LEFT JOIN LATERAL (SELECT {EVENT_COLUMNS} FROM om_events WHERE thread_id = t.id AND type IN ({_ENDS})"
        f"  AND {_NOT_RETRYING} ORDER BY id DESC LIMIT 1) e ON true"
        f" {'WHERE ' + ' AND '.join(where) if where else ''}"
        f" ORDER BY t.updated_at DESC, t.id LIMIT ${len(params)}",
        *params,
    )
    width = len(THREAD_COLUMNS.split(","))
    out = []
    for row in rows:
        values = tuple(row)
        key, pending, count, observation_tokens, generation, observed_at = values[width : width + 6]
        last = values[width + 6 :]
        out.append(
            ThreadState(
                thread=thread(values[:width]),
                record_key=key,
                unobserved_tokens=int(pending),
                unobserved_messages=int(count),
                observation_tokens=observation_tokens,
                generation=generation,
                last_observed_at=observed_at,
                last_cycle=event(last) if last[0] is not None else None,
            )
        )
    return out


async def series_inputs(conn: Any, key: str, limit_events: int = 5000) -> SeriesInputs:
    """The record's observable messages (all its threads) and its newest cycle-ending events."""
    scope, _, ident = key.partition(":")
    threads = (
        [ident]
        if scope == "thread"
        else [r[0] for r in await conn.fetch("SELECT id FROM threads WHERE resource_id = $1", ident)]
    )
    messages = await conn.fetch(
        "SELECT seq, created_at, tokens FROM messages WHERE thread_id = ANY($1::text[]) AND observable ORDER BY seq",
        threads,
    )
    events = await conn.fetch(
        f"SELECT {EVENT_COLUMNS} FROM om_events WHERE thread_id = ANY($1::text[]) AND record_key = $2"
        f" AND type IN ({_ENDS}) ORDER BY id DESC LIMIT $3",
        threads,
        key,
        limit_events,
    )
    return SeriesInputs(
        messages=[(int(seq), created_at, tokens) for seq, created_at, tokens in messages],
        events=[event(tuple(r)) for r in reversed(events)],
    )


async def pending_records(conn: Any) -> list[tuple[str, int, int]]:
    """(record key, unobserved tokens, buffered chunks) of every record with work left."""
    rows = await conn.fetch(
        "SELECT key, p, n FROM (SELECT r.key,"
        " (SELECT COALESCE(SUM(pending_tokens), 0) FROM om_cursors c WHERE c.record_key = r.key) AS p,"
        " (SELECT COUNT(*) FROM om_chunks k WHERE k.record_key = r.key) AS n FROM om_records r) s"
        " WHERE p > 0 OR n > 0 ORDER BY p DESC, key"
    )
    return [(key, int(p), int(n)) for key, p, n in rows]
