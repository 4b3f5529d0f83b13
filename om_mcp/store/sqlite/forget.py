"""Forgetting one thing on SQLite: messages, observation lines and groups, what quotes them.

The engine works out what to remove (`Rewrite`: which message seqs, the new text of
each group and buffered chunk, a phrase to scrub from derived text); this applies it in
one transaction, after checking that no record changed since the plan was made:
- a message goes with its index entry, its vector and the next message's (which embeds
  it), its share of the unobserved totals, and any buffered chunk observed from it;
  groups whose range named it point at the nearest message left;
- a group's new text replaces the old in its search index; its vector is rebuilt later;
- every record whose log changed loses its buffered reflection and counts one more
  user edit, so a cycle that read the log before cannot commit (commits.py `_unchanged`).
Phrases are matched with `om_casefold`, which the connection registers (database.py).
Then the search indexes are rewritten without the deleted rows and, outside the
transaction, the WAL is folded in (SQLiteStore), so the text leaves the file's bytes.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from om_mcp.store import coordination, scrub
from om_mcp.store.decode import CHUNK_COLUMNS, GROUP_COLUMNS, MESSAGE_COLUMNS, chunk, group, message, now_iso
from om_mcp.store.rows import Found, Rewrite, Rewritten
from om_mcp.store.sqlite import fts
from om_mcp.store.sqlite.driver import run


def _marks(values: list[Any]) -> str:
    return ",".join("?" * len(values))


def group_records(conn: sqlite3.Connection, group_ids: list[str]) -> dict[str, str]:
    """The record each group belongs to."""
    if not group_ids:
        return {}
    rows = conn.execute(f"SELECT id, record_key FROM om_groups WHERE id IN ({_marks(group_ids)})", group_ids)
    return dict(rows.fetchall())


def find_text(conn: sqlite3.Connection, phrase: str, resource_id: str | None = None, limit: int = 500) -> Found:
    """The messages, groups (every generation) and buffered chunks holding `phrase`, ignoring case."""
    found = scrub.needle(phrase)
    where, params = ("AND m.resource_id = ?", [resource_id]) if resource_id is not None else ("", [])
    rows = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE instr(om_casefold(m.body), ?) > 0 {where}"
        " ORDER BY m.seq LIMIT ?",
        [found, *params, limit + 1],
    ).fetchall()
    out = Found(messages=[message(r) for r in rows[:limit]], truncated=len(rows) > limit)
    owner, params = ("AND r.resource_id = ?", [resource_id]) if resource_id is not None else ("", [])
    out.groups = [
        (r[0], group(r[1:]))
        for r in conn.execute(
            f"SELECT g.record_key, {GROUP_COLUMNS} FROM om_groups g JOIN om_records r ON r.key = g.record_key"
            f" WHERE instr(om_casefold(g.text), ?) > 0 {owner} ORDER BY g.record_key, g.generation, g.position",
            [found, *params],
        )
    ]
    columns = ", ".join(f"c.{c.strip()}" for c in CHUNK_COLUMNS.split(","))
    out.chunks = [
        (r[0], chunk(r[1:]))
        for r in conn.execute(
            f"SELECT c.record_key, {columns} FROM om_chunks c JOIN om_records r ON r.key = c.record_key"
            f" WHERE instr(om_casefold(c.text), ?) > 0 {owner} ORDER BY c.record_key, c.first_seq",
            [found, *params],
        )
    ]
    return out


def apply_rewrite(conn: sqlite3.Connection, plan: Rewrite) -> Rewritten | None:
    """Apply the plan, all or nothing; None (and nothing changed) when a record moved on since."""
    for key, version in plan.expected.items():
        row = conn.execute("SELECT version FROM om_records WHERE key = ?", (key,)).fetchone()
        if row is None or row[0] != version:
            return None
    done = Rewritten()
    touched: set[str] = set()
    for thread_id, seqs in plan.messages.items():
        done.messages += _forget_messages(conn, thread_id, seqs, touched)
    for group_id, change in plan.groups.items():
        row = conn.execute("SELECT record_key FROM om_groups WHERE id = ?", (group_id,)).fetchone()
        if row is None:
            continue
        touched.add(row[0])
        conn.execute("DELETE FROM om_groups_fts WHERE group_id = ?", (group_id,))
        conn.execute("DELETE FROM embeddings WHERE kind = 'group' AND ref = ?", (group_id,))
        if change is None or not change[0].strip():
            conn.execute("DELETE FROM om_groups WHERE id = ?", (group_id,))
            done.groups_removed += 1
        else:
            conn.execute("UPDATE om_groups SET text = ?, tokens = ? WHERE id = ?", (change[0], change[1], group_id))
            conn.execute(
                "INSERT INTO om_groups_fts (group_id, record_key, text) VALUES (?, ?, ?)", (group_id, row[0], change[0])
            )
            done.groups_changed += 1
    for chunk_id, change in plan.chunks.items():
        row = conn.execute(
            "SELECT record_key, thread_id, first_seq FROM om_chunks WHERE id = ?", (chunk_id,)
        ).fetchone()
        if row is None:
            continue
        touched.add(row[0])
        if change is None or not change[0].strip():
            done.chunks += _drop_chunks_from(conn, row[0], row[1], row[2])
        else:
            conn.execute("UPDATE om_chunks SET text = ?, tokens = ? WHERE id = ?", (change[0], change[1], chunk_id))
            done.chunks += 1
    if plan.scrub:
        done.derived += _scrub(conn, plan.scrub, plan.scrub_resource)
    for key in sorted(touched):
        conn.execute("DELETE FROM om_buffered_reflections WHERE record_key = ?", (key,))
        conn.execute(
            "UPDATE om_records SET observation_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM om_groups"
            " WHERE record_key = om_records.key AND generation = om_records.generation),"
            " edits = edits + 1, version = version + 1, updated_at = ? WHERE key = ?",
            (now_iso(), key),
        )
    done.records = sorted(touched)
    run(conn, coordination.add_events, plan.events)
    if done.messages:
        fts.purge(conn)
    if plan.groups or plan.scrub:
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("INSERT INTO om_groups_fts (om_groups_fts) VALUES ('optimize')")
    return done


def _drop_chunks_from(conn: sqlite3.Connection, key: str, thread_id: str, first_seq: int) -> int:
    """A chunk and the thread's later ones (they would no longer continue from the cursor)."""
    return conn.execute(
        "DELETE FROM om_chunks WHERE record_key = ? AND thread_id = ? AND first_seq >= ?", (key, thread_id, first_seq)
    ).rowcount


