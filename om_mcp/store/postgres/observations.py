"""Observation records and their windows on PostgreSQL (SQLite's observations.py, row for row)."""

from __future__ import annotations

import uuid
from typing import Any

from om_mcp.store.keys import parse_key, resource_key, thread_key
from om_mcp.store.postgres.search import doclen
from om_mcp.store.rows import ContextRead, DueWork, Group, Hints, Message, Record, RecordState, Snapshot
from om_mcp.store.sqlite.decode import (
    CHUNK_COLUMNS,
    GROUP_COLUMNS,
    MESSAGE_COLUMNS,
    RECORD_COLUMNS,
    REFLECTION_COLUMNS,
    THREAD_COLUMNS,
    buffered_reflection,
    chunk,
    group,
    message,
    now_iso,
    record,
    thread,
)
from om_mcp.store.sqlite.observations import OTHER_THREAD_MESSAGES, OTHER_THREADS

GROUP_FIELDS = (
    "kind",
    "thread_id",
    "first_seq",
    "last_seq",
    "first_message_id",
    "last_message_id",
    "text",
    "tokens",
    "observed_at",
)


async def ensure_record(conn: Any, key: str, resource_id: str, thread_id: str) -> bool:
    """Create the record if missing; True when it was created (and adopted what another scope knew)."""
    scope, _ = parse_key(key)
    stamp = now_iso()
    created = await conn.fetchval(
        "INSERT INTO om_records (key, scope, resource_id, thread_id, created_at, updated_at)"
        " VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (key) DO NOTHING RETURNING key",
        key,
        scope,
        resource_id,
        thread_id if scope == "thread" else None,
        stamp,
    )
    if created is not None:
        await _adopt(conn, key, scope, resource_id, thread_id)
    return created is not None


async def _adopt(conn: Any, key: str, scope: str, resource_id: str, thread_id: str) -> None:
    """A new record starts where the other scope's records stand (see sqlite.observations._adopt)."""
    if scope == "resource":
        threads = [r[0] for r in await conn.fetch("SELECT id FROM threads WHERE resource_id = $1", resource_id)]
        sources = {t: thread_key(t) for t in threads}
    else:
        sources = {thread_id: resource_key(resource_id)}
    groups: list[tuple[Any, ...]] = []
    for tid, source in sources.items():
        seq = await conn.fetchval("SELECT seq FROM om_cursors WHERE record_key = $1 AND thread_id = $2", source, tid)
        seq = seq or 0
        last = await conn.fetchval("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE thread_id = $1", tid)
        if not last:
            continue
        tokens, count = await conn.fetchrow(
            "SELECT COALESCE(SUM(tokens), 0), COUNT(*) FROM messages WHERE thread_id = $1 AND seq > $2 AND observable",
            tid,
            seq,
        )
        await conn.execute(
            "INSERT INTO om_cursors (record_key, thread_id, seq, pending_tokens, pending_messages, counted_seq)"
            " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (record_key, thread_id) DO UPDATE SET seq = excluded.seq,"
            " pending_tokens = excluded.pending_tokens, pending_messages = excluded.pending_messages,"
            " counted_seq = excluded.counted_seq, current_task = NULL, suggested_response = NULL",
            key,
            tid,
            seq,
            int(tokens),
            count,
            last,
        )
        groups += [
            tuple(r)
            for r in await conn.fetch(
                "SELECT g.kind, COALESCE(g.thread_id, r.thread_id), g.first_seq, g.last_seq, g.first_message_id,"
                " g.last_message_id, g.text, g.tokens, g.observed_at FROM om_groups g JOIN om_records r"
                " ON r.key = g.record_key AND r.generation = g.generation WHERE g.record_key = $1"
                " AND COALESCE(g.thread_id, r.thread_id) = $2",
                source,
                tid,
            )
        ]
    if groups:
        groups.sort(key=lambda g: g[2])
        await insert_groups(conn, key, 0, [dict(zip(GROUP_FIELDS, g)) for g in groups])


