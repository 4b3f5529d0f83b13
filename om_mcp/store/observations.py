"""Observation records and their windows: what a turn and a cycle read.

Reads here are bounded by design: running totals on the cursors say how much is
unobserved, and the context window is found by a reverse scan, a page at a time,
that stops once its token budget is full, so a backlog of 100k messages costs
what 100 do.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from om_mcp.store.decode import (
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
from om_mcp.store.keys import parse_key, resource_key, thread_key
from om_mcp.store.rows import RETIRED, Chunk, ContextRead, DueWork, Group, Hints, Message, Record, RecordState, Snapshot
from om_mcp.store.tx import Row, Tx

OTHER_THREADS = 5  # resource scope: how many other busy threads the context shows
ARCHIVE_SHOWN = 50  # archived days read for the context's catalog (it shows what fits its budget)
OTHER_THREAD_MESSAGES = 10

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


async def ensure_record(tx: Tx, key: str, resource_id: str, thread_id: str) -> bool:
    """Create the record if missing; True when it was created (and adopted what another scope knew)."""
    scope, _ = parse_key(key)
    stamp = now_iso()
    created = (
        await tx.execute(
            "INSERT INTO om_records (key, scope, resource_id, thread_id, created_at, updated_at)"
            " VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (key) DO NOTHING",
            key,
            scope,
            resource_id,
            thread_id if scope == "thread" else None,
            stamp,
        )
        == 1
    )
    if created:
        await _adopt(tx, key, scope, resource_id, thread_id)
    return created


async def _adopt(tx: Tx, key: str, scope: str, resource_id: str, thread_id: str) -> None:
    """A new record starts where the other scope's records stand, so switching the
    scope neither observes history twice nor forgets the log made so far."""
    if scope == "resource":
        threads = [r[0] for r in await tx.fetch("SELECT id FROM threads WHERE resource_id = $1", resource_id)]
        sources = {t: thread_key(t) for t in threads}
    else:
        sources = {thread_id: resource_key(resource_id)}
    groups: list[Any] = []
    for tid, source in sources.items():
        seq = await tx.fetchval("SELECT seq FROM om_cursors WHERE record_key = $1 AND thread_id = $2", source, tid)
        seq = seq or 0
        last = await tx.fetchval("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE thread_id = $1", tid)
        if not last:
            continue
        tokens, count = await unobserved_between(tx, tid, seq, last)
        await tx.execute(
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
        groups += await tx.fetch(
            "SELECT g.kind, COALESCE(g.thread_id, r.thread_id), g.first_seq, g.last_seq, g.first_message_id,"
            " g.last_message_id, g.text, g.tokens, g.observed_at FROM om_groups g JOIN om_records r"
            " ON r.key = g.record_key AND r.generation = g.generation WHERE g.record_key = $1"
            " AND COALESCE(g.thread_id, r.thread_id) = $2",
            source,
            tid,
        )
    if groups:
        groups.sort(key=lambda g: g[2])
        await insert_groups(tx, key, 0, [dict(zip(GROUP_FIELDS, g)) for g in groups])


async def unobserved_between(tx: Tx, thread_id: str, after_seq: int, through_seq: int) -> tuple[int, int]:
    """(tokens, count) of a thread's observable messages after one seq, through another."""
    row = await tx.fetchrow(
        "SELECT COALESCE(SUM(tokens), 0), COUNT(*) FROM messages"
        " WHERE thread_id = $1 AND seq > $2 AND seq <= $3 AND observable",
        thread_id,
        after_seq,
        through_seq,
    )
    assert row is not None  # an aggregate: always one row
    return int(row[0]), int(row[1])


async def insert_groups(tx: Tx, key: str, generation: int, groups: list[dict[str, Any]]) -> None:
    """Append groups at the end of a generation, and index them; keeps the record's token total."""
    position = await tx.fetchval(
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
            g.get("retired_by"),
            g.get("retired_reason"),
            g.get("replaced_by"),
        )
        for offset, g in enumerate(groups, start=1)
    ]
    await tx.executemany(
        "INSERT INTO om_groups (id, record_key, generation, position, kind, thread_id, first_seq, last_seq,"
        " first_message_id, last_message_id, text, tokens, observed_at, created_at, retired_by, retired_reason,"
        " replaced_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
        rows,
    )
    await tx.index_groups(key, [(r[0], r[10]) for r in rows])
    await tx.execute(
        "UPDATE om_records SET observation_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM om_groups"
        " WHERE record_key = om_records.key AND generation = om_records.generation) WHERE key = $1",
        key,
    )


