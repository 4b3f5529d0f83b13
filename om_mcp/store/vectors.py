"""Vectors for semantic recall: what has none yet, storing them, the nearest ones.

Vectors are keyed by (kind, ref, embedder): changing the embedder leaves old vectors
unused and the new ones are built in the background. Similarity is brute force here,
which stays fast at one user's scale; PostgreSQL with pgvector ranks in the database
instead (`Tx.rank_vectors`). How a vector is stored differs (`Tx.vector`): a float32
blob on SQLite, real[] (or pgvector's `vector`) on PostgreSQL.
"""

from __future__ import annotations

from array import array
from typing import Any

from om_mcp.store.rows import Pending
from om_mcp.store.tx import Tx

# Only groups of the active generation: a replaced group keeps its vector for history only.
ACTIVE_GROUP = (
    "EXISTS (SELECT 1 FROM om_groups g JOIN om_records r ON r.key = g.record_key AND r.generation = g.generation"
    " WHERE g.id = e.ref)"
)


async def pending(tx: Tx, resource_id: str, embedder: str, limit: int = 64) -> list[Pending]:
    """Messages and active observation groups of a resource with no vector yet."""
    rows = await tx.fetch(
        "SELECT m.seq, m.thread_id, m.body, (SELECT p.body FROM messages p WHERE p.thread_id = m.thread_id"
        "  AND p.seq < m.seq AND p.body <> '' ORDER BY p.seq DESC LIMIT 1)"
        " FROM threads t JOIN messages m ON m.thread_id = t.id"
        " WHERE t.resource_id = $1 AND m.role <> 'system' AND m.body <> '' AND NOT EXISTS ("
        "  SELECT 1 FROM embeddings e WHERE e.kind = 'message' AND e.ref = CAST(m.seq AS TEXT) AND e.embedder = $2)"
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
    groups = await tx.fetch(
        # A thread-scope reflection group has no thread_id of its own: it belongs to the record's thread.
        "SELECT g.id, COALESCE(g.thread_id, r.thread_id), g.text FROM om_groups g JOIN om_records r"
        " ON r.key = g.record_key AND r.generation = g.generation WHERE r.resource_id = $1 AND NOT EXISTS ("
        "  SELECT 1 FROM embeddings e WHERE e.kind = 'group' AND e.ref = g.id AND e.embedder = $2) LIMIT $3",
        resource_id,
        embedder,
        limit,
    )
    return out + [Pending("group", r[0], r[1], r[2]) for r in groups]


async def put(tx: Tx, resource_id: str, embedder: str, items: list[tuple[Pending, list[float]]]) -> None:
    for item, vector in items:
        # The source may have been deleted while the embedder ran: its vector would be an orphan.
        exists = (
            "SELECT 1 FROM messages WHERE seq = $7::bigint"
            if item.kind == "message"
            else "SELECT 1 FROM om_groups WHERE id = $7::text"
        )
        await tx.execute(
            "INSERT INTO embeddings (kind, ref, resource_id, thread_id, embedder, vector)"
            f" SELECT $1, $2, $3, $4, $5, $6::real[] WHERE EXISTS ({exists})"
            " ON CONFLICT (kind, ref, embedder) DO UPDATE SET resource_id = excluded.resource_id,"
            " thread_id = excluded.thread_id, vector = excluded.vector",
            item.kind,
            item.ref,
            resource_id,
            item.thread_id,
            embedder,
            tx.vector(vector),
            int(item.ref) if item.kind == "message" else item.ref,
        )


async def nearest(
    tx: Tx,
    resource_id: str,
    embedder: str,
    query: list[float],
    *,
    thread_id: str | None = None,
    limit: int | None = None,
) -> list[tuple[str, str, float]]:
    """(kind, ref, cosine), most similar first (vectors are unit length)."""
    where = f"e.resource_id = $1 AND e.embedder = $2 AND (e.kind <> 'group' OR {ACTIVE_GROUP})"
    args: list[Any] = [resource_id, embedder]
    if thread_id is not None:
        where += " AND e.thread_id = $3"
        args.append(thread_id)
    ranked = await tx.rank_vectors(where, args, query, limit)
    if ranked is None:
        rows = await tx.fetch(f"SELECT e.kind, e.ref, e.vector FROM embeddings e WHERE {where}", *args)
        scores = _similarities([r[2] for r in rows], query) if rows else []
        ranked = [(r[0], r[1], s) for r, s in sorted(zip(rows, scores), key=lambda pair: -pair[1])[:limit]]
    return [(kind, ref, float(score)) for kind, ref, score in ranked]


def floats(stored: Any) -> Any:
    """A stored vector's values: a float32 blob (SQLite) unpacked, a real[] (PostgreSQL) as it is."""
    if isinstance(stored, bytes):
        values = array("f")
        values.frombytes(stored)
        return values
    return stored


def _similarities(stored: list[Any], query: list[float]) -> list[float]:
    try:
        import numpy as np  # optional, only for speed
    except ImportError:
        return [sum(a * b for a, b in zip(floats(v), query)) for v in stored]
    if isinstance(stored[0], bytes):
        matrix = np.frombuffer(b"".join(stored), dtype=np.float32).reshape(len(stored), -1)
    else:
        matrix = np.asarray(stored, dtype=np.float32)
    return (matrix @ np.asarray(query, dtype=np.float32)).tolist()
