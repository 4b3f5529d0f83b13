"""Messages: the append (one transaction, a handful of statements), pages and lookups.

On PostgreSQL the append locks the thread row before it takes seqs. A sequence hands out
numbers at INSERT, not at COMMIT: without the lock, two appends to one thread
could commit out of seq order, an observation in between would move the cursor
past the lower seq, and that message would never be observed. With it, seq
order is commit order within a thread, which is what cursors (per record and
thread) need.
"""

from __future__ import annotations

import json
from typing import Any

from om_mcp.store import history, resends, tombstones
from om_mcp.store.decode import MESSAGE_COLUMNS, THREAD_COLUMNS, dumps, message, now_iso, thread
from om_mcp.store.errors import StoreError
from om_mcp.store.observations import ensure_record, record_state, unobserved_between
from om_mcp.store.privacy import count_redactions
from om_mcp.store.rows import AppendResult, Message, NewMessage, Thread, WorkingMemorySeed
from om_mcp.store.tx import Tx

LOCK_THREAD = (
    f"SELECT {THREAD_COLUMNS}, (SELECT MAX(seq) FROM messages WHERE thread_id = t.id),"
    " (SELECT counted_seq FROM om_cursors WHERE record_key = $1 AND thread_id = t.id)"
    " FROM threads t WHERE t.id = $2 FOR UPDATE OF t"
)


async def append(
    tx: Tx,
    thread_id: str,
    resource_id: str,
    record_key: str,
    messages: list[NewMessage],
    *,
    counted_by: int = 0,
    thread_metadata: dict[str, Any] | None = None,
    working_memory: WorkingMemorySeed | None = None,
) -> AppendResult:
    """Insert a batch, all or nothing, and keep the record's running totals.

    A message whose (thread, id) exists with the same content is skipped; with
    other content it is an error and nothing of the batch is written.
    """
    result = AppendResult()
    row = await tx.fetchrow(LOCK_THREAD, record_key, thread_id)
    if row is None:
        # Nothing to create a thread for when every message was forgotten (checked here, before the thread
        # exists: a forget that deleted it has committed, its tombstones are seen).
        messages, result.forgotten = await tombstones.keep(tx, resource_id, thread_id, messages)
        if not messages:
            result.state = await record_state(tx, record_key, thread_id)
            return result
        current = await _create_thread(tx, thread_id, resource_id, thread_metadata, working_memory)
        if current is None:  # created by another transaction meanwhile: now it is there to lock
            row = await tx.fetchrow(LOCK_THREAD, record_key, thread_id)
        else:
            result.thread_created, last_seq, counted_seq = True, 0, None
    if row is not None:
        values = tuple(row)
        current, last_seq, counted_seq = thread(values[:-2]), values[-2] or 0, values[-1]
        if current.resource_id != resource_id:
            raise StoreError(
                f"thread {thread_id!r} belongs to resource {current.resource_id!r}, not {resource_id!r};"
                " a thread keeps its resource for life",
                field="resource_id",
            )
    fresh = await _new_only(tx, thread_id, resource_id, messages, result)
    if fresh:
        if await ensure_record(tx, record_key, resource_id, thread_id):
            counted_seq = await tx.fetchval(
                "SELECT counted_seq FROM om_cursors WHERE record_key = $1 AND thread_id = $2", record_key, thread_id
            )
        assert current is not None  # created above, or read from its locked row
        seqs = await insert_new(tx, current, fresh, counted_by, result)
        catch_up = 0, 0
        if (counted_seq or 0) < last_seq:
            catch_up = await unobserved_between(tx, thread_id, counted_seq or 0, last_seq)
        observable = [m for m in fresh if m.observable]
        await tx.execute(
            "INSERT INTO om_cursors (record_key, thread_id, seq, pending_tokens, pending_messages, counted_seq)"
            " VALUES ($1, $2, 0, $3, $4, $5) ON CONFLICT (record_key, thread_id) DO UPDATE SET"
            " pending_tokens = om_cursors.pending_tokens + excluded.pending_tokens,"
            " pending_messages = om_cursors.pending_messages + excluded.pending_messages,"
            " counted_seq = excluded.counted_seq",
            record_key,
            thread_id,
            sum(m.tokens for m in observable) + catch_up[0],
            len(observable) + catch_up[1],
            max(seqs),
        )
    result.state = await record_state(tx, record_key, thread_id)
    result.thread = current
    return result


