"""Threads, resources and working memory; deleting them for good.

Read-modify-write operations lock the row they change first (`FOR UPDATE` on
PostgreSQL), so two replicas merging into one working memory queue up and
neither merge is lost, as SQLite's single writer guarantees there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from om_mcp.store import history, tombstones
from om_mcp.store.decode import THREAD_COLUMNS, dumps, now_iso, thread
from om_mcp.store.errors import NotFound
from om_mcp.store.keys import resource_key, thread_key
from om_mcp.store.rows import ResourceSummary, Scope, Thread
from om_mcp.store.tx import Tx

TABLES = {"resource": "resources", "thread": "threads"}


async def get(tx: Tx, thread_id: str, *, lock: bool = False) -> Thread | None:
    row = await tx.fetchrow(
        f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.id = $1{' FOR UPDATE' if lock else ''}", thread_id
    )
    return thread(row) if row else None


async def _require(tx: Tx, thread_id: str, *, lock: bool = False) -> Thread:
    found = await get(tx, thread_id, lock=lock)
    if found is None:
        raise NotFound(f"unknown thread {thread_id!r}", field="thread_id")
    return found


async def list_threads(
    tx: Tx, resource_id: str, *, before: str | None = None, after: str | None = None, limit: int = 20, offset: int = 0
) -> tuple[list[Thread], bool]:
    """Newest-updated first; returns (threads, has_more)."""
    where = ["t.resource_id = $1"]
    params: list[object] = [resource_id]
    if before:
        params.append(before)
        where.append(f"t.created_at < ${len(params)}")
    if after:
        params.append(after)
        where.append(f"t.created_at > ${len(params)}")
    params += [limit + 1, offset]
    rows = await tx.fetch(
        f"SELECT {THREAD_COLUMNS} FROM threads t WHERE {' AND '.join(where)}"
        f" ORDER BY t.updated_at DESC, t.id LIMIT ${len(params) - 1} OFFSET ${len(params)}",
        *params,
    )
    found = [thread(r) for r in rows]
    return found[:limit], len(found) > limit


async def resources(tx: Tx) -> list[ResourceSummary]:
    rows = await tx.fetch(
        "SELECT r.id, COUNT(t.id), COALESCE(SUM(t.message_count), 0), COALESCE(MAX(t.updated_at), r.updated_at)"
        " FROM resources r LEFT JOIN threads t ON t.resource_id = r.id GROUP BY r.id ORDER BY 4 DESC"
    )
    return [ResourceSummary(r[0], int(r[1]), int(r[2]), r[3]) for r in rows]


async def update(
    tx: Tx,
    thread_id: str,
    *,
    title: str | None = None,
    metadata: dict[str, Any] | None = None,
    pin_title: bool | None = None,
) -> Thread:
    """Set a title and merge metadata (a None value removes a key)."""
    found = await _require(tx, thread_id, lock=True)
    merged = dict(found.metadata)
    for key, value in (metadata or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    await tx.execute(
        "UPDATE threads SET title = COALESCE($1, title), metadata = $2, updated_at = $3,"
        " title_pinned = COALESCE($4, title_pinned) WHERE id = $5",
        title,
        dumps(merged),
        now_iso(),
        pin_title,
        thread_id,
    )
    return await _require(tx, thread_id)


async def set_generated_title(tx: Tx, thread_id: str, title: str) -> tuple[str | None, bool]:
    """A model-proposed title, unless the title is pinned; returns (old title, changed)."""
    found = await get(tx, thread_id, lock=True)
    if found is None or found.title_pinned or found.title == title:
        return (found.title if found else None), False
    await tx.execute("UPDATE threads SET title = $1 WHERE id = $2", title, thread_id)
    return found.title, True


async def set_metadata_paths(tx: Tx, thread_id: str, values: dict[str, Any]) -> None:
    """Write values at dot paths of the thread's metadata, creating objects on the way."""
    found = await get(tx, thread_id, lock=True)
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
    await tx.execute("UPDATE threads SET metadata = $1 WHERE id = $2", dumps(metadata), thread_id)


# -- working memory -------------------------------------------------------------------------


async def get_working_memory(tx: Tx, scope: Scope, key: str) -> str | None:
    return await tx.fetchval(f"SELECT working_memory FROM {TABLES[scope]} WHERE id = $1", key)


