"""Vectors on PostgreSQL: pgvector where the extension is there, else real[] compared in Python.

With pgvector the `embeddings.vector` column is of type `vector` and the nearest
neighbours of a resource are found by an exact scan in the database (`<=>`,
cosine distance) over the (resource_id, embedder) index: exact, and cheap up to
many thousands of vectors per resource. Without it the column is real[] and the
rows come back to be compared here, as SQLite does. A database created without
the extension switches to `vector` at the next start after it is installed.
"""

from __future__ import annotations

import logging
from typing import Any

from om_mcp.store.rows import Pending

log = logging.getLogger(__name__)

ACTIVE_GROUP = (
    "EXISTS (SELECT 1 FROM om_groups g JOIN om_records r ON r.key = g.record_key AND r.generation = g.generation"
    " WHERE g.id = e.ref)"
)
WITHOUT = "pgvector is not installed on the server: vectors are compared in Python (install it for in-database search)"


async def adopt(conn: Any) -> None:
    """Use pgvector when the server has it (run at start, under the migration lock)."""
    kind = await conn.fetchval(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
        " WHERE attrelid = 'embeddings'::regclass AND attname = 'vector'"
    )
    if kind != "real[]":
        return
    if not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')"):
        return
    try:
        async with conn.transaction():  # a savepoint: a refused extension must not end the start-up
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await conn.execute("ALTER TABLE embeddings ALTER COLUMN vector TYPE vector USING vector::vector")
    except Exception as error:  # noqa: BLE001 - not allowed to create it: stay on real[]
        log.warning("pgvector is available but could not be enabled (%s): vectors are compared in Python", error)


async def status(conn: Any) -> str | None:
    """'pgvector 0.8.6' when the column uses it, else None."""
    return await conn.fetchval(
        "SELECT 'pgvector ' || e.extversion FROM pg_extension e, pg_attribute a WHERE e.extname = 'vector'"
        " AND a.attrelid = 'embeddings'::regclass AND a.attname = 'vector'"
        " AND format_type(a.atttypid, a.atttypmod) = 'vector'"
    )


async def pending(conn: Any, resource_id: str, embedder: str, limit: int = 64) -> list[Pending]:
    """Messages and active observation groups of a resource with no vector yet."""
    rows = await conn.fetch(
        "SELECT m.seq, m.thread_id, m.body, (SELECT p.body FROM messages p WHERE p.thread_id = m.thread_id"
        "  AND p.seq < m.seq AND p.body <> '' ORDER BY p.seq DESC LIMIT 1)"
        " FROM threads t JOIN messages m ON m.thread_id = t.id"
        " WHERE t.resource_id = $1 AND m.role <> 'system' AND m.body <> '' AND NOT EXISTS ("
        "  SELECT 1 FROM embeddings e WHERE e.kind = 'message' AND e.ref = m.seq::text AND e.embedder = $2)"
        " ORDER BY m.seq LIMIT $3",
        resource_id,
        embedder,
        limit,
    )
    # The previous message rides along, as in the word index: a reply alone rarely says what it answers.
    out = [
        Pending("message", str(seq), thread_id, f"{before}\n{body}" if before else body)
        for seq, thread_id, body, before in rows
    ]
    groups = await conn.fetch(
        "SELECT g.id, COALESCE(g.thread_id, r.thread_id), g.text FROM om_groups g JOIN om_records r"
        " ON r.key = g.record_key AND r.generation = g.generation WHERE r.resource_id = $1 AND NOT EXISTS ("
        "  SELECT 1 FROM embeddings e WHERE e.kind = 'group' AND e.ref = g.id AND e.embedder = $2) LIMIT $3",
        resource_id,
        embedder,
        limit,
    )
    return out + [Pending("group", r[0], r[1], r[2]) for r in groups]


async def put(conn: Any, resource_id: str, embedder: str, items: list[tuple[Pending, list[float]]]) -> None:
    for item, vector in items:
        # The source may have been deleted while the embedder ran: its vector would be an orphan.
        exists = (
            "SELECT 1 FROM messages WHERE seq = $7::bigint"
            if item.kind == "message"
            else "SELECT 1 FROM om_groups WHERE id = $7::text"
        )
        await conn.execute(
            "INSERT INTO embeddings (kind, ref, resource_id, thread_id, embedder, vector)"
            f" SELECT $1, $2, $3, $4, $5, $6::real[] WHERE EXISTS ({exists})"
            " ON CONFLICT (kind, ref, embedder) DO UPDATE SET resource_id = excluded.resource_id,"
            " thread_id = excluded.thread_id, vector = excluded.vector",
            item.kind,
            item.ref,
            resource_id,
            item.thread_id,
            embedder,
            [float(v) for v in vector],
            int(item.ref) if item.kind == "message" else item.ref,
        )


async def nearest(
    conn: Any,
    resource_id: str,
    embedder: str,
    query: list[float],
    *,
    thread_id: str | None = None,
    limit: int | None = None,
    in_database: bool = False,
) -> list[tuple[str, str, float]]:
    """(kind, ref, cosine), most similar first (vectors are unit length)."""
    # Only groups of the active generation: a replaced group keeps its vector for history only.
    where = f"e.resource_id = $1 AND e.embedder = $2 AND (e.kind <> 'group' OR {ACTIVE_GROUP})"
    params: list[Any] = [resource_id, embedder]
    if thread_id is not None:
        params.append(thread_id)
        where += f" AND e.thread_id = ${len(params)}"
    if in_database:
        params.append([float(v) for v in query])
        sql = (
            f"WITH q AS MATERIALIZED (SELECT ${len(params)}::real[]::vector AS v)"
            f" SELECT e.kind, e.ref, 1 - (e.vector <=> q.v) FROM embeddings e, q WHERE {where}"
            " ORDER BY e.vector <=> q.v, e.kind, e.ref"
        )
        if limit is not None:
            params.append(limit)
            sql += f" LIMIT ${len(params)}"
        return [(r[0], r[1], float(r[2])) for r in await conn.fetch(sql, *params)]
    rows = await conn.fetch(f"SELECT e.kind, e.ref, e.vector FROM embeddings e WHERE {where}", *params)
    if not rows:
        return []
    scores = _similarities([r[2] for r in rows], query)
    ranked = sorted(zip(rows, scores), key=lambda pair: -pair[1])[:limit]
    return [(row[0], row[1], float(score)) for row, score in ranked]


def _similarities(vectors: list[list[float]], query: list[float]) -> list[float]:
    try:
        import numpy as np  # optional, only for speed
    except ImportError:
        return [sum(a * b for a, b in zip(v, query)) for v in vectors]
    matrix = np.asarray(vectors, dtype=np.float32)
    return (matrix @ np.asarray(query, dtype=np.float32)).tolist()
