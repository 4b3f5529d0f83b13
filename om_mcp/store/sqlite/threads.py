"""Threads, resources and working memory; deleting them for good."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from om_mcp.store.errors import NotFound
from om_mcp.store.keys import resource_key, thread_key
from om_mcp.store.rows import ResourceSummary, Scope, Thread
from om_mcp.store.sqlite import fts
from om_mcp.store.sqlite.decode import THREAD_COLUMNS, dumps, now_iso, thread


def get(conn: sqlite3.Connection, thread_id: str) -> Thread | None:
    row = conn.execute(f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.id = ?", (thread_id,)).fetchone()
    return thread(row) if row else None


def _require(conn: sqlite3.Connection, thread_id: str) -> Thread:
    found = get(conn, thread_id)
    if found is None:
        raise NotFound(f"unknown thread {thread_id!r}", field="thread_id")
    return found


def list_threads(
    conn: sqlite3.Connection,
    resource_id: str,
    *,
    before: str | None = None,
    after: str | None = None,
    limit: int = 20,
    offset: int = 0,
) -> tuple[list[Thread], bool]:
    """Newest-updated first; returns (threads, has_more)."""
    where, params = ["t.resource_id = ?"], [resource_id]
    if before:
        where.append("t.created_at < ?")
        params.append(before)
    if after:
        where.append("t.created_at > ?")
        params.append(after)
    rows = conn.execute(
        f"SELECT {THREAD_COLUMNS} FROM threads t WHERE {' AND '.join(where)}"
        " ORDER BY t.updated_at DESC, t.id LIMIT ? OFFSET ?",
        (*params, limit + 1, offset),
    ).fetchall()
    found = [thread(r) for r in rows]
    return found[:limit], len(found) > limit


def resources(conn: sqlite3.Connection) -> list[ResourceSummary]:
    rows = conn.execute(
        "SELECT r.id, COUNT(t.id), COALESCE(SUM(t.message_count), 0), COALESCE(MAX(t.updated_at), r.updated_at)"
        " FROM resources r LEFT JOIN threads t ON t.resource_id = r.id GROUP BY r.id ORDER BY 4 DESC"
    ).fetchall()
    return [ResourceSummary(*r) for r in rows]


def update(
    conn: sqlite3.Connection,
    thread_id: str,
    *,
    title: str | None = None,
    metadata: dict[str, Any] | None = None,
    pin_title: bool | None = None,
) -> Thread:
    """Set a title and merge metadata (a None value removes a key)."""
    found = _require(conn, thread_id)
    merged = dict(found.metadata)
    for key, value in (metadata or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    conn.execute(
        "UPDATE threads SET title = COALESCE(?, title), metadata = ?, updated_at = ?,"
        " title_pinned = COALESCE(?, title_pinned) WHERE id = ?",
        (title, dumps(merged), now_iso(), None if pin_title is None else int(pin_title), thread_id),
    )
    return _require(conn, thread_id)


def set_generated_title(conn: sqlite3.Connection, thread_id: str, title: str) -> tuple[str | None, bool]:
    """A model-proposed title, unless the title is pinned; returns (old title, changed)."""
    found = get(conn, thread_id)
    if found is None or found.title_pinned or found.title == title:
        return (found.title if found else None), False
    conn.execute("UPDATE threads SET title = ? WHERE id = ?", (title, thread_id))
    return found.title, True


def set_metadata_paths(conn: sqlite3.Connection, thread_id: str, values: dict[str, Any]) -> None:
    """Write values at dot paths of the thread's metadata, creating objects on the way."""
    found = get(conn, thread_id)
    if found is None or not values:
        return
    metadata = json.loads(json.dumps(found.metadata))
    for path, value in values.items():
        node = metadata
        *parents, leaf = path.split(".")
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[leaf] = value
    conn.execute("UPDATE threads SET metadata = ? WHERE id = ?", (dumps(metadata), thread_id))


# -- working memory -------------------------------------------------------------------------


def get_working_memory(conn: sqlite3.Connection, scope: Scope, key: str) -> str | None:
    table = "resources" if scope == "resource" else "threads"
    row = conn.execute(f"SELECT working_memory FROM {table} WHERE id = ?", (key,)).fetchone()
    return row[0] if row else None


def update_working_memory(
    conn: sqlite3.Connection, scope: Scope, key: str, update: Callable[[str | None], str | None]
) -> tuple[str | None, bool]:
    """Read-modify-write in one transaction, so concurrent merges serialise and none is lost.
    `update` returns the new stored text, or None to leave it; returns (stored, changed)."""
    if scope == "resource":
        stamp = now_iso()
        conn.execute(
            "INSERT INTO resources (id, created_at, updated_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (key, stamp, stamp),
        )
    else:
        _require(conn, key)
    table = "resources" if scope == "resource" else "threads"
    current = conn.execute(f"SELECT working_memory FROM {table} WHERE id = ?", (key,)).fetchone()[0]
    new = update(current)
    if new is None or new == current:
        return current, False
    conn.execute(f"UPDATE {table} SET working_memory = ?, updated_at = ? WHERE id = ?", (new, now_iso(), key))
    return new, True


# -- deletion ----------------------------------------------------------------------------


