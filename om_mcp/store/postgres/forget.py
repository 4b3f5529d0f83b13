"""Forgetting one thing on PostgreSQL (see sqlite/forget.py, rule for rule).

What differs: the word index of a message also weighs the two messages before it
(search.py), so the two after a forgotten one are indexed again without it; rows are
locked first (the threads, then the records in key order, as commits take them); the
deleted rows leave PostgreSQL's files at the next VACUUM, as for deleted threads.
"""

from __future__ import annotations

import json
from typing import Any

from om_mcp.store import coordination, scrub
from om_mcp.store.decode import CHUNK_COLUMNS, GROUP_COLUMNS, MESSAGE_COLUMNS, chunk, group, message, now_iso
from om_mcp.store.postgres import search
from om_mcp.store.postgres.driver import PgTx
from om_mcp.store.rows import Found, Rewrite, Rewritten

# Removes index rows by seq and takes them off the per-resource counters (search.FORGET, by seq).
FORGET_INDEX = """
WITH gone AS (
    DELETE FROM messages_fts WHERE seq = ANY ($1::bigint[]) RETURNING resource_id, doclen, tsv
), lexemes AS (
    SELECT resource_id, lexeme, count(*) AS n FROM gone, unnest(tsvector_to_array(gone.tsv)) AS lexeme
    GROUP BY resource_id, lexeme
), counted AS (
    UPDATE search_terms st SET ndoc = st.ndoc - l.n FROM lexemes l
    WHERE st.resource_id = l.resource_id AND st.lexeme = l.lexeme
)
UPDATE search_stats s SET n_docs = s.n_docs - g.n, total_len = s.total_len - g.len
FROM (SELECT resource_id, count(*) AS n, sum(doclen) AS len FROM gone GROUP BY resource_id) g
WHERE s.resource_id = g.resource_id
"""


async def group_records(conn: Any, group_ids: list[str]) -> dict[str, str]:
    rows = await conn.fetch("SELECT id, record_key FROM om_groups WHERE id = ANY ($1::text[])", group_ids)
    return {r[0]: r[1] for r in rows}


async def find_text(conn: Any, phrase: str, resource_id: str | None = None, limit: int = 500) -> Found:
    found = scrub.needle(phrase)
    rows = await conn.fetch(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE strpos(lower(m.body), lower($1)) > 0"
        " AND ($2::text IS NULL OR m.resource_id = $2) ORDER BY m.seq LIMIT $3",
        phrase,
        resource_id,
        limit + 1,
    )
    # lower() folds fewer letters than casefold(): the rows are checked again here.
    messages = [message(r) for r in rows if found in (r[5] or "").casefold()]
    out = Found(messages=messages[:limit], truncated=len(rows) > limit)
    groups = await conn.fetch(
        f"SELECT g.record_key, {GROUP_COLUMNS} FROM om_groups g JOIN om_records r ON r.key = g.record_key"
        " WHERE strpos(lower(g.text), lower($1)) > 0 AND ($2::text IS NULL OR r.resource_id = $2)"
        " ORDER BY g.record_key, g.generation, g.position",
        phrase,
        resource_id,
    )
    out.groups = [(r[0], group(list(r)[1:])) for r in groups if found in r["text"].casefold()]
    columns = ", ".join(f"c.{c.strip()}" for c in CHUNK_COLUMNS.split(","))
    chunks = await conn.fetch(
        f"SELECT c.record_key, {columns} FROM om_chunks c JOIN om_records r ON r.key = c.record_key"
        " WHERE strpos(lower(c.text), lower($1)) > 0 AND ($2::text IS NULL OR r.resource_id = $2)"
        " ORDER BY c.record_key, c.first_seq",
        phrase,
        resource_id,
    )
    out.chunks = [(r[0], chunk(list(r)[1:])) for r in chunks if found in r["text"].casefold()]
    return out


