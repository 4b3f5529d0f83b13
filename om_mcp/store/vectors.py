"""Vectors for semantic recall, and full-text search over observation groups.

Vectors are float32 blobs keyed by (kind, ref, embedder): changing the
embedder leaves old vectors unused and the new ones are built in the
background. Similarity is brute force, which stays fast at one user's scale
(thousands of messages); numpy is used when installed.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Iterable

from om_mcp.store.database import Database


@dataclass
class Pending:
    kind: str  # message | group
    ref: str  # message seq or group id
    thread_id: str | None
    text: str


def pack(vector: Iterable[float]) -> bytes:
    return array("f", vector).tobytes()


def unpack(blob: bytes) -> array:
    values = array("f")
    values.frombytes(blob)
    return values


class VectorStore:
    def __init__(self, db: Database):
        self.db = db

    async def pending(self, resource_id: str, embedder: str, limit: int = 64) -> list[Pending]:
        """Messages and active observation groups of a resource with no vector yet."""
        async with self.db.read() as tx:
            messages = await tx.all(
                # The previous message rides along, as in the word index: a reply
                # alone rarely says what it answers.
                "SELECT m.seq, m.thread_id, CASE WHEN f.prev1 != '' THEN f.prev1 || char(10) || f.body"
                " ELSE f.body END FROM messages m JOIN messages_fts f ON f.rowid = m.seq"
                " WHERE m.resource_id = ? AND m.role != 'system' AND f.body != '' AND NOT EXISTS ("
                "  SELECT 1 FROM embeddings e WHERE e.kind = 'message' AND e.ref = CAST(m.seq AS TEXT)"
                "  AND e.embedder = ?) ORDER BY m.seq LIMIT ?",
                (resource_id, embedder, limit),
            )
            groups = await tx.all(
                # A thread-scope reflection group has no thread_id of its own: it belongs to the
                # record's thread, so deleting that thread deletes its vector too.
                "SELECT g.id, COALESCE(g.thread_id, r.thread_id), g.text FROM om_groups g"
                " JOIN om_records r ON r.key = g.record_key"
                " AND r.generation = g.generation WHERE r.resource_id = ? AND NOT EXISTS ("
                "  SELECT 1 FROM embeddings e WHERE e.kind = 'group' AND e.ref = g.id AND e.embedder = ?)"
                " LIMIT ?",
                (resource_id, embedder, limit),
            )
        return [Pending("message", str(r[0]), r[1], r[2]) for r in messages] + [
            Pending("group", r[0], r[1], r[2]) for r in groups
        ]

    async def put(self, resource_id: str, embedder: str, items: list[tuple[Pending, list[float]]]) -> None:
        async with self.db.write() as tx:
            for item, vector in items:
                # The source may have been deleted while the embedder ran (delete_thread):
                # a vector for it would be an orphan that deletion never sees again.
                exists = (
                    "SELECT 1 FROM messages WHERE seq = CAST(? AS INTEGER)" if item.kind == "message"
                    else "SELECT 1 FROM om_groups WHERE id = ?"
                )
                await tx.execute(
                    "INSERT OR REPLACE INTO embeddings (kind, ref, resource_id, thread_id, embedder, vector)"
                    f" SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS ({exists})",
                    (item.kind, item.ref, resource_id, item.thread_id, embedder, pack(vector), item.ref),
                )

    async def nearest(
        self, resource_id: str, embedder: str, query: list[float], *, thread_id: str | None = None,
        limit: int | None = None,
    ) -> list[tuple[str, str, float]]:
        """(kind, ref, cosine), most similar first (vectors are unit length); all when no limit."""
        # Only groups of the active generation: a group a reflection replaced keeps its
        # vector (history), but it must not come back as a search result.
        sql = (
            "SELECT e.kind, e.ref, e.vector FROM embeddings e WHERE e.resource_id = ? AND e.embedder = ?"
            " AND (e.kind != 'group' OR EXISTS (SELECT 1 FROM om_groups g JOIN om_records r"
            " ON r.key = g.record_key AND r.generation = g.generation WHERE g.id = e.ref))"
        )
        params: list = [resource_id, embedder]
        if thread_id is not None:
            sql += " AND e.thread_id = ?"
            params.append(thread_id)
        async with self.db.read() as tx:
            rows = await tx.all(sql, params)
        if not rows:
            return []
        scores = _similarities([r["vector"] for r in rows], query)
        ranked = sorted(zip(rows, scores), key=lambda pair: -pair[1])[:limit]
        return [(row["kind"], row["ref"], float(score)) for row, score in ranked]

    async def groups_by_id(self, ids: list[str]) -> dict[str, dict]:
        if not ids:
            return {}
        async with self.db.read() as tx:
            rows = await tx.all(f"SELECT * FROM om_groups WHERE id IN ({','.join('?' * len(ids))})", ids)
        return {r["id"]: dict(r) for r in rows}

    async def search_groups(
        self, resource_id: str, match: str, *, thread_id: str | None = None, limit: int = 20
    ) -> list[tuple[dict, float]]:
        """BM25 over the active observation groups of a resource."""
        if not match:
            return []
        sql = (
            "SELECT g.*, bm25(om_groups_fts) AS rank FROM om_groups_fts f JOIN om_groups g ON g.id = f.group_id"
            " JOIN om_records r ON r.key = g.record_key AND r.generation = g.generation"
            " WHERE om_groups_fts MATCH ? AND r.resource_id = ?"
        )
        params: list = [match, resource_id]
        if thread_id is not None:
            sql += " AND (g.thread_id = ? OR r.thread_id = ?)"
            params += [thread_id, thread_id]
        sql += " ORDER BY rank LIMIT ?"
        params.append(limit)
        async with self.db.read() as tx:
            rows = await tx.all(sql, params)
        return [(dict(r), -float(r["rank"])) for r in rows]


def _similarities(blobs: list[bytes], query: list[float]) -> list[float]:
    try:
        import numpy as np  # noqa: PLC0415 - optional, only for speed
    except ImportError:
        q = array("f", query)
        return [sum(a * b for a, b in zip(unpack(blob), q)) for blob in blobs]
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
    return (matrix @ np.asarray(query, dtype=np.float32)).tolist()