def _forget_thread(conn: sqlite3.Connection, thread_id: str) -> int:
    count = conn.execute("SELECT COUNT(*) FROM messages WHERE thread_id = ?", (thread_id,)).fetchone()[0]
    span = conn.execute("SELECT MIN(seq), MAX(seq) FROM messages WHERE thread_id = ?", (thread_id,)).fetchone()
    fts.forget_thread(conn, thread_id)
    # Groups made from this thread, and reflections whose range took it in: a
    # reflection's text cannot be split, so it goes with any thread it covered.
    doomed = "thread_id = ? OR record_key = ?"
    params: list[Any] = [thread_id, thread_key(thread_id)]
    if span[0] is not None:
        doomed += " OR (kind = 'reflection' AND first_seq <= ? AND last_seq >= ?)"
        params += [span[1], span[0]]
    ids = [r[0] for r in conn.execute(f"SELECT id FROM om_groups WHERE {doomed}", params)]
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        conn.execute(f"DELETE FROM om_groups_fts WHERE group_id IN ({marks})", batch)
        conn.execute(f"DELETE FROM om_groups WHERE id IN ({marks})", batch)
        conn.execute(f"DELETE FROM embeddings WHERE kind = 'group' AND ref IN ({marks})", batch)
    touched = {
        r[0] for r in conn.execute("SELECT DISTINCT record_key FROM om_cursors WHERE thread_id = ?", (thread_id,))
    }
    _forget_in_shared(conn, thread_id, touched - {thread_key(thread_id)})
    for statement in (
        "DELETE FROM embeddings WHERE thread_id = ?",
        "DELETE FROM om_chunks WHERE thread_id = ?",
        "DELETE FROM om_cursors WHERE thread_id = ?",
        "DELETE FROM om_events WHERE thread_id = ?",
        "DELETE FROM messages WHERE thread_id = ?",
        "DELETE FROM threads WHERE id = ?",
    ):
        conn.execute(statement, (thread_id,))
    conn.execute("DELETE FROM om_records WHERE key = ?", (thread_key(thread_id),))
    for key in touched:
        # A shared log's buffered reflection may quote the thread: it is recomputed later.
        conn.execute("DELETE FROM om_buffered_reflections WHERE record_key = ?", (key,))
        conn.execute(
            "UPDATE om_records SET observation_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM om_groups"
            " WHERE record_key = om_records.key AND generation = om_records.generation) WHERE key = ?",
            (key,),
        )
    return count


def _forget_in_shared(conn: sqlite3.Connection, thread_id: str, shared: set[str]) -> None:
    """What a shared (resource) log derived from the thread together with other threads,
    and which cannot be split: the events of every cycle that took the thread in (they
    carry the batch's current task, suggested response and extracted values), and the
    extracted values, which carry no record of where they came from (each cycle is shown
    the last ones): the record's map, its copies in thread metadata (`om.*`) and in the
    record's events. The next cycle extracts them again."""
    for key in shared:
        cycles = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT cycle_id FROM om_events WHERE record_key = ? AND cycle_id IS NOT NULL"
                " AND EXISTS (SELECT 1 FROM json_each(payload, '$.thread_ids') WHERE value = ?)",
                (key, thread_id),
            )
        ]
        for start in range(0, len(cycles), 500):
            batch = cycles[start : start + 500]
            conn.execute(f"DELETE FROM om_events WHERE cycle_id IN ({','.join('?' * len(batch))})", batch)
        conn.execute(
            "UPDATE om_events SET payload = json_remove(payload, '$.extracted_values')"
            " WHERE record_key = ? AND json_type(payload, '$.extracted_values') IS NOT NULL",
            (key,),
        )
        conn.execute("UPDATE om_records SET extracted = '{}' WHERE key = ? AND extracted != '{}'", (key,))
        conn.execute(
            "UPDATE threads SET metadata = json_remove(metadata, '$.om') WHERE json_type(metadata, '$.om') IS NOT NULL"
            " AND id IN (SELECT thread_id FROM om_cursors WHERE record_key = ?)",
            (key,),
        )


def delete_thread(conn: sqlite3.Connection, thread_id: str) -> int:
    """Delete a thread with everything derived from it; returns its message count."""
    _require(conn, thread_id)
    count = _forget_thread(conn, thread_id)
    _purge(conn)
    return count


def delete_resource(conn: sqlite3.Connection, resource_id: str) -> tuple[int, int]:
    """Delete a resource, its threads and its shared memory; returns (threads, messages)."""
    threads = [r[0] for r in conn.execute("SELECT id FROM threads WHERE resource_id = ?", (resource_id,))]
    if not threads and conn.execute("SELECT 1 FROM resources WHERE id = ?", (resource_id,)).fetchone() is None:
        raise NotFound(f"unknown resource {resource_id!r}", field="resource_id")
    messages = sum(_forget_thread(conn, t) for t in threads)
    key = resource_key(resource_id)
    ids = [r[0] for r in conn.execute("SELECT id FROM om_groups WHERE record_key = ?", (key,))]
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        conn.execute(f"DELETE FROM om_groups_fts WHERE group_id IN ({','.join('?' * len(batch))})", batch)
    for statement in (
        "DELETE FROM om_groups WHERE record_key = ?",
        "DELETE FROM om_chunks WHERE record_key = ?",
        "DELETE FROM om_cursors WHERE record_key = ?",
        "DELETE FROM om_buffered_reflections WHERE record_key = ?",
        "DELETE FROM om_events WHERE record_key = ?",
        "DELETE FROM om_records WHERE key = ?",
    ):
        conn.execute(statement, (key,))
    conn.execute("DELETE FROM om_events WHERE resource_id = ?", (resource_id,))
    conn.execute("DELETE FROM embeddings WHERE resource_id = ?", (resource_id,))
    conn.execute("DELETE FROM resources WHERE id = ?", (resource_id,))
    _purge(conn)
    return len(threads), messages


def _purge(conn: sqlite3.Connection) -> None:
    """Rewrite both search indexes, so the deleted rows' words leave the file (secure_delete zeroes the pages)."""
    fts.purge(conn)
    conn.execute("INSERT INTO om_groups_fts (om_groups_fts) VALUES ('optimize')")