async def update_working_memory(
    tx: Tx, scope: Scope, key: str, update: Callable[[str | None], str | None]
) -> tuple[str | None, bool]:
    """Read-modify-write in one transaction, the row locked, so concurrent merges serialise and none is lost.
    `update` returns the new stored text, or None to leave it; returns (stored, changed)."""
    if scope == "resource":
        stamp = now_iso()
        await tx.execute(
            "INSERT INTO resources (id, created_at, updated_at) VALUES ($1, $2, $2) ON CONFLICT (id) DO NOTHING",
            key,
            stamp,
        )
    else:
        await _require(tx, key)
    table = TABLES[scope]
    current = await tx.fetchval(f"SELECT working_memory FROM {table} WHERE id = $1 FOR UPDATE", key)
    new = update(current)
    if new is None or new == current:
        return current, False
    await tx.execute(f"UPDATE {table} SET working_memory = $1, updated_at = $2 WHERE id = $3", new, now_iso(), key)
    await history.save_working_memory(tx, scope, key, new)
    return new, True


# -- deletion ----------------------------------------------------------------------------


async def _lock_records(tx: Tx, thread_ids: list[str], extra: Sequence[str] = ()) -> list[str]:
    """Lock every record the threads touch, in key order (the order commits take them)."""
    rows = await tx.fetch(
        "SELECT key FROM om_records WHERE key = ANY ($2::text[]) OR key IN (SELECT record_key FROM om_cursors"
        " WHERE thread_id = ANY ($1::text[])) ORDER BY key FOR UPDATE",
        thread_ids,
        [*(thread_key(t) for t in thread_ids), *extra],
    )
    return [r[0] for r in rows]


async def _forget_threads(tx: Tx, thread_ids: list[str]) -> int:
    """Delete threads with everything derived from them; their message count."""
    if not thread_ids:
        return 0
    stored = await tx.fetch(
        "SELECT thread_id, resource_id, id FROM messages WHERE thread_id = ANY ($1::text[])", thread_ids
    )
    count = len(stored)
    # Forgotten for good: an ingest, a hook or an import does not bring them back (store/tombstones.py). Their
    # ids only: the content of every "ok" of a deleted thread must not refuse later ones.
    await tombstones.bury_messages(tx, [(t, r, m, "", [], None) for t, r, m in stored], content=False)
    # Groups made from these threads, and reflections whose range took one in: a
    # reflection's text cannot be split, so it goes with any thread it covered.
    doomed = await tx.fetch(
        "WITH spans AS (SELECT thread_id, MIN(seq) AS lo, MAX(seq) AS hi FROM messages"
        "  WHERE thread_id = ANY ($1::text[]) GROUP BY thread_id)"
        " SELECT g.id FROM om_groups g WHERE g.thread_id = ANY ($1::text[]) OR g.record_key = ANY ($2::text[])"
        " OR (g.kind = 'reflection' AND EXISTS (SELECT 1 FROM spans s WHERE g.first_seq <= s.hi"
        "  AND g.last_seq >= s.lo))",
        thread_ids,
        [thread_key(t) for t in thread_ids],
    )
    ids = [r[0] for r in doomed]
    await tx.forget_index(thread_ids, ids)
    await tx.execute("DELETE FROM om_groups WHERE id = ANY ($1::text[])", ids)
    await tx.execute("DELETE FROM embeddings WHERE kind = 'group' AND ref = ANY ($1::text[])", ids)
    touched = [
        r[0]
        for r in await tx.fetch(
            "SELECT DISTINCT record_key FROM om_cursors WHERE thread_id = ANY ($1::text[]) ORDER BY record_key",
            thread_ids,
        )
    ]
    own = {thread_key(t) for t in thread_ids}
    await _forget_in_shared(tx, thread_ids, [key for key in touched if key not in own])
    for statement in (
        "DELETE FROM om_working_memory_history WHERE scope = 'thread' AND owner = ANY ($1::text[])",
        "DELETE FROM embeddings WHERE thread_id = ANY ($1::text[])",
        "DELETE FROM om_chunks WHERE thread_id = ANY ($1::text[])",
        "DELETE FROM om_cursors WHERE thread_id = ANY ($1::text[])",
        "DELETE FROM om_events WHERE thread_id = ANY ($1::text[])",
        "DELETE FROM messages WHERE thread_id = ANY ($1::text[])",
        "DELETE FROM threads WHERE id = ANY ($1::text[])",
    ):
        await tx.execute(statement, thread_ids)
    await tx.execute("DELETE FROM om_records WHERE key = ANY ($1::text[])", sorted(own))
    # A shared log's buffered reflection may quote the thread: it is recomputed later.
    await tx.execute("DELETE FROM om_buffered_reflections WHERE record_key = ANY ($1::text[])", touched)
    await tx.execute(
        "UPDATE om_records SET observation_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM om_groups"
        " WHERE record_key = om_records.key AND generation = om_records.generation) WHERE key = ANY ($1::text[])",
        touched,
    )
    return count


