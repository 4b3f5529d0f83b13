"""Reads for looking at a memory: threads with their windows and last cycle, the
inputs of the windows-over-time plots, records due for work, what it holds.

Each is a few statements, bounded by a limit, so `om-mcp status` and the status
page stay fast on a large memory: a page of threads costs two statements (the
threads with their newest cycle's event id, then those events), on either backend.
"""

from __future__ import annotations

from typing import Any

from om_mcp.store.access import Access
from om_mcp.store.decode import EVENT_COLUMNS, THREAD_COLUMNS, event, thread
from om_mcp.store.rows import Scope, Stats
from om_mcp.store.summaries import CYCLE_END_TYPES, SeriesInputs, ThreadState
from om_mcp.store.tx import Tx

_ENDS = ",".join(f"'{t}'" for t in CYCLE_END_TYPES)
_WIDTH = len(THREAD_COLUMNS.split(","))
PROMPT_CHARS = 300  # of the first user message: enough for a title, never a whole pasted file


def _record_key_sql(scope: Scope) -> str:
    return "'thread:' || t.id" if scope == "thread" else "'resource:' || t.resource_id"


async def thread_states(
    tx: Tx,
    scope: Scope,
    *,
    access: Access,
    resource_id: str | None = None,
    thread_id: str | None = None,
    limit: int = 200,
) -> list[ThreadState]:
    """Threads newest-updated first (of the resources `access` grants; of one resource, or one thread),
    with their record's windows under `scope`, their newest cycle-ending event and the start of their
    first prompt (each an indexed lookup on `messages_by_thread`, as `recent_sessions` reads it)."""
    within, granted = access.sql_filter("t.resource_id", 1)
    where: list[str] = [within]
    params: list[object] = list(granted)
    if resource_id is not None:
        params.append(resource_id)
        where.append(f"t.resource_id = ${len(params)}")
    if thread_id is not None:
        params.append(thread_id)
        where.append(f"t.id = ${len(params)}")
    params.append(limit)
    # A retried cycle's failure is not where the record stands.
    retrying = f"COALESCE(CAST({tx.json_field('e.payload', 'retrying')} AS TEXT), 'false') IN ('false', '0')"
    rows = await tx.fetch(
        f"SELECT {THREAD_COLUMNS}, {_record_key_sql(scope)}, COALESCE(c.pending_tokens, 0),"
        " COALESCE(c.pending_messages, 0), COALESCE(r.observation_tokens, 0), COALESCE(r.generation, 0),"
        " r.last_observed_at,"
        f" (SELECT e.id FROM om_events e WHERE e.thread_id = t.id AND e.type IN ({_ENDS}) AND {retrying}"
        "  ORDER BY e.id DESC LIMIT 1),"
        f" (SELECT SUBSTR(m.body, 1, {PROMPT_CHARS}) FROM messages m WHERE m.thread_id = t.id AND m.role = 'user'"
        "  ORDER BY m.seq LIMIT 1)"
        f" FROM threads t LEFT JOIN om_records r ON r.key = {_record_key_sql(scope)}"
        " LEFT JOIN om_cursors c ON c.record_key = r.key AND c.thread_id = t.id"
        f" WHERE {' AND '.join(where)} ORDER BY t.updated_at DESC, t.id LIMIT ${len(params)}",
        *params,
    )
    ids = [row[-2] for row in rows if row[-2] is not None]
    events = {
        e.id: e
        for e in map(event, await tx.fetch(f"SELECT {EVENT_COLUMNS} FROM om_events WHERE id = ANY ($1::bigint[])", ids))
    }
    out = []
    for row in rows:
        key, pending, count, observation_tokens, generation, observed_at, event_id, prompt = row[_WIDTH:]
        out.append(
            ThreadState(
                thread=thread(row[:_WIDTH]),
                record_key=key,
                unobserved_tokens=int(pending),
                unobserved_messages=int(count),
                observation_tokens=observation_tokens,
                generation=generation,
                last_observed_at=observed_at,
                last_cycle=events.get(event_id),
                first_prompt=" ".join((prompt or "").split()) or None,
            )
        )
    return out


async def series_inputs(tx: Tx, key: str, limit_events: int = 5000) -> SeriesInputs:
    """The record's observable messages (all its threads) and its newest cycle-ending events."""
    scope, _, ident = key.partition(":")
    threads = (
        [ident]
        if scope == "thread"
        else [r[0] for r in await tx.fetch("SELECT id FROM threads WHERE resource_id = $1", ident)]
    )
    messages = await tx.fetch(
        "SELECT seq, created_at, tokens FROM messages WHERE thread_id = ANY ($1::text[]) AND observable ORDER BY seq",
        threads,
    )
    events = await tx.fetch(
        f"SELECT {EVENT_COLUMNS} FROM om_events WHERE thread_id = ANY ($1::text[]) AND record_key = $2"
        f" AND type IN ({_ENDS}) ORDER BY id DESC LIMIT $3",
        threads,
        key,
        limit_events,
    )
    return SeriesInputs(
        messages=[(int(seq), created_at, tokens) for seq, created_at, tokens in messages],
        events=[event(r) for r in reversed(events)],
    )


async def pending_records(tx: Tx) -> list[tuple[str, int, int]]:
    """(record key, unobserved tokens, buffered chunks) of every record with work left."""
    rows = await tx.fetch(
        "SELECT key, p, n FROM (SELECT r.key,"
        " (SELECT COALESCE(SUM(pending_tokens), 0) FROM om_cursors c WHERE c.record_key = r.key) AS p,"
        " (SELECT COUNT(*) FROM om_chunks k WHERE k.record_key = r.key) AS n FROM om_records r) s"
        " WHERE p > 0 OR n > 0 ORDER BY p DESC, key"
    )
    return [(key, int(p), int(n)) for key, p, n in rows]


async def stats(tx: Tx, **where: Any) -> Stats:
    """What the memory holds; `where` (the path, its size, the schema version, ...) is the backend's."""
    row = await tx.fetchrow(
        "SELECT (SELECT COUNT(*) FROM resources), (SELECT COUNT(*) FROM threads),"
        " (SELECT COALESCE(SUM(message_count), 0) FROM threads),"
        " (SELECT COUNT(*) FROM om_groups g JOIN om_records r ON r.key = g.record_key AND r.generation = g.generation),"
        " (SELECT COUNT(*) FROM om_chunks), (SELECT COUNT(*) FROM om_events),"
        " (SELECT COALESCE(SUM(pending_tokens), 0) FROM om_cursors)"
    )
    resources, threads, messages, groups, chunks, events, pending = (int(v) for v in row or ())
    return Stats(
        **where,
        resources=resources,
        threads=threads,
        messages=messages,
        groups=groups,
        chunks=chunks,
        events=events,
        pending_tokens=pending,
    )
