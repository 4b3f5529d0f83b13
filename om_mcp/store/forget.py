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

from om_mcp.store import coordination, registry, scrub, tombstones
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


# A message's said columns (the registry's, forgotten with the message) and where MESSAGE_COLUMNS reads them.
_MESSAGE_SAID = [c for c in registry.said_columns() if c.table == "messages"]
_AT = {name.strip().removeprefix("m."): i for i, name in enumerate(MESSAGE_COLUMNS.split(","))}
assert all(c.forget == "message" and c.column in _AT for c in _MESSAGE_SAID)
# The log's text columns: the engine plans which lines go (`engine/forget_phrase.py`), read below.
assert {(c.table, c.column) for c in registry.said_columns() if c.forget == "lines"} == {
    ("om_groups", "text"),
    ("om_chunks", "text"),
}


def _message_holds(row: Sequence[Any], found: str) -> bool:
    """Does a message row hold the folded phrase in any field it stores: its text, any string of its
    parts at any depth (tool arguments and results, names, a file's decoded data), its metadata?"""
    for column in _MESSAGE_SAID:
        value = row[_AT[column.column]]
        if column.form == "text" and found in scrub.fold(value or ""):
            return True
        if column.form != "text" and scrub.holds_json(value, found):
            return True
    return False


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

    # Every said column of a message (the registry's); a file part's base64 data hides its text from the
    # SQL, so messages with one are checked here.
    holding = " OR ".join(
        _where(tx, f"m.{c.column}", plain if c.form == "text" else in_json, "$1" if c.form == "text" else "$2")
        for c in _MESSAGE_SAID
    )
    in_messages, granted = access.sql_filter("m.resource_id", 3)
    await tx.scan(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE ({holding}"
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
        # Forgotten for good: no message holding it is stored again, and any other text gets a marker in its
        # place (store/phrases.py, checked by store/gate.py); written first, so nothing below brings it back.
        await tombstones.bury_phrase(tx, plan.scrub, plan.scrub_within)
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


# How each kind of said column loses a phrase (registry.Forget); `message` and `lines` are the
# engine's plan (whole messages; lines of the log in every generation), applied above.
PLANNED = frozenset({"message", "lines"})


def _scope(table: registry.Table, access: Access) -> tuple[str, tuple[bool, list[str]]]:
    """SQL keeping the rows of `table` within `access` (its parameters are $2 and $3), and those two."""
    resource, granted = access.sql_filter("resource_id", 2)
    threads = f"SELECT id FROM threads WHERE {resource}"
    records = f"SELECT key FROM om_records WHERE {resource}"
    if table.owner == "resource":
        return access.sql_filter(table.owner_columns[0], 2)
    if table.owner == "record":
        return f"{table.owner_columns[0]} IN ({records})", granted
    if table.owner == "history":
        owner, _ = access.sql_filter("owner", 2)
        return f"((scope = 'resource' AND {owner}) OR (scope = 'thread' AND owner IN ({threads})))", granted
    if table.owner == "event":
        return f"({resource} OR record_key IN ({records}) OR thread_id IN ({threads}))", granted
    return "($2::boolean OR $3::text[] IS NOT NULL)", granted  # the server's own: every row (model health)


async def _scrub(tx: Tx, phrase: str, access: Access, *, write: bool = True) -> int:
    """Remove the phrase from every said column of the registry the engine's plan does not handle
    (titles, metadata, working memory and every earlier value of it, tasks, extracted values, events,
    buffered work, model-health excerpts), value by value, within the resources `access` grants; how
    many values went. `write=False`: only count them (what a forget would take).

    The server's own text (the breaker's excerpt of an unusable answer, which can quote a phrase of any
    resource) is scrubbed by every forget but counted only for every resource's access, so what the count
    says never depends on text outside the caller's resources."""
    found = scrub.needle(phrase)
    removed = 0
    gone: set[tuple[str, tuple[Any, ...]]] = set()  # rows deleted whole, counted once (as a forget finds them gone)
    for column in registry.said_columns():
        if column.forget in PLANNED:
            continue
        table = registry.TABLES[column.table]
        needle = scrub.preselect(found, exact=tx.folds_exactly, json_column=column.form != "text")
        within, granted = _scope(table, access)
        keys = ", ".join(table.key)
        extra = ", record_key, thread_id, first_seq" if column.forget == "drop-chunks" else ""
        rows = await tx.fetch(
            f"SELECT {keys}, {column.column}{extra} FROM {column.table}"
            f" WHERE {_where(tx, column.column, needle, '$1')} AND {within} ORDER BY {keys}",
            needle or "",
            *granted,
        )
        counted = table.owner != "server" or access.every_resource
        for row in rows:
            key, value = tuple(row[: len(table.key)]), row[len(table.key)]
            if (column.table, key) in gone:
                continue
            holds = scrub.holds_json(value, found) if column.form != "text" else found in scrub.fold(value or "")
            if holds:
                taken = await _take_out(tx, column, table, key, value, row, found, write, gone)
                removed += taken if counted else 0
    return removed


async def _take_out(
    tx: Tx,
    column: registry.SaidColumn,
    table: registry.Table,
    key: Sequence[Any],
    value: str,
    row: Sequence[Any],
    found: str,
    write: bool,
    gone: set[tuple[str, tuple[Any, ...]]],
) -> int:
    """Take the phrase out of one value the way its column says (registry.Forget); how many values
    (or entries, or lines) went. A row deleted whole joins `gone`, so that a preview counts it once,
    as the forget does."""
    match = " AND ".join(f"{k} = ${i + 2}" for i, k in enumerate(table.key))
    target = f"{column.table} SET {column.column}"
    how = column.forget
    if how in ("null", "untitle"):
        pinned = ", title_pinned = false" if how == "untitle" else ""
        if write:
            await tx.execute(f"UPDATE {target} = $1{pinned} WHERE {match}", None, *key)
        return 1
    if how == "delete":
        gone.add((column.table, tuple(key)))
        if write:
            where = " AND ".join(f"{k} = ${i + 1}" for i, k in enumerate(table.key))
            await tx.execute(f"DELETE FROM {column.table} WHERE {where}", *key)
        return 1
    if how == "drop-chunks":  # a buffered chunk quoting it, with the thread's later ones (buffered again)
        record_key, thread_id, first = row[-3], row[-2], row[-1]
        if write:
            return await _drop_chunks_from(tx, record_key, thread_id, first)
        later = await tx.fetch(
            "SELECT id FROM om_chunks WHERE record_key = $1 AND thread_id = $2 AND first_seq >= $3",
            record_key,
            thread_id,
            first,
        )
        dropped = {(column.table, (r[0],)) for r in later} - gone
        gone |= dropped
        return len(dropped)
    if how == "excerpt":
        if write:
            await tx.execute(f"UPDATE {target} = $1 WHERE {match}", scrub.without_excerpt(value), *key)
        return 1
    if how == "entries":
        parsed = json.loads(value or "{}")
        cleaned, n = scrub.without(parsed, found) if isinstance(parsed, dict) else ({}, 1)
        if write and n:
            await tx.execute(f"UPDATE {target} = $1 WHERE {match}", json.dumps(cleaned, ensure_ascii=False), *key)
        return n
    if how == "memory":
        text, n = scrub.text_without(value, found)
        if write and n:
            await tx.execute(f"UPDATE {target} = $1 WHERE {match}", text, *key)
        return n
    raise AssertionError(f"{column.table}.{column.column}: no way to forget {how!r}")


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