async def insert_groups(conn: Any, key: str, generation: int, groups: list[dict[str, Any]]) -> None:
    """Append groups at the end of a generation (indexed by their generated tsvector); keeps the token total."""
    position = await conn.fetchval(
        "SELECT COALESCE(MAX(position), -1) FROM om_groups WHERE record_key = $1 AND generation = $2", key, generation
    )
    stamp = now_iso()
    rows = [
        (
            uuid.uuid4().hex[:16],
            key,
            generation,
            position + offset,
            g["kind"],
            g["thread_id"],
            g["first_seq"],
            g["last_seq"],
            g["first_message_id"],
            g["last_message_id"],
            g["text"],
            g["tokens"],
            g["observed_at"],
            stamp,
            doclen(g["text"]),
        )
        for offset, g in enumerate(groups, start=1)
    ]
    await conn.executemany(
        "INSERT INTO om_groups (id, record_key, generation, position, kind, thread_id, first_seq, last_seq,"
        " first_message_id, last_message_id, text, tokens, observed_at, created_at, doclen)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
        rows,
    )
    await conn.execute(
        "UPDATE om_records SET observation_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM om_groups"
        " WHERE record_key = om_records.key AND generation = om_records.generation) WHERE key = $1",
        key,
    )


async def record_state(conn: Any, key: str, thread_id: str) -> RecordState:
    row = await conn.fetchrow(
        "SELECT r.generation, r.observation_tokens, r.last_buffered_at_tokens, r.reflection_blocked_at,"
        " (SELECT COALESCE(SUM(pending_tokens), 0) FROM om_cursors WHERE record_key = r.key),"
        " (SELECT COALESCE(SUM(pending_messages), 0) FROM om_cursors WHERE record_key = r.key),"
        " (SELECT pending_tokens FROM om_cursors WHERE record_key = r.key AND thread_id = $1),"
        " (SELECT pending_messages FROM om_cursors WHERE record_key = r.key AND thread_id = $1),"
        " (SELECT COUNT(*) FROM om_chunks WHERE record_key = r.key),"
        " (SELECT COALESCE(SUM(message_tokens), 0) FROM om_chunks WHERE record_key = r.key),"
        " (SELECT generation FROM om_buffered_reflections WHERE record_key = r.key)"
        " FROM om_records r WHERE r.key = $2",
        thread_id,
        key,
    )
    if row is None:
        return RecordState(key, 0, 0, 0, 0, 0, 0, 0, 0, 0, None, None)
    (
        generation,
        observation_tokens,
        buffered_at,
        blocked_at,
        pending,
        count,
        t_pending,
        t_count,
        chunks_,
        chunk_tokens,
        reflection_generation,
    ) = row
    return RecordState(
        key=key,
        generation=generation,
        observation_tokens=observation_tokens,
        pending_tokens=int(pending),
        pending_messages=int(count),
        thread_pending_tokens=t_pending or 0,
        thread_pending_messages=t_count or 0,
        last_buffered_at_tokens=buffered_at,
        chunk_count=chunks_,
        chunk_message_tokens=int(chunk_tokens),
        buffered_reflection_generation=reflection_generation,
        reflection_blocked_at=blocked_at,
    )


async def get_record(conn: Any, key: str) -> Record | None:
    row = await conn.fetchrow(f"SELECT {RECORD_COLUMNS} FROM om_records WHERE key = $1", key)
    if row is None:
        return None
    cursors = {r[0]: r[1] for r in await conn.fetch("SELECT thread_id, seq FROM om_cursors WHERE record_key = $1", key)}
    return record(tuple(row), cursors)