async def _create_thread(
    tx: Tx, thread_id: str, resource_id: str, metadata: dict[str, Any] | None, working_memory: WorkingMemorySeed | None
) -> Thread | None:
    """The new thread, or None when another transaction created it first."""
    stamp = now_iso()
    await tx.execute(
        "INSERT INTO resources (id, created_at, updated_at) VALUES ($1, $2, $2) ON CONFLICT (id) DO NOTHING",
        resource_id,
        stamp,
    )
    metadata = dict(metadata or {})
    title = metadata.pop("title", None)
    metadata.pop("working_memory", None)
    created = await tx.execute(
        "INSERT INTO threads (id, resource_id, title, title_pinned, metadata, created_at, updated_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (id) DO NOTHING",
        thread_id,
        resource_id,
        title,
        title is not None,
        dumps(metadata),
        stamp,
    )
    if not created:
        return None
    if working_memory is not None:
        scope, seed = working_memory
        if scope == "thread":
            value = seed(None)
            if value is not None:
                await tx.execute("UPDATE threads SET working_memory = $1 WHERE id = $2", value, thread_id)
                await history.save_working_memory(tx, scope, thread_id, value)
        else:
            stored = await tx.fetchval("SELECT working_memory FROM resources WHERE id = $1 FOR UPDATE", resource_id)
            value = seed(stored)
            if value is not None and value != stored:
                await tx.execute("UPDATE resources SET working_memory = $1 WHERE id = $2", value, resource_id)
                await history.save_working_memory(tx, scope, resource_id, value)
    row = await tx.fetchrow(f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.id = $1", thread_id)
    assert row is not None  # inserted above
    return thread(row)


async def _new_only(
    tx: Tx, thread_id: str, resource_id: str, messages: list[NewMessage], result: AppendResult
) -> list[NewMessage]:
    """The messages not stored yet and not forgotten: what a tombstone refuses is counted
    (store/tombstones.py), re-sends too, clashes refused (see om_mcp.store.resends). The thread is locked."""
    messages, forgotten = await tombstones.keep(tx, resource_id, thread_id, messages)
    result.forgotten += forgotten
    if size := resends.tail_size(messages):
        rows = await tx.fetch(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = $1 ORDER BY m.seq DESC LIMIT $2",
            thread_id,
            size,
        )
        messages, resent = resends.settle_against_tail([message(r) for r in reversed(rows)], messages)
        result.skipped_duplicates += resent
    ids = list(dict.fromkeys(m.id for m in messages))
    rows = await tx.fetch(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = $1 AND m.id = ANY ($2::text[])", thread_id, ids
    )
    fresh, skipped = resends.new_by_id(thread_id, messages, {r[1]: message(r) for r in rows})
    result.skipped_duplicates += skipped
    return fresh


async def insert_new(
    tx: Tx, current: Thread, fresh: list[NewMessage], counted_by: int, result: AppendResult
) -> list[int]:
    """Store messages that are not stored yet (`_new_only`) in the thread, in order: the rows and
    their search index, the resource's redaction counts, the thread's totals. An append and an
    import both store their messages here; their seqs."""
    seqs = await tx.insert_messages(current.id, current.resource_id, counted_by, fresh)
    result.appended = [
        Message(seq, m.id, current.id, current.resource_id, m.role, m.parts, m.created_at, m.metadata, m.tokens)
        for seq, m in zip(seqs, fresh)
    ]
    result.redactions = await count_redactions(tx, current.resource_id, fresh)
    await _update_thread(tx, current, fresh)
    return seqs


async def _update_thread(tx: Tx, current: Thread, fresh: list[NewMessage]) -> None:
    last_assistant, last_id = current.last_assistant_at, current.last_assistant_id
    last_model, previous_model = current.last_model, current.previous_model
    for m in fresh:
        if m.role != "assistant":
            continue
        last_assistant, last_id = max(last_assistant or m.created_at, m.created_at), m.id
        model = m.metadata.get("model")
        if isinstance(model, str) and model:
            previous_model, last_model = last_model, model
    await tx.execute(
        "UPDATE threads SET updated_at = $1, message_count = message_count + $2, last_assistant_at = $3,"
        " last_assistant_id = $4, last_model = $5, previous_model = $6 WHERE id = $7",
        now_iso(),
        len(fresh),
        last_assistant,
        last_id,
        last_model,
        previous_model,
        current.id,
    )


# -- reads ------------------------------------------------------------------------------


async def page(
    tx: Tx,
    thread_id: str,
    *,
    after_seq: int | None = None,
    before_seq: int | None = None,
    limit: int = 20,
    offset: int = 0,
    newest_first: bool = False,
    part_filter: tuple[str | None, str | None] = (None, None),
) -> list[Message]:
    """A page of a thread's messages by seq; `part_filter` = (part type, tool name)."""
    where, params = ["m.thread_id = $1"], [thread_id]

    def arg(value: Any) -> str:
        params.append(value)
        return f"${len(params)}"

    if after_seq is not None:
        where.append(f"m.seq > {arg(after_seq)}")
    if before_seq is not None:
        where.append(f"m.seq < {arg(before_seq)}")
    part_type, tool_name = part_filter
    if part_type or tool_name:
        conditions = []  # a NULL parts column is one text part
        if part_type:
            conditions.append(f"{tx.json_field('p.value', 'type')} = {arg(part_type)}")
        if tool_name:
            conditions.append(f"{tx.json_field('p.value', 'tool_name')} = {arg(tool_name)}")
        text_only = "false"
        if part_type == "text" and not tool_name:
            text_only = "m.parts IS NULL"
        where.append(
            f"({text_only} OR (m.parts IS NOT NULL AND EXISTS (SELECT 1 FROM"
            f" {tx.json_elements('m.parts')} p WHERE {' AND '.join(conditions)})))"
        )
    order = "DESC" if newest_first else "ASC"
    rows = await tx.fetch(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE {' AND '.join(where)} ORDER BY m.seq {order}"
        f" LIMIT {arg(limit)} OFFSET {arg(offset)}",
        *params,
    )
    return [message(r) for r in rows]


async def count_before(tx: Tx, thread_id: str, seq: int) -> int:
    return await tx.fetchval("SELECT COUNT(*) FROM messages WHERE thread_id = $1 AND seq < $2", thread_id, seq)


async def find(tx: Tx, resource_id: str, message_id: str, thread_id: str | None = None) -> Message | None:
    """A message by id within a resource (or one thread of it); the newest wins on a clash."""
    if thread_id is not None:
        row = await tx.fetchrow(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = $1 AND m.id = $2 AND m.resource_id = $3",
            thread_id,
            message_id,
            resource_id,
        )
    else:
        row = await tx.fetchrow(
            f"SELECT {MESSAGE_COLUMNS} FROM threads t JOIN messages m ON m.thread_id = t.id AND m.id = $1"
            " WHERE t.resource_id = $2 ORDER BY m.seq DESC LIMIT 1",
            message_id,
            resource_id,
        )
    return message(row) if row else None


async def by_seq(tx: Tx, seqs: list[int]) -> dict[int, Message]:
    if not seqs:
        return {}
    rows = await tx.fetch(f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.seq = ANY ($1::bigint[])", list(seqs))
    return {r[0]: message(r) for r in rows}


async def last_created_at(tx: Tx, thread_id: str) -> str | None:
    return await tx.fetchval(
        "SELECT created_at FROM messages WHERE thread_id = $1 ORDER BY seq DESC LIMIT 1", thread_id
    )


# -- token recounts -----------------------------------------------------------------------


async def tokenizer_id(tx: Tx, name: str) -> int:
    await tx.execute("INSERT INTO om_tokenizers (name) VALUES ($1) ON CONFLICT (name) DO NOTHING", name)
    return await tx.fetchval("SELECT id FROM om_tokenizers WHERE name = $1", name)


async def stale_counts(tx: Tx, counted_by: int, limit: int = 500, after_seq: int = 0) -> list[dict[str, Any]]:
    """Messages counted by another tokenizer; `after_seq` skips those already looked at."""
    rows = await tx.fetch(
        "SELECT seq, role, body, parts, part_tokens FROM messages WHERE seq > $3 AND counted_by <> $1"
        " ORDER BY seq LIMIT $2",
        counted_by,
        limit,
        after_seq,
    )
    return [
        {
            "seq": seq,
            "role": role,
            "parts": json.loads(parts) if parts is not None else [{"type": "text", "text": body}],
            "part_tokens": json.loads(counts) if counts else None,
        }
        for seq, role, body, parts, counts in rows
    ]


async def last_seq(tx: Tx) -> int:
    """The newest message's seq (0 for none): one index probe."""
    return await tx.fetchval("SELECT COALESCE(MAX(seq), 0) FROM messages")


async def set_counts(tx: Tx, counted_by: int, counts: list[tuple[int, int, list[int]]]) -> None:
    """(seq, tokens, per-part counts) for recounted messages; running totals follow the difference."""
    for seq, tokens, parts in counts:
        old = await tx.fetchrow("SELECT tokens, thread_id, observable FROM messages WHERE seq = $1 FOR UPDATE", seq)
        if old is None:
            continue
        await tx.execute(
            "UPDATE messages SET tokens = $1, part_tokens = $2, counted_by = $3 WHERE seq = $4",
            tokens,
            dumps(parts) if len(parts) > 1 else None,
            counted_by,
            seq,
        )
        if old[2] and tokens != old[0]:
            await tx.execute(
                "UPDATE om_cursors SET pending_tokens = GREATEST(0, pending_tokens + $1)"
                " WHERE thread_id = $2 AND seq < $3 AND counted_seq >= $3",
                tokens - old[0],
                old[1],
                seq,
            )
