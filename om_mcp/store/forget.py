"""Forgetting one thing: messages, observation lines and groups, and what quotes them.

The engine works out what to remove (`Rewrite`: which message seqs, the new text of
each group and buffered chunk, a phrase to scrub from derived text); this applies it in
one transaction, after checking that no record changed since the plan was made:
- a message goes with its index entry, its vector and the next message's (which embeds
  it), its share of the unobserved totals, and any buffered chunk observed from it;
  groups whose range named it point at the nearest message left;
- a group's new text replaces the old in its search index; its vector is rebuilt later;
- every record whose log changed loses its buffered reflection and counts one more
  user edit, so a cycle that read the log before cannot commit (commits.py `_unchanged`).
Phrases are matched by `casefold` (store/scrub.py): the SQL preselects rows with
`Tx.contains` and every row is checked here. Rows are locked first (the threads, then
the records in key order, as appends and commits take them). Then the deleted words
leave the database (`Tx.purge`; SQLiteStore also folds the WAL in).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from om_mcp.store import coordination, scrub, tombstones
from om_mcp.store.access import Access
from om_mcp.store.decode import CHUNK_COLUMNS, GROUP_COLUMNS, MESSAGE_COLUMNS, chunk, group, message, now_iso
from om_mcp.store.rows import Found, Group, Message, Rewrite, Rewritten
from om_mcp.store.tx import Tx


async def group_records(tx: Tx, group_ids: list[str]) -> dict[str, str]:
    """The record each group belongs to."""
    rows = await tx.fetch("SELECT id, record_key FROM om_groups WHERE id = ANY ($1::text[])", group_ids)
    return {r[0]: r[1] for r in rows}


async def record_groups(tx: Tx, access: Access, record_key: str | None = None) -> list[tuple[str, bool, Group]]:
    """(record key, in its active generation, group) of every group of one record, or of every record
    of the resources `access` grants: where a line named by its short id alone is looked for."""
    within, granted = access.sql_filter("r.resource_id", 2)
    rows = await tx.fetch(
        f"SELECT g.record_key, g.generation = r.generation, {GROUP_COLUMNS} FROM om_groups g"
        f" JOIN om_records r ON r.key = g.record_key WHERE ($1::text IS NULL OR g.record_key = $1) AND {within}"
        " ORDER BY g.record_key, g.generation DESC, g.position",
        record_key,
        *granted,
    )
    return [(r[0], bool(r[1]), group(r[2:])) for r in rows]


def _where(tx: Tx, column: str, needle: str | None, param: str) -> str:
    """SQL preselecting rows of `column` that may hold the phrase (`needle`: scrub.preselect's, or None
    when only a check of every row in scope will do)."""
    return tx.contains(column, param) if needle is not None else f"({param}::text IS NOT NULL)"  # every row


def _message_holds(row: Sequence[Any], found: str) -> bool:
    """Does a message row hold the folded phrase in any field it stores: its text, any string of its
    parts at any depth (tool arguments and results, names, a file's decoded data), its metadata?"""
    body, parts, metadata = row[5], row[6], row[8]
    return found in scrub.fold(body or "") or scrub.holds_json(parts, found) or scrub.holds_json(metadata, found)


async def find_text(tx: Tx, phrase: str, access: Access, limit: int = 500) -> Found:
    """The messages, groups (every generation) and buffered chunks holding `phrase` in any stored field,
    ignoring case and Unicode normalisation, within the resources `access` grants, and how many derived
    values quote it (store/scrub.py)."""
    found = scrub.needle(phrase)
    plain = scrub.preselect(found, exact=tx.folds_exactly)
    in_json = scrub.preselect(found, exact=tx.folds_exactly, json_column=True)
    messages: list[Message] = []

    def take(row: Sequence[Any]) -> bool:
        if _message_holds(row, found):
            messages.append(message(row))
        return len(messages) > limit

    # A file part's base64 data hides its text from the SQL: messages with one are checked here.
    in_messages, granted = access.sql_filter("m.resource_id", 3)
    await tx.scan(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE ({_where(tx, 'm.body', plain, '$1')}"
        f" OR {_where(tx, 'm.parts', in_json, '$2')} OR {_where(tx, 'm.metadata', in_json, '$2')}"
        f""" OR m.parts LIKE '%"data":%') AND {in_messages} ORDER BY m.seq""",
        plain or "",
        in_json or "",
        *granted,
        until=take,
    )
    out = Found(messages=messages[:limit], truncated=len(messages) > limit)
    owned, granted = access.sql_filter("r.resource_id", 2)
    groups = await tx.fetch(
        f"SELECT g.record_key, {GROUP_COLUMNS} FROM om_groups g JOIN om_records r ON r.key = g.record_key"
        f" WHERE {_where(tx, 'g.text', plain, '$1')} AND {owned} ORDER BY g.record_key, g.generation, g.position",
        plain or "",
        *granted,
    )
    out.groups = [(r[0], g) for r in groups if found in scrub.fold((g := group(r[1:])).text)]
    columns = ", ".join(f"c.{c.strip()}" for c in CHUNK_COLUMNS.split(","))
    chunks = await tx.fetch(
        f"SELECT c.record_key, {columns} FROM om_chunks c JOIN om_records r ON r.key = c.record_key"
        f" WHERE {_where(tx, 'c.text', plain, '$1')} AND {owned} ORDER BY c.record_key, c.first_seq",
        plain or "",
        *granted,
    )
    out.chunks = [(r[0], c) for r in chunks if found in scrub.fold((c := chunk(r[1:])).text)]
    out.derived = await _scrub(tx, phrase, access, write=False)
    return out


async def _lock(tx: Tx, plan: Rewrite) -> None:
    """Lock what the plan touches, in the order appends and commits lock it."""
    threads = sorted(plan.messages)
    await tx.fetch("SELECT id FROM threads WHERE id = ANY ($1::text[]) ORDER BY id FOR UPDATE", threads)
    owners = await tx.fetch(
        "SELECT record_key FROM om_groups WHERE id = ANY ($1::text[]) UNION SELECT record_key FROM om_chunks"
        " WHERE id = ANY ($2::text[]) UNION SELECT record_key FROM om_cursors WHERE thread_id = ANY ($3::text[])",
        list(plan.groups),
        list(plan.chunks),
        threads,
    )
    keys = sorted({r[0] for r in owners} | set(plan.expected))
    await tx.fetch("SELECT key FROM om_records WHERE key = ANY ($1::text[]) ORDER BY key FOR UPDATE", keys)


async def apply_rewrite(tx: Tx, plan: Rewrite) -> Rewritten | None:
    """Apply the plan, all or nothing; None (and nothing changed) when a record moved on since."""
    await _lock(tx, plan)
    for key, version in plan.expected.items():
        if await tx.fetchval("SELECT version FROM om_records WHERE key = $1", key) != version:
            return None
    done = Rewritten()
    touched: set[str] = set()
    for thread_id, seqs in sorted(plan.messages.items()):
        done.messages += await _forget_messages(tx, thread_id, seqs, touched)
    for group_id, change in plan.groups.items():
        key = await tx.fetchval("SELECT record_key FROM om_groups WHERE id = $1", group_id)
        if key is None:
            continue
        touched.add(key)
        await tx.forget_index([], [group_id])
        await tx.execute("DELETE FROM embeddings WHERE kind = 'group' AND ref = $1", group_id)
        if change is None or not change[0].strip():
            await tx.execute("DELETE FROM om_groups WHERE id = $1", group_id)
            done.groups_removed += 1
        else:
            await tx.execute("UPDATE om_groups SET text = $1, tokens = $2 WHERE id = $3", *change, group_id)
            await tx.index_groups(key, [(group_id, change[0])])
            done.groups_changed += 1
    for chunk_id, change in plan.chunks.items():
        row = await tx.fetchrow("SELECT record_key, thread_id, first_seq FROM om_chunks WHERE id = $1", chunk_id)
        if row is None:
            continue
        touched.add(row[0])
        if change is None or not change[0].strip():
            done.chunks += await _drop_chunks_from(tx, row[0], row[1], row[2])
        else:
            await tx.execute("UPDATE om_chunks SET text = $1, tokens = $2 WHERE id = $3", *change, chunk_id)
            done.chunks += 1
    if plan.scrub:
        done.derived += await _scrub(tx, plan.scrub, plan.scrub_within)
    for key in sorted(touched):
        await tx.execute("DELETE FROM om_buffered_reflections WHERE record_key = $1", key)
        await tx.execute(
            "UPDATE om_records SET observation_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM om_groups"
            " WHERE record_key = om_records.key AND generation = om_records.generation),"
            " edits = edits + 1, version = version + 1, updated_at = $1 WHERE key = $2",
            now_iso(),
            key,
        )
    done.records = sorted(touched)
    await coordination.add_events(tx, plan.events)
    if done.messages or plan.groups or plan.scrub:
        await tx.purge()
    return done


async def _drop_chunks_from(tx: Tx, key: str, thread_id: str, first_seq: int) -> int:
    """A chunk and the thread's later ones (they would no longer continue from the cursor)."""
    return await tx.execute(
        "DELETE FROM om_chunks WHERE record_key = $1 AND thread_id = $2 AND first_seq >= $3", key, thread_id, first_seq
    )


async def _forget_messages(tx: Tx, thread_id: str, seqs: list[int], touched: set[str]) -> int:
    rows = await tx.fetch(
        f"SELECT m.seq, m.id, m.tokens, m.observable, {MESSAGE_COLUMNS} FROM messages m"
        " WHERE m.thread_id = $1 AND m.seq = ANY ($2::bigint[])",
        thread_id,
        seqs,
    )
    if not rows:
        return 0
    seqs = [r[0] for r in rows]
    ids = [r[1] for r in rows]
    gone = [message(r[4:]) for r in rows]
    # Forgotten for good: nothing brings these back (store/tombstones.py).
    await tombstones.bury_messages(
        tx, [(m.thread_id, m.resource_id, m.id, m.role, m.parts, m.metadata) for m in gone], content=True
    )
    reindex = await tx.unindex_messages(thread_id, seqs)
    # A message's vector embeds the one before it, so the next message's goes too (rebuilt later).
    after = [
        seq
        for s in seqs
        if (
            seq := await tx.fetchval(
                "SELECT seq FROM messages WHERE thread_id = $1 AND seq > $2 AND NOT (seq = ANY ($3::bigint[]))"
                " AND body <> '' ORDER BY seq LIMIT 1",
                thread_id,
                s,
                seqs,
            )
        )
        is not None
    ]
    refs = [str(s) for s in {*seqs, *after}]
    await tx.execute("DELETE FROM embeddings WHERE kind = 'message' AND ref = ANY ($1::text[])", refs)
    cursors = await tx.fetch("SELECT record_key, seq, counted_seq FROM om_cursors WHERE thread_id = $1", thread_id)
    for key, cursor, counted in cursors:
        touched.add(key)
        pending = [r for r in rows if cursor < r[0] <= counted and r[3]]
        await tx.execute(
            "UPDATE om_cursors SET pending_tokens = GREATEST(0, pending_tokens - $1),"
            " pending_messages = GREATEST(0, pending_messages - $2) WHERE record_key = $3 AND thread_id = $4",
            sum(r[2] for r in pending),
            len(pending),
            key,
            thread_id,
        )
        # Buffered observations made from a forgotten message go (their messages are buffered again).
        spans = await tx.fetch(
            "SELECT first_seq, last_seq FROM om_chunks WHERE record_key = $1 AND thread_id = $2", key, thread_id
        )
        made_from = [first for first, last in spans if any(first <= s <= last for s in seqs)]
        if made_from:
            await _drop_chunks_from(tx, key, thread_id, min(made_from))
    await tx.execute("DELETE FROM messages WHERE thread_id = $1 AND seq = ANY ($2::bigint[])", thread_id, seqs)
    last = await tx.fetchrow(
        "SELECT id, created_at FROM messages WHERE thread_id = $1 AND role = 'assistant' ORDER BY seq DESC LIMIT 1",
        thread_id,
    )
    await tx.execute(
        "UPDATE threads SET message_count = GREATEST(0, message_count - $1), last_assistant_id = $2,"
        " last_assistant_at = $3 WHERE id = $4",
        len(seqs),
        last[0] if last else None,
        last[1] if last else None,
        thread_id,
    )
    await tx.reindex_messages(thread_id, reindex)
    await _repoint_ranges(tx, thread_id, ids, min(seqs), max(seqs), touched)
    return len(seqs)


async def _repoint_ranges(tx: Tx, thread_id: str, ids: list[str], low: int, high: int, keys: set[str]) -> None:
    """Groups whose range starts or ends at a forgotten message start or end at the nearest one left."""
    groups = await tx.fetch(
        "SELECT id, first_seq, last_seq, first_message_id, last_message_id FROM om_groups"
        " WHERE record_key = ANY ($1::text[]) AND first_seq <= $2 AND last_seq >= $3"
        " AND (first_message_id = ANY ($4::text[]) OR last_message_id = ANY ($4::text[]))",
        sorted(keys),
        high,
        low,
        ids,
    )
    for gid, first_seq, last_seq, first_id, last_id in groups:
        first = await _nearest(tx, thread_id, first_seq, last_seq, "ASC") if first_id in ids else first_id
        last = await _nearest(tx, thread_id, first_seq, last_seq, "DESC") if last_id in ids else last_id
        await tx.execute(
            "UPDATE om_groups SET first_message_id = $1, last_message_id = $2 WHERE id = $3", first, last, gid
        )


async def _nearest(tx: Tx, thread_id: str, low: int, high: int, order: str) -> str | None:
    return await tx.fetchval(
        "SELECT id FROM messages WHERE thread_id = $1 AND seq BETWEEN $2 AND $3 AND role <> 'system'"
        f" ORDER BY seq {order} LIMIT 1",
        thread_id,
        low,
        high,
    )


async def _scrub(tx: Tx, phrase: str, access: Access, *, write: bool = True) -> int:
    """Remove the phrase from what the models derived (see store/scrub.py) within the resources
    `access` grants; how many values went. `write=False`: only count them (what a forget would scrub)."""
    found = scrub.needle(phrase)
    in_json = scrub.preselect(found, exact=tx.folds_exactly, json_column=True)

    async def execute(sql: str, *args: Any) -> int:
        return await tx.execute(sql, *args) if write else 1

    def quotes(*values: str | None) -> bool:
        return any(scrub.holds_json(v, found) for v in values if v)

    records, granted = access.sql_filter("resource_id", 1)
    keys = [r[0] for r in await tx.fetch(f"SELECT key FROM om_records WHERE {records} ORDER BY key", *granted)]
    removed = 0
    for key in keys:
        for thread_id, task, response in await tx.fetch(
            "SELECT thread_id, current_task, suggested_response FROM om_cursors WHERE record_key = $1", key
        ):
            for name, value in (("current_task", task), ("suggested_response", response)):
                if scrub.holds(value, found):
                    await execute(
                        f"UPDATE om_cursors SET {name} = NULL WHERE record_key = $1 AND thread_id = $2", key, thread_id
                    )
                    removed += 1
        extracted = await tx.fetchval("SELECT extracted FROM om_records WHERE key = $1", key)
        cleaned, n = scrub.without(json.loads(extracted or "{}"), found)
        if n:
            await execute(
                "UPDATE om_records SET extracted = $1 WHERE key = $2", json.dumps(cleaned, ensure_ascii=False), key
            )
            removed += n
        reflection = await tx.fetchrow("SELECT text, hints FROM om_buffered_reflections WHERE record_key = $1", key)
        if reflection is not None and quotes(*reflection):
            removed += await execute("DELETE FROM om_buffered_reflections WHERE record_key = $1", key)
        # A buffered chunk's hints (its task, its suggested response) may quote it: the chunk goes,
        # and its messages are buffered again.
        quoting: dict[str, int] = {}
        for thread_id, first, hints in await tx.fetch(
            "SELECT thread_id, first_seq, hints FROM om_chunks WHERE record_key = $1 ORDER BY first_seq", key
        ):
            if thread_id not in quoting and quotes(hints):
                quoting[thread_id] = first
        for thread_id, first in sorted(quoting.items()):
            removed += await _drop_chunks_from(tx, key, thread_id, first) if write else 1
    owned, granted = access.sql_filter("resource_id", 1)
    events = await tx.fetch(
        "SELECT id, payload FROM om_events"
        f" WHERE ({owned} OR record_key = ANY ($3::text[])) AND {_where(tx, 'payload', in_json, '$4')}",
        *granted,
        keys,
        in_json or "",
    )
    doomed = [r[0] for r in events if quotes(r[1])]
    if doomed:
        delete = "DELETE FROM om_events WHERE id = ANY ($1::bigint[])"
        removed += await tx.execute(delete, doomed) if write else len(doomed)
    # The breaker's excerpt of an unusable answer may quote it (a model's status, for every resource). It is
    # the server's, which only every resource's access sees: a tenant's forget scrubs it uncounted, so what
    # the count says never depends on text outside the tenant's resources.
    for model, error in await tx.fetch("SELECT model, last_error FROM model_health WHERE last_error IS NOT NULL"):
        if found in scrub.fold(error):
            cleaned_error = scrub.without_excerpt(error)
            if write:
                await tx.execute("UPDATE model_health SET last_error = $1 WHERE model = $2", cleaned_error, model)
            removed += 1 if access.every_resource else 0
    owned, granted = access.sql_filter("resource_id", 1)
    for thread_id, title, metadata, memory in await tx.fetch(
        f"SELECT id, title, metadata, working_memory FROM threads WHERE {owned}", *granted
    ):
        if scrub.holds(title, found):
            await execute("UPDATE threads SET title = NULL, title_pinned = false WHERE id = $1", thread_id)
            removed += 1
        cleaned, n = scrub.without(json.loads(metadata or "{}"), found)
        if n:
            await execute(
                "UPDATE threads SET metadata = $1 WHERE id = $2", json.dumps(cleaned, ensure_ascii=False), thread_id
            )
            removed += n
        removed += await _scrub_memory(tx, "threads", thread_id, memory, found, write)
    owned, granted = access.sql_filter("id", 1)
    for rid, memory in await tx.fetch(f"SELECT id, working_memory FROM resources WHERE {owned}", *granted):
        removed += await _scrub_memory(tx, "resources", rid, memory, found, write)
    return removed


async def _scrub_memory(tx: Tx, table: str, owner: str, memory: str | None, found: str, write: bool) -> int:
    """A working memory without the entries or lines holding the phrase, and its earlier
    values too (store/history.py); how many went."""
    text, n = scrub.text_without(memory, found) if memory else ("", 0)
    if n and write:
        await tx.execute(f"UPDATE {table} SET working_memory = $1 WHERE id = $2", text, owner)
    scope = "thread" if table == "threads" else "resource"
    for row_id, earlier in await tx.fetch(
        "SELECT id, text FROM om_working_memory_history WHERE scope = $1 AND owner = $2", scope, owner
    ):
        cleaned, m = scrub.text_without(earlier, found) if earlier else ("", 0)
        if m and write:
            await tx.execute("UPDATE om_working_memory_history SET text = $1 WHERE id = $2", cleaned, row_id)
    return n


# -- an erase the file could not finish yet (SQLite: a reader held an older snapshot) --------------


async def erase_pending(tx: Tx) -> str | None:
    """Since when deleted text may still be in the file's old pages, or None."""
    return await tx.fetchval("SELECT since FROM om_erase_pending WHERE id = 1")


async def mark_erase_pending(tx: Tx) -> None:
    await tx.execute(
        "INSERT INTO om_erase_pending AS p (id, since, forgets) VALUES (1, $1, 1)"
        " ON CONFLICT (id) DO UPDATE SET forgets = p.forgets + 1",
        now_iso(),
    )


async def clear_erase_pending(tx: Tx) -> None:
    await tx.execute("DELETE FROM om_erase_pending WHERE id = 1")