async def _forget_in_shared(tx: Tx, thread_ids: list[str], shared: list[str]) -> None:
    """What a shared (resource) log derived from the threads together with other threads,
    and which cannot be split: the events of every cycle that took a thread in (they
    carry the batch's current task, suggested response and extracted values), and the
    extracted values, which carry no record of where they came from (each cycle is shown
    the last ones): the record's map, its copies in thread metadata (`om.*`) and in the
    record's events. The next cycle extracts them again. Read and rewritten here rather
    than by JSON SQL, which the backends spell differently; deletions are rare."""
    gone = set(thread_ids)
    for key in shared:
        cycles, stripped = set(), []
        for event_id, cycle_id, payload in await tx.fetch(
            "SELECT id, cycle_id, payload FROM om_events WHERE record_key = $1 ORDER BY id", key
        ):
            values = json.loads(payload)
            if cycle_id is not None and gone & set(values.get("thread_ids") or ()):
                cycles.add(cycle_id)
            elif "extracted_values" in values:
                values.pop("extracted_values")
                stripped.append((dumps(values), event_id))
        await tx.execute("DELETE FROM om_events WHERE cycle_id = ANY ($1::text[])", sorted(cycles))
        await tx.executemany("UPDATE om_events SET payload = $1 WHERE id = $2", stripped)
        await tx.execute("UPDATE om_records SET extracted = '{}' WHERE key = $1 AND extracted <> '{}'", key)
        for thread_id, metadata in await tx.fetch(
            "SELECT id, metadata FROM threads WHERE id IN (SELECT thread_id FROM om_cursors WHERE record_key = $1)"
            " ORDER BY id FOR UPDATE",
            key,
        ):
            values = json.loads(metadata or "{}")
            if isinstance(values, dict) and "om" in values:
                values.pop("om")
                await tx.execute("UPDATE threads SET metadata = $1 WHERE id = $2", dumps(values), thread_id)


async def delete_thread(tx: Tx, thread_id: str) -> int:
    """Delete a thread with everything derived from it; returns its message count."""
    await _require(tx, thread_id, lock=True)
    await _lock_records(tx, [thread_id])
    count = await _forget_threads(tx, [thread_id])
    await tombstones.bury_threads(tx, [thread_id])
    await tx.purge()
    return count


async def delete_resource(tx: Tx, resource_id: str) -> tuple[int, int]:
    """Delete a resource, its threads and its shared memory; returns (threads, messages)."""
    threads = [
        r[0]
        for r in await tx.fetch("SELECT id FROM threads WHERE resource_id = $1 ORDER BY id FOR UPDATE", resource_id)
    ]
    exists = await tx.fetchval("SELECT 1 FROM resources WHERE id = $1 FOR UPDATE", resource_id)
    if not threads and exists is None:
        raise NotFound(f"unknown resource {resource_id!r}", field="resource_id")
    key = resource_key(resource_id)
    await _lock_records(tx, threads, [key])
    messages = await _forget_threads(tx, threads)
    await tombstones.bury_threads(tx, threads, resource_id)
    groups = [r[0] for r in await tx.fetch("SELECT id FROM om_groups WHERE record_key = $1", key)]
    await tx.forget_index([], groups)
    for statement in (
        "DELETE FROM om_groups WHERE record_key = $1",
        "DELETE FROM om_chunks WHERE record_key = $1",
        "DELETE FROM om_cursors WHERE record_key = $1",
        "DELETE FROM om_buffered_reflections WHERE record_key = $1",
        "DELETE FROM om_events WHERE record_key = $1",
        "DELETE FROM om_records WHERE key = $1",
        "DELETE FROM om_leases WHERE key = $1",
    ):
        await tx.execute(statement, key)
    await tx.execute("DELETE FROM om_events WHERE resource_id = $1", resource_id)
    await tx.execute("DELETE FROM embeddings WHERE resource_id = $1", resource_id)
    await tx.execute("DELETE FROM om_working_memory_history WHERE scope = 'resource' AND owner = $1", resource_id)
    await tx.execute("DELETE FROM resources WHERE id = $1", resource_id)
    await tx.purge(resource_id)
    return len(threads), messages