def _forget_messages(conn: sqlite3.Connection, thread_id: str, seqs: list[int], touched: set[str]) -> int:
    rows = conn.execute(
        f"SELECT seq, id, tokens, observable, role FROM messages WHERE thread_id = ? AND seq IN ({_marks(seqs)})",
        [thread_id, *seqs],
    ).fetchall()
    if not rows:
        return 0
    seqs = [r[0] for r in rows]
    ids = [r[1] for r in rows]
    fts.forget_messages(conn, seqs)
    # A message's vector embeds the one before it, so the next message's goes too (rebuilt later).
    after = [
        r[0]
        for s in seqs
        for r in conn.execute(
            f"SELECT seq FROM messages WHERE thread_id = ? AND seq > ? AND seq NOT IN ({_marks(seqs)})"
            " AND body != '' ORDER BY seq LIMIT 1",
            [thread_id, s, *seqs],
        )
    ]
    refs = [str(s) for s in {*seqs, *after}]
    conn.execute(f"DELETE FROM embeddings WHERE kind = 'message' AND ref IN ({_marks(refs)})", refs)
    for key, cursor, counted in conn.execute(
        "SELECT record_key, seq, counted_seq FROM om_cursors WHERE thread_id = ?", (thread_id,)
    ).fetchall():
        touched.add(key)
        pending = [r for r in rows if cursor < r[0] <= counted and r[3]]
        conn.execute(
            "UPDATE om_cursors SET pending_tokens = MAX(0, pending_tokens - ?),"
            " pending_messages = MAX(0, pending_messages - ?) WHERE record_key = ? AND thread_id = ?",
            (sum(r[2] for r in pending), len(pending), key, thread_id),
        )
        # Buffered observations made from a forgotten message go (their messages are buffered again).
        first = conn.execute(
            "SELECT MIN(first_seq) FROM om_chunks WHERE record_key = ? AND thread_id = ? AND EXISTS ("
            " SELECT 1 FROM (SELECT value AS s FROM json_each(?)) WHERE s BETWEEN first_seq AND last_seq)",
            (key, thread_id, json.dumps(seqs)),
        ).fetchone()[0]
        if first is not None:
            _drop_chunks_from(conn, key, thread_id, first)
    conn.execute(f"DELETE FROM messages WHERE thread_id = ? AND seq IN ({_marks(seqs)})", [thread_id, *seqs])
    last = conn.execute(
        "SELECT id, created_at FROM messages WHERE thread_id = ? AND role = 'assistant' ORDER BY seq DESC LIMIT 1",
        (thread_id,),
    ).fetchone()
    conn.execute(
        "UPDATE threads SET message_count = MAX(0, message_count - ?), last_assistant_id = ?, last_assistant_at = ?"
        " WHERE id = ?",
        (len(seqs), last[0] if last else None, last[1] if last else None, thread_id),
    )
    _repoint_ranges(conn, thread_id, ids, min(seqs), max(seqs), touched)
    return len(seqs)


