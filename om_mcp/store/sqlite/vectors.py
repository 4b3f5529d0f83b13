"""Vectors for semantic recall, and full-text search over observation groups.

Vectors are float32 blobs keyed by (kind, ref, embedder): changing the embedder
leaves old vectors unused and the new ones are built in the background.
Similarity is brute force, which stays fast at one user's scale.
"""

from __future__ import annotations

import sqlite3
from array import array
from collections.abc import Iterable

from om_mcp.store.decode import GROUP_COLUMNS, group
from om_mcp.store.rows import GroupHit, Pending

ACTIVE_GROUP = (
    "EXISTS (SELECT 1 FROM om_groups g JOIN om_records r ON r.key = g.record_key AND r.generation = g.generation"
    " WHERE g.id = e.ref)"
)


def pack(vector: Iterable[float]) -> bytes:
    return array("f", vector).tobytes()


def unpack(blob: bytes) -> array:
    values = array("f")
    values.frombytes(blob)
    return values


def pending(conn: sqlite3.Connection, resource_id: str, embedder: str, limit: int = 64) -> list[Pending]:
    """Messages and active observation groups of a resource with no vector yet."""
    rows = conn.execute(
        "SELECT m.seq, m.thread_id, m.body FROM threads t JOIN messages m ON m.thread_id = t.id"
        " WHERE t.resource_id = ? AND m.role != 'system' AND m.body != '' AND NOT EXISTS ("
        "  SELECT 1 FROM embeddings e WHERE e.kind = 'message' AND e.ref = CAST(m.seq AS TEXT) AND e.embedder = ?)"
        " ORDER BY m.seq LIMIT ?",
        (resource_id, embedder, limit),
    ).fetchall()
    out = []
    for seq, thread_id, body in rows:
        # The previous message rides along, as in the word index: a reply alone rarely says what it answers.
        before = conn.execute(
            "SELECT body FROM messages WHERE thread_id = ? AND seq < ? AND body != '' ORDER BY seq DESC LIMIT 1",
            (thread_id, seq),
        ).fetchone()
        out.append(Pending("message", str(seq), thread_id, f"{before[0]}\n{body}" if before else body))
    groups = conn.execute(
        # A thread-scope reflection group has no thread_id of its own: it belongs to the record's thread.
        "SELECT g.id, COALESCE(g.thread_id, r.thread_id), g.text FROM om_groups g JOIN om_records r"
        " ON r.key = g.record_key AND r.generation = g.generation WHERE r.resource_id = ? AND NOT EXISTS ("
        "  SELECT 1 FROM embeddings e WHERE e.kind = 'group' AND e.ref = g.id AND e.embedder = ?) LIMIT ?",
        (resource_id, embedder, limit),
    ).fetchall()
    return out + [Pending("group", r[0], r[1], r[2]) for r in groups]


def put(conn: sqlite3.Connection, resource_id: str, embedder: str, items: list[tuple[Pending, list[float]]]) -> None:
    for item, vector in items:
        # The source may have been deleted while the embedder ran: its vector would be an orphan.
        exists = (
            "SELECT 1 FROM messages WHERE seq = CAST(? AS INTEGER)"
            if item.kind == "message"
            else "SELECT 1 FROM om_groups WHERE id = ?"
        )
        conn.execute(
            "INSERT OR REPLACE INTO embeddings (kind, ref, resource_id, thread_id, embedder, vector)"
            f" SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS ({exists})",
            (item.kind, item.ref, resource_id, item.thread_id, embedder, pack(vector), item.ref),
        )


def nearest(
    conn: sqlite3.Connection,
    resource_id: str,
    embedder: str,
    query: list[float],
    *,
    thread_id: str | None = None,
    limit: int | None = None,
) -> list[tuple[str, str, float]]:
    """(kind, ref, cosine), most similar first (vectors are unit length)."""
    # Only groups of the active generation: a replaced group keeps its vector for history only.
    sql = (
        "SELECT e.kind, e.ref, e.vector FROM embeddings e WHERE e.resource_id = ? AND e.embedder = ?"
        f" AND (e.kind != 'group' OR {ACTIVE_GROUP})"
    )
    params: list = [resource_id, embedder]
    if thread_id is not None:
        sql += " AND e.thread_id = ?"
        params.append(thread_id)
    rows = conn.execute(sql, params).fetchall()
    if not rows:
        return []
    scores = _similarities([r[2] for r in rows], query)
    ranked = sorted(zip(rows, scores), key=lambda pair: -pair[1])[:limit]
    return [(row[0], row[1], float(score)) for row, score in ranked]


def search_groups(
    conn: sqlite3.Connection, resource_id: str, match: str, *, thread_id: str | None = None, limit: int = 20
) -> list[GroupHit]:
    """BM25 over the active observation groups of a resource."""
    if not match:
        return []
    sql = (
        f"SELECT {GROUP_COLUMNS}, bm25(om_groups_fts) AS rank"
        " FROM om_groups_fts f JOIN om_groups g ON g.id = f.group_id"
        " JOIN om_records r ON r.key = g.record_key AND r.generation = g.generation"
        " WHERE om_groups_fts MATCH ? AND r.resource_id = ?"
    )
    params: list = [match, resource_id]
    if thread_id is not None:
        sql += " AND (g.thread_id = ? OR r.thread_id = ?)"
        params += [thread_id, thread_id]
    sql += " ORDER BY rank, g.record_key, g.generation, g.position LIMIT ?"
    params.append(limit)
    return [GroupHit(group(r[:-1]), resource_id, -float(r[-1])) for r in conn.execute(sql, params)]


def _similarities(blobs: list[bytes], query: list[float]) -> list[float]:
    try:
        import numpy as np  # optional, only for speed
    except ImportError:
        q = array("f", query)
        return [sum(a * b for a, b in zip(unpack(blob), q)) for blob in blobs]
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
    return (matrix @ np.asarray(query, dtype=np.float32)).tolist()