async def _lock(conn: Any, plan: Rewrite) -> list[str]:
    """Lock what the plan touches, in the order appends and commits lock it; the records' keys."""
    threads = sorted(plan.messages)
    if threads:
        await conn.fetch("SELECT id FROM threads WHERE id = ANY ($1::text[]) ORDER BY id FOR UPDATE", threads)
    owners = await conn.fetch(
        "SELECT record_key FROM om_groups WHERE id = ANY ($1::text[]) UNION SELECT record_key FROM om_chunks"
        " WHERE id = ANY ($2::text[]) UNION SELECT record_key FROM om_cursors WHERE thread_id = ANY ($3::text[])"
        " UNION SELECT unnest($4::text[])",
        list(plan.groups),
        list(plan.chunks),
        threads,
        list(plan.expected),
    )
    keys = sorted({r[0] for r in owners})
    await conn.fetch("SELECT key FROM om_records WHERE key = ANY ($1::text[]) ORDER BY key FOR UPDATE", keys)
    return keys


async def apply_rewrite(conn: Any, plan: Rewrite) -> Rewritten | None:
    await _lock(conn, plan)
    for key, version in plan.expected.items():
        if await conn.fetchval("SELECT version FROM om_records WHERE key = $1", key) != version:
            return None
    done = Rewritten()
    touched: set[str] = set()
    for thread_id, seqs in sorted(plan.messages.items()):
        done.messages += await _forget_messages(conn, thread_id, seqs, touched)
    for group_id, change in plan.groups.items():
        key = await conn.fetchval("SELECT record_key FROM om_groups WHERE id = $1", group_id)
        if key is None:
            continue
        touched.add(key)
        await conn.execute("DELETE FROM embeddings WHERE kind = 'group' AND ref = $1", group_id)
        if change is None or not change[0].strip():
            await conn.execute("DELETE FROM om_groups WHERE id = $1", group_id)
            done.groups_removed += 1
        else:
            await conn.execute(
                "UPDATE om_groups SET text = $1, tokens = $2, doclen = $3 WHERE id = $4",
                change[0],
                change[1],
                search.doclen(change[0]),
                group_id,
            )
            done.groups_changed += 1
    for chunk_id, change in plan.chunks.items():
        row = await conn.fetchrow("SELECT record_key, thread_id, first_seq FROM om_chunks WHERE id = $1", chunk_id)
        if row is None:
            continue
        touched.add(row[0])
        if change is None or not change[0].strip():
            done.chunks += await _drop_chunks_from(conn, row[0], row[1], row[2])
        else:
            await conn.execute("UPDATE om_chunks SET text = $1, tokens = $2 WHERE id = $3", *change, chunk_id)
            done.chunks += 1
    if plan.scrub:
        done.derived += await _scrub(conn, plan.scrub, plan.scrub_resource)
    for key in sorted(touched):
        await conn.execute("DELETE FROM om_buffered_reflections WHERE record_key = $1", key)
        await conn.execute(
            "UPDATE om_records SET observation_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM om_groups"
            " WHERE record_key = om_records.key AND generation = om_records.generation),"
            " edits = edits + 1, version = version + 1, updated_at = $1 WHERE key = $2",
            now_iso(),
            key,
        )
    done.records = sorted(touched)
    await coordination.add_events(PgTx(conn), plan.events)
    return done


async def _drop_chunks_from(conn: Any, key: str, thread_id: str, first_seq: int) -> int:
    status = await conn.execute(
        "DELETE FROM om_chunks WHERE record_key = $1 AND thread_id = $2 AND first_seq >= $3", key, thread_id, first_seq
    )
    return int(status.split()[-1])