def _repoint_ranges(
    conn: sqlite3.Connection, thread_id: str, ids: list[str], low: int, high: int, keys: set[str]
) -> None:
    """Groups whose range starts or ends at a forgotten message start or end at the nearest one left."""
    if not keys:
        return
    key_list = sorted(keys)
    for gid, first_seq, last_seq, first_id, last_id in conn.execute(
        f"SELECT id, first_seq, last_seq, first_message_id, last_message_id FROM om_groups"
        f" WHERE record_key IN ({_marks(key_list)}) AND first_seq <= ? AND last_seq >= ?"
        f" AND (first_message_id IN ({_marks(ids)}) OR last_message_id IN ({_marks(ids)}))",
        [*key_list, high, low, *ids, *ids],
    ).fetchall():
        first = _nearest(conn, thread_id, first_seq, last_seq, "ASC") if first_id in ids else first_id
        last = _nearest(conn, thread_id, first_seq, last_seq, "DESC") if last_id in ids else last_id
        conn.execute("UPDATE om_groups SET first_message_id = ?, last_message_id = ? WHERE id = ?", (first, last, gid))


def _nearest(conn: sqlite3.Connection, thread_id: str, low: int, high: int, order: str) -> str | None:
    row = conn.execute(
        f"SELECT id FROM messages WHERE thread_id = ? AND seq BETWEEN ? AND ? AND role != 'system'"
        f" ORDER BY seq {order} LIMIT 1",
        (thread_id, low, high),
    ).fetchone()
    return row[0] if row else None


def _scrub(conn: sqlite3.Connection, phrase: str, resource_id: str | None) -> int:
    """Remove the phrase from what the models derived (see store/scrub.py); how many values went."""
    found = scrub.needle(phrase)
    escaped = json.dumps(found, ensure_ascii=False)[1:-1]  # how it reads inside a JSON payload
    where, params = ("WHERE resource_id = ?", [resource_id]) if resource_id is not None else ("", [])
    keys = [r[0] for r in conn.execute(f"SELECT key FROM om_records {where}", params)]
    removed = 0
    for key in keys:
        for thread_id, task, response in conn.execute(
            "SELECT thread_id, current_task, suggested_response FROM om_cursors WHERE record_key = ?", (key,)
        ).fetchall():
            cleared = [
                name for name, v in (("current_task", task), ("suggested_response", response)) if scrub.holds(v, found)
            ]
            for name in cleared:
                conn.execute(
                    f"UPDATE om_cursors SET {name} = NULL WHERE record_key = ? AND thread_id = ?", (key, thread_id)
                )
            removed += len(cleared)
        extracted = conn.execute("SELECT extracted FROM om_records WHERE key = ?", (key,)).fetchone()[0]
        cleaned, n = scrub.without(json.loads(extracted or "{}"), found)
        if n:
            conn.execute(
                "UPDATE om_records SET extracted = ? WHERE key = ?", (json.dumps(cleaned, ensure_ascii=False), key)
            )
            removed += n
        removed += conn.execute(
            "DELETE FROM om_buffered_reflections WHERE record_key = ? AND (instr(om_casefold(text), ?) > 0"
            " OR instr(om_casefold(hints), ?) > 0 OR instr(om_casefold(hints), ?) > 0)",
            (key, found, found, escaped),
        ).rowcount
        # A buffered chunk's hints (its task, its suggested response) may quote it: the chunk goes,
        # and its messages are buffered again.
        for thread_id, first in conn.execute(
            "SELECT thread_id, MIN(first_seq) FROM om_chunks WHERE record_key = ?"
            " AND (instr(om_casefold(hints), ?) > 0 OR instr(om_casefold(hints), ?) > 0) GROUP BY thread_id",
            (key, found, escaped),
        ).fetchall():
            removed += _drop_chunks_from(conn, key, thread_id, first)
    marks = _marks(keys) if keys else "NULL"
    event_scope = f"(resource_id = ? OR record_key IN ({marks}))" if resource_id is not None else "1"
    removed += conn.execute(
        f"DELETE FROM om_events WHERE {event_scope}"
        " AND (instr(om_casefold(payload), ?) > 0 OR instr(om_casefold(payload), ?) > 0)",
        [*([resource_id, *keys] if resource_id is not None else []), found, escaped],
    ).rowcount
    for thread_id, title, metadata, memory in conn.execute(
        f"SELECT id, title, metadata, working_memory FROM threads {where}", params
    ).fetchall():
        if scrub.holds(title, found):
            conn.execute("UPDATE threads SET title = NULL, title_pinned = 0 WHERE id = ?", (thread_id,))
            removed += 1
        cleaned, n = scrub.without(json.loads(metadata or "{}"), found)
        if n:
            conn.execute(
                "UPDATE threads SET metadata = ? WHERE id = ?", (json.dumps(cleaned, ensure_ascii=False), thread_id)
            )
            removed += n
        if memory:
            text, n = scrub.text_without(memory, found)
            if n:
                conn.execute("UPDATE threads SET working_memory = ? WHERE id = ?", (text, thread_id))
                removed += n
    resource_where = "WHERE id = ?" if resource_id is not None else ""
    for rid, memory in conn.execute(f"SELECT id, working_memory FROM resources {resource_where}", params).fetchall():
        if memory:
            text, n = scrub.text_without(memory, found)
            if n:
                conn.execute("UPDATE resources SET working_memory = ? WHERE id = ?", (text, rid))
                removed += n
    return removed