async def snapshot(conn: Any, key: str, thread_id: str) -> Snapshot | None:
    """The record, its windows, chunks and buffered reflection, and the thread; None before the first message."""
    found = await get_record(conn, key)
    if found is None:
        return None
    reflection = await conn.fetchrow(
        f"SELECT {REFLECTION_COLUMNS} FROM om_buffered_reflections WHERE record_key = $1", key
    )
    row = await conn.fetchrow(f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.id = $1", thread_id)
    hints = await conn.fetchrow(
        "SELECT current_task, suggested_response FROM om_cursors WHERE record_key = $1 AND thread_id = $2",
        key,
        thread_id,
    )
    return Snapshot(
        record=found,
        state=await record_state(conn, key, thread_id),
        chunks=await chunks(conn, key),
        buffered_reflection=buffered_reflection(tuple(reflection)) if reflection else None,
        thread=thread(tuple(row)) if row else None,
        hints=Hints(*hints) if hints else Hints(),
    )


async def chunks(conn: Any, key: str) -> list:
    rows = await conn.fetch(f"SELECT {CHUNK_COLUMNS} FROM om_chunks WHERE record_key = $1 ORDER BY first_seq", key)
    return [chunk(tuple(r)) for r in rows]


async def groups(conn: Any, key: str, generation: int | None = None) -> list[Group]:
    """A generation's groups in log order; the active one by default."""
    if generation is None:
        rows = await conn.fetch(
            f"SELECT {GROUP_COLUMNS} FROM om_groups g JOIN om_records r ON r.key = g.record_key"
            " AND r.generation = g.generation WHERE g.record_key = $1 ORDER BY g.position",
            key,
        )
    else:
        rows = await conn.fetch(
            f"SELECT {GROUP_COLUMNS} FROM om_groups g"
            " WHERE g.record_key = $1 AND g.generation = $2 ORDER BY g.position",
            key,
            generation,
        )
    return [group(tuple(r)) for r in rows]


async def generations(conn: Any, key: str) -> list[tuple[int, list[Group]]]:
    """Every generation, newest first."""
    out: dict[int, list[Group]] = {}
    rows = await conn.fetch(
        f"SELECT {GROUP_COLUMNS} FROM om_groups g WHERE g.record_key = $1 ORDER BY g.generation DESC, g.position", key
    )
    for row in rows:
        found = group(tuple(row))
        out.setdefault(found.generation, []).append(found)
    return list(out.items())


async def context(
    conn: Any,
    key: str,
    thread_id: str,
    budget: int,
    working_memory: tuple[str, str] | None,
    others_since: str | None = None,
) -> ContextRead | None:
    """Everything the agent sees, in one snapshot: record, log, window, other threads, working memory.
    Other threads: the most recently active ones with unobserved messages (active since
    `others_since`, an ISO time, when given)."""
    snap = await snapshot(conn, key, thread_id)
    if snap is None:
        return None
    cursor = snap.record.cursors.get(thread_id, 0)
    others: dict[str, list[Message]] = {}
    if snap.record.scope == "resource":
        busy = await conn.fetch(
            "SELECT c.thread_id, c.seq FROM om_cursors c JOIN threads t ON t.id = c.thread_id"
            " WHERE c.record_key = $1 AND c.thread_id <> $2 AND c.pending_messages > 0 AND t.updated_at >= $3"
            " ORDER BY t.updated_at DESC LIMIT $4",
            key,
            thread_id,
            others_since or "",
            OTHER_THREADS,
        )
        for other, seq in busy:
            recent = await conn.fetch(
                f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = $1 AND m.seq > $2 AND m.observable"
                " ORDER BY m.seq DESC LIMIT $3",
                other,
                seq,
                OTHER_THREAD_MESSAGES,
            )
            others[other] = [message(tuple(r)) for r in reversed(recent)]
    memory = None
    if working_memory is not None:
        table, ident = working_memory
        if table not in ("resources", "threads"):
            raise ValueError(f"working memory lives in resources or threads, not {table!r}")
        memory = await conn.fetchval(f"SELECT working_memory FROM {table} WHERE id = $1", ident)
    return ContextRead(
        snapshot=snap,
        groups=await groups(conn, key),
        window=await window(conn, thread_id, cursor, budget),
        other_threads=others,
        working_memory=memory,
    )


async def window(conn: Any, thread_id: str, cursor: int, budget: int) -> list[Message]:
    """The newest unobserved messages whose stored token counts fit `budget` (at least one), oldest first.
    Sizes are read newest first, a page at a time, stopping at the budget as SQLite's stepped scan does."""
    used, first, before = 0, None, None
    while True:
        sizes = await conn.fetch(
            "SELECT seq, tokens FROM messages WHERE thread_id = $1 AND seq > $2 AND observable"
            " AND ($3::bigint IS NULL OR seq < $3) ORDER BY seq DESC LIMIT 200",
            thread_id,
            cursor,
            before,
        )
        for seq, tokens in sizes:
            if first is not None and used + tokens > budget:
                sizes = []
                break
            used += tokens
            first = seq
        else:
            if len(sizes) == 200:
                before = first
                continue
        break
    if first is None:
        return []
    rows = await conn.fetch(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = $1 AND m.seq >= $2 AND m.observable"
        " ORDER BY m.seq",
        thread_id,
        first,
    )
    return [message(tuple(r)) for r in rows]


async def unobserved(
    conn: Any, key: str, thread_id: str, *, after_seq: int | None = None, max_tokens: int | None = None
) -> list[Message]:
    """A thread's observable messages after the record's cursor (and `after_seq`), oldest first,
    up to `max_tokens` (at least one)."""
    cursor = await conn.fetchval("SELECT seq FROM om_cursors WHERE record_key = $1 AND thread_id = $2", key, thread_id)
    start = max(cursor or 0, after_seq or 0)
    out: list[Message] = []
    used = 0
    # Read in pages so a long backlog is not fetched whole for a small budget.
    while True:
        rows = await conn.fetch(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = $1 AND m.seq > $2 AND m.observable"
            " ORDER BY m.seq LIMIT 200",
            thread_id,
            start,
        )
        for r in rows:
            if max_tokens is not None and out and used + r[9] > max_tokens:
                return out
            out.append(message(tuple(r)))
            used += r[9]
        if len(rows) < 200:
            return out
        start = rows[-1][0]


async def busy_threads(conn: Any, key: str) -> list[tuple[str, int, int]]:
    """(thread_id, cursor seq, pending tokens) of a record's threads with unobserved messages, busiest first."""
    rows = await conn.fetch(
        "SELECT thread_id, seq, pending_tokens FROM om_cursors WHERE record_key = $1 AND pending_messages > 0"
        " ORDER BY pending_tokens DESC",
        key,
    )
    return [tuple(r) for r in rows]  # type: ignore[misc]


async def due(conn: Any, min_pending: int, min_observation_tokens: int) -> list[DueWork]:
    """Records that may need a cycle. Records some process holds a live lease on are left out (their
    cycle is running), and so are records locked by a commit right now (SKIP LOCKED): replicas polling
    together do not all line up behind the same work."""
    rows = await conn.fetch(
        "SELECT r.key, r.resource_id, COALESCE(r.thread_id, (SELECT c2.thread_id FROM om_cursors c2"
        "  WHERE c2.record_key = r.key ORDER BY c2.pending_tokens DESC LIMIT 1)), p.pending"
        " FROM om_records r CROSS JOIN LATERAL (SELECT COALESCE(SUM(c.pending_tokens), 0) AS pending"
        "  FROM om_cursors c WHERE c.record_key = r.key) p"
        " WHERE (p.pending >= $1 OR r.observation_tokens >= $2) AND NOT EXISTS (SELECT 1 FROM om_leases l"
        "  WHERE l.key = r.key AND l.expires_at > extract(epoch FROM clock_timestamp()))"
        " FOR UPDATE OF r SKIP LOCKED",
        min_pending,
        min_observation_tokens,
    )
    return [DueWork(key, resource, thread_id, int(pending)) for key, resource, thread_id, pending in rows if thread_id]


async def thread_hints(conn: Any, key: str, thread_ids: list[str]) -> dict[str, Hints]:
    """Each thread's continuation hints under a record."""
    if not thread_ids:
        return {}
    rows = await conn.fetch(
        "SELECT thread_id, current_task, suggested_response FROM om_cursors WHERE record_key = $1"
        " AND thread_id = ANY ($2::text[])",
        key,
        thread_ids,
    )
    return {t: Hints(task, response) for t, task, response in rows}