async def _forget_messages(conn: Any, thread_id: str, seqs: list[int], touched: set[str]) -> int:
    rows = await conn.fetch(
        "SELECT seq, id, tokens, observable, resource_id FROM messages"
        " WHERE thread_id = $1 AND seq = ANY ($2::bigint[])",
        thread_id,
        seqs,
    )
    if not rows:
        return 0
    seqs = [r[0] for r in rows]
    ids = [r[1] for r in rows]
    resource_id = rows[0][4]
    # The two messages after each forgotten one carry its words in their index rows (weights B and C).
    after = sorted(
        {
            r[0]
            for s in seqs
            for r in await conn.fetch(
                "SELECT seq FROM messages WHERE thread_id = $1 AND seq > $2 AND NOT (seq = ANY ($3::bigint[]))"
                " AND body <> '' ORDER BY seq LIMIT 2",
                thread_id,
                s,
                seqs,
            )
        }
    )
    await conn.fetch(
        "SELECT 1 FROM search_terms WHERE resource_id = $1 AND lexeme IN (SELECT DISTINCT lexeme FROM messages_fts f,"
        " unnest(tsvector_to_array(f.tsv)) AS lexeme WHERE f.seq = ANY ($2::bigint[])) ORDER BY lexeme FOR UPDATE",
        resource_id,
        [*seqs, *after],
    )
    await conn.execute(FORGET_INDEX, [*seqs, *after])
    # A word no message holds any more leaves the counters too (the next indexing adds back what stays).
    await conn.execute("DELETE FROM search_terms WHERE resource_id = $1 AND ndoc <= 0", resource_id)
    # A message's vector embeds the one before it: the next message's goes too (rebuilt later).
    refs = [str(s) for s in {*seqs, *after}]
    await conn.execute("DELETE FROM embeddings WHERE kind = 'message' AND ref = ANY ($1::text[])", refs)
    cursors = await conn.fetch("SELECT record_key, seq, counted_seq FROM om_cursors WHERE thread_id = $1", thread_id)
    for key, cursor, counted in cursors:
        touched.add(key)
        pending = [r for r in rows if cursor < r[0] <= counted and r[3]]
        await conn.execute(
            "UPDATE om_cursors SET pending_tokens = GREATEST(0, pending_tokens - $1),"
            " pending_messages = GREATEST(0, pending_messages - $2) WHERE record_key = $3 AND thread_id = $4",
            sum(r[2] for r in pending),
            len(pending),
            key,
            thread_id,
        )
        first = await conn.fetchval(
            "SELECT MIN(first_seq) FROM om_chunks c WHERE record_key = $1 AND thread_id = $2"
            " AND EXISTS (SELECT 1 FROM unnest($3::bigint[]) s WHERE s BETWEEN c.first_seq AND c.last_seq)",
            key,
            thread_id,
            seqs,
        )
        if first is not None:
            await _drop_chunks_from(conn, key, thread_id, first)
    await conn.execute("DELETE FROM messages WHERE thread_id = $1 AND seq = ANY ($2::bigint[])", thread_id, seqs)
    last = await conn.fetchrow(
        "SELECT id, created_at FROM messages WHERE thread_id = $1 AND role = 'assistant' ORDER BY seq DESC LIMIT 1",
        thread_id,
    )
    await conn.execute(
        "UPDATE threads SET message_count = GREATEST(0, message_count - $1), last_assistant_id = $2,"
        " last_assistant_at = $3 WHERE id = $4",
        len(seqs),
        last[0] if last else None,
        last[1] if last else None,
        thread_id,
    )
    for seq in after:  # indexed again, one at a time: each finds its own two previous messages
        body = await conn.fetchval("SELECT body FROM messages WHERE seq = $1", seq)
        await search.index_messages(conn, thread_id, resource_id, [(seq, body)])
    await _repoint_ranges(conn, thread_id, ids, min(seqs), max(seqs), touched)
    return len(seqs)


async def _repoint_ranges(conn: Any, thread_id: str, ids: list[str], low: int, high: int, keys: set[str]) -> None:
    groups = await conn.fetch(
        "SELECT id, first_seq, last_seq, first_message_id, last_message_id FROM om_groups"
        " WHERE record_key = ANY ($1::text[]) AND first_seq <= $2 AND last_seq >= $3"
        " AND (first_message_id = ANY ($4::text[]) OR last_message_id = ANY ($4::text[]))",
        sorted(keys),
        high,
        low,
        ids,
    )
    for gid, first_seq, last_seq, first_id, last_id in groups:
        first = await _nearest(conn, thread_id, first_seq, last_seq, "ASC") if first_id in ids else first_id
        last = await _nearest(conn, thread_id, first_seq, last_seq, "DESC") if last_id in ids else last_id
        await conn.execute(
            "UPDATE om_groups SET first_message_id = $1, last_message_id = $2 WHERE id = $3", first, last, gid
        )