async def record_state(tx: Tx, key: str, thread_id: str) -> RecordState:
    row = await tx.fetchrow(
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


async def get_record(tx: Tx, key: str) -> Record | None:
    row = await tx.fetchrow(f"SELECT {RECORD_COLUMNS} FROM om_records WHERE key = $1", key)
    if row is None:
        return None
    cursors = {r[0]: r[1] for r in await tx.fetch("SELECT thread_id, seq FROM om_cursors WHERE record_key = $1", key)}
    return record(row, cursors)


async def snapshot(tx: Tx, key: str, thread_id: str) -> Snapshot | None:
    """The record, its windows, chunks and buffered reflection, and the thread; None before the first message."""
    found = await get_record(tx, key)
    if found is None:
        return None
    reflection = await tx.fetchrow(
        f"SELECT {REFLECTION_COLUMNS} FROM om_buffered_reflections WHERE record_key = $1", key
    )
    row = await tx.fetchrow(f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.id = $1", thread_id)
    hints = await tx.fetchrow(
        "SELECT current_task, suggested_response FROM om_cursors WHERE record_key = $1 AND thread_id = $2",
        key,
        thread_id,
    )
    return Snapshot(
        record=found,
        state=await record_state(tx, key, thread_id),
        chunks=await chunks(tx, key),
        buffered_reflection=buffered_reflection(reflection) if reflection else None,
        thread=thread(row) if row else None,
        hints=Hints(*hints) if hints else Hints(),
    )


async def chunks(tx: Tx, key: str) -> list[Chunk]:
    rows = await tx.fetch(f"SELECT {CHUNK_COLUMNS} FROM om_chunks WHERE record_key = $1 ORDER BY first_seq", key)
    return [chunk(r) for r in rows]


async def groups(tx: Tx, key: str, generation: int | None = None) -> list[Group]:
    """A generation's groups in log order; the active one by default."""
    if generation is None:
        rows = await tx.fetch(
            f"SELECT {GROUP_COLUMNS} FROM om_groups g JOIN om_records r ON r.key = g.record_key"
            " AND r.generation = g.generation WHERE g.record_key = $1 ORDER BY g.position",
            key,
        )
    else:
        rows = await tx.fetch(
            f"SELECT {GROUP_COLUMNS} FROM om_groups g"
            " WHERE g.record_key = $1 AND g.generation = $2 ORDER BY g.position",
            key,
            generation,
        )
    return [group(r) for r in rows]


async def groups_by_id(tx: Tx, ids: list[str]) -> dict[str, Group]:
    """Groups by id, whatever their generation (search hits and vectors name them)."""
    if not ids:
        return {}
    rows = await tx.fetch(f"SELECT {GROUP_COLUMNS} FROM om_groups g WHERE g.id = ANY ($1::text[])", ids)
    return {r[0]: group(r) for r in rows}


async def generations(tx: Tx, key: str) -> list[tuple[int, list[Group]]]:
    """Every generation, newest first (the retired pile is none of them)."""
    out: dict[int, list[Group]] = {}
    rows = await tx.fetch(
        f"SELECT {GROUP_COLUMNS} FROM om_groups g WHERE g.record_key = $1 AND g.generation >= 0"
        " ORDER BY g.generation DESC, g.position",
        key,
    )
    for row in rows:
        found = group(row)
        out.setdefault(found.generation, []).append(found)
    return list(out.items())


async def context(
    tx: Tx,
    key: str,
    thread_id: str,
    budget: int,
    working_memory: tuple[str, str] | None,
    others_since: str | None = None,
    known: Mapping[int, Message] | None = None,
) -> ContextRead | None:
    """Everything the agent sees, in one snapshot: record, log, window, other threads, working memory.
    Other threads: the most recently active ones with unobserved messages (active since
    `others_since`, an ISO time, when given). `known`: messages the caller read before, by seq (see
    `window`)."""
    snap = await snapshot(tx, key, thread_id)
    if snap is None:
        return None
    cursor = snap.record.cursors.get(thread_id, 0)
    others: dict[str, list[Message]] = {}
    if snap.record.scope == "resource":
        busy = await tx.fetch(
            "SELECT c.thread_id, c.seq FROM om_cursors c JOIN threads t ON t.id = c.thread_id"
            " WHERE c.record_key = $1 AND c.thread_id <> $2 AND c.pending_messages > 0 AND t.updated_at >= $3"
            " ORDER BY t.updated_at DESC LIMIT $4",
            key,
            thread_id,
            others_since or "",
            OTHER_THREADS,
        )
        for other, seq in busy:
            recent = await tx.fetch(
                "SELECT seq, tokens FROM messages WHERE thread_id = $1 AND seq > $2 AND observable"
                " ORDER BY seq DESC LIMIT $3",
                other,
                seq,
                OTHER_THREAD_MESSAGES,
            )
            others[other] = await _messages(tx, other, [(s, t) for s, t in reversed(recent)], known)
    memory = None
    if working_memory is not None:
        table, ident = working_memory
        if table not in ("resources", "threads"):
            raise ValueError(f"working memory lives in resources or threads, not {table!r}")
        memory = await tx.fetchval(f"SELECT working_memory FROM {table} WHERE id = $1", ident)
    archived = await tx.fetch(
        f"SELECT {GROUP_COLUMNS} FROM om_groups g WHERE g.record_key = $1 AND g.generation = $2"
        " AND g.retired_reason = 'archived' ORDER BY g.retired_by DESC, g.position DESC LIMIT $3",
        key,
        RETIRED,
        ARCHIVE_SHOWN,
    )
    total = len(archived)
    if total == ARCHIVE_SHOWN:
        total = await tx.fetchval(
            "SELECT COUNT(*) FROM om_groups WHERE record_key = $1 AND generation = $2 AND retired_reason = 'archived'",
            key,
            RETIRED,
        )
    return ContextRead(
        snapshot=snap,
        groups=await groups(tx, key),
        window=await window(tx, thread_id, cursor, budget, known),
        other_threads=others,
        working_memory=memory,
        archived=[group(r) for r in archived],
        archived_total=int(total),
    )


async def window(
    tx: Tx, thread_id: str, cursor: int, budget: int, known: Mapping[int, Message] | None = None
) -> list[Message]:
    """The newest unobserved messages whose stored token counts fit `budget` (at least one), oldest first.
    Sizes are read newest first and the reading stops at the budget. A message in `known` (by seq, read
    before) is not read again: a stored message never changes but for its token count, which the sizes
    hold, so only the rows new since the caller's last read are fetched and decoded."""
    used, sizes = 0, list[tuple[int, int]]()

    def full(row: Row) -> bool:
        nonlocal used
        seq, tokens = row
        if sizes and used + tokens > budget:
            return True
        used += tokens
        sizes.append((seq, tokens))
        return False

    await tx.scan(
        "SELECT seq, tokens FROM messages WHERE thread_id = $1 AND seq > $2 AND observable ORDER BY seq DESC",
        thread_id,
        cursor,
        until=full,
    )
    sizes.reverse()
    return await _messages(tx, thread_id, sizes, known)


async def _messages(
    tx: Tx, thread_id: str, sizes: list[tuple[int, int]], known: Mapping[int, Message] | None
) -> list[Message]:
    """A thread's messages of these (seq, tokens), in order: those in `known` with the same count as they
    were, the others read and decoded (a range when they are the newest, the common case)."""
    known = known or {}
    missing = [seq for seq, tokens in sizes if (m := known.get(seq)) is None or m.tokens != tokens]
    fresh: dict[int, Message] = {}
    if missing:
        if missing == [seq for seq, _ in sizes[len(sizes) - len(missing) :]]:
            rows = await tx.fetch(
                f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = $1 AND m.seq >= $2 AND m.observable"
                " ORDER BY m.seq",
                thread_id,
                missing[0],
            )
        else:
            rows = await tx.fetch(
                f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.seq = ANY ($1::bigint[]) ORDER BY m.seq", missing
            )
        fresh = {r[0]: message(r) for r in rows}
    read = set(missing)
    return [m for seq, _ in sizes if (m := fresh.get(seq) if seq in read else known[seq]) is not None]


async def unobserved(
    tx: Tx, key: str, thread_id: str, *, after_seq: int | None = None, max_tokens: int | None = None
) -> list[Message]:
    """A thread's observable messages after the record's cursor (and `after_seq`), oldest first,
    up to `max_tokens` (at least one); a long backlog is not read whole for a small budget."""
    cursor = await tx.fetchval("SELECT seq FROM om_cursors WHERE record_key = $1 AND thread_id = $2", key, thread_id)
    out: list[Message] = []
    used = 0

    def full(row: Row) -> bool:
        nonlocal used
        if max_tokens is not None and out and used + row[9] > max_tokens:
            return True
        out.append(message(row))
        used += row[9]
        return False

    await tx.scan(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = $1 AND m.seq > $2 AND m.observable"
        " ORDER BY m.seq",
        thread_id,
        max(cursor or 0, after_seq or 0),
        until=full,
    )
    return out


async def busy_threads(tx: Tx, key: str) -> list[tuple[str, int, int]]:
    """(thread_id, cursor seq, pending tokens) of a record's threads with unobserved messages, busiest first."""
    rows = await tx.fetch(
        "SELECT thread_id, seq, pending_tokens FROM om_cursors WHERE record_key = $1 AND pending_messages > 0"
        " ORDER BY pending_tokens DESC",
        key,
    )
    return [r for r in rows]  # type: ignore[misc]


async def due(tx: Tx, min_pending: int, min_observation_tokens: int) -> list[DueWork]:
    """Records that may need a cycle: enough unobserved tokens, or a log big enough to reflect
    (on PostgreSQL, less those whose cycle runs now: see its driver's `due_rows`)."""
    rows = await tx.due_rows(min_pending, min_observation_tokens)
    return [DueWork(key, resource, thread_id, int(pending)) for key, resource, thread_id, pending in rows if thread_id]


async def thread_hints(tx: Tx, key: str, thread_ids: list[str]) -> dict[str, Hints]:
    """Each thread's continuation hints under a record."""
    if not thread_ids:
        return {}
    rows = await tx.fetch(
        "SELECT thread_id, current_task, suggested_response FROM om_cursors WHERE record_key = $1"
        " AND thread_id = ANY ($2::text[])",
        key,
        thread_ids,
    )
    return {t: Hints(task, response) for t, task, response in rows}