async def _nearest(conn: Any, thread_id: str, low: int, high: int, order: str) -> str | None:
    return await conn.fetchval(
        "SELECT id FROM messages WHERE thread_id = $1 AND seq BETWEEN $2 AND $3 AND role <> 'system'"
        f" ORDER BY seq {order} LIMIT 1",
        thread_id,
        low,
        high,
    )


async def _scrub(conn: Any, phrase: str, resource_id: str | None) -> int:
    found = scrub.needle(phrase)
    escaped = json.dumps(found, ensure_ascii=False)[1:-1]
    keys = [
        r[0]
        for r in await conn.fetch(
            "SELECT key FROM om_records WHERE $1::text IS NULL OR resource_id = $1 ORDER BY key", resource_id
        )
    ]
    removed = 0
    for key in keys:
        for thread_id, task, response in await conn.fetch(
            "SELECT thread_id, current_task, suggested_response FROM om_cursors WHERE record_key = $1", key
        ):
            for name, value in (("current_task", task), ("suggested_response", response)):
                if scrub.holds(value, found):
                    await conn.execute(
                        f"UPDATE om_cursors SET {name} = NULL WHERE record_key = $1 AND thread_id = $2", key, thread_id
                    )
                    removed += 1
        extracted = await conn.fetchval("SELECT extracted FROM om_records WHERE key = $1", key)
        cleaned, n = scrub.without(json.loads(extracted or "{}"), found)
        if n:
            await conn.execute(
                "UPDATE om_records SET extracted = $1 WHERE key = $2", json.dumps(cleaned, ensure_ascii=False), key
            )
            removed += n
        reflection = await conn.fetchrow("SELECT text, hints FROM om_buffered_reflections WHERE record_key = $1", key)
        if reflection is not None and any(found in v.casefold() or escaped in v.casefold() for v in reflection):
            await conn.execute("DELETE FROM om_buffered_reflections WHERE record_key = $1", key)
            removed += 1
        # A buffered chunk's hints may quote it: the chunk goes, and its messages are buffered again.
        quoting: dict[str, int] = {}
        for thread_id, first, hints in await conn.fetch(
            "SELECT thread_id, first_seq, hints FROM om_chunks WHERE record_key = $1 ORDER BY first_seq", key
        ):
            if (found in hints.casefold() or escaped in hints.casefold()) and thread_id not in quoting:
                quoting[thread_id] = first
        for thread_id, first in sorted(quoting.items()):
            removed += await _drop_chunks_from(conn, key, thread_id, first)
    events = await conn.fetch(
        "SELECT id, payload FROM om_events"
        " WHERE ($1::text IS NULL OR resource_id = $1 OR record_key = ANY ($2::text[]))"
        " AND (strpos(lower(payload), lower($3)) > 0 OR strpos(lower(payload), lower($4)) > 0)",
        resource_id,
        keys,
        phrase,
        escaped,
    )
    doomed = [r[0] for r in events if found in r[1].casefold() or escaped in r[1].casefold()]
    if doomed:
        await conn.execute("DELETE FROM om_events WHERE id = ANY ($1::bigint[])", doomed)
        removed += len(doomed)
    for thread_id, title, metadata, memory in await conn.fetch(
        "SELECT id, title, metadata, working_memory FROM threads WHERE $1::text IS NULL OR resource_id = $1",
        resource_id,
    ):
        if scrub.holds(title, found):
            await conn.execute("UPDATE threads SET title = NULL, title_pinned = false WHERE id = $1", thread_id)
            removed += 1
        cleaned, n = scrub.without(json.loads(metadata or "{}"), found)
        if n:
            await conn.execute(
                "UPDATE threads SET metadata = $1 WHERE id = $2", json.dumps(cleaned, ensure_ascii=False), thread_id
            )
            removed += n
        if memory:
            text, n = scrub.text_without(memory, found)
            if n:
                await conn.execute("UPDATE threads SET working_memory = $1 WHERE id = $2", text, thread_id)
                removed += n
    for rid, memory in await conn.fetch(
        "SELECT id, working_memory FROM resources WHERE $1::text IS NULL OR id = $1", resource_id
    ):
        if memory:
            text, n = scrub.text_without(memory, found)
            if n:
                await conn.execute("UPDATE resources SET working_memory = $1 WHERE id = $2", text, rid)
                removed += n
    return removed
