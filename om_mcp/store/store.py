"""Resources, threads, messages, working memory and search, on SQLite.

The store knows tables and transactions, nothing of MCP or of models. Values
come in already validated and counted by the engine.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from om_mcp.store.database import Database, Transaction


class StoreError(ValueError):
    """A request the data does not allow; `field` names the offending input."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class NotFound(StoreError):
    pass


@dataclass
class Thread:
    id: str
    resource_id: str
    title: str | None
    title_pinned: bool
    metadata: dict[str, Any]
    created_at: str
    updated_at: str
    message_count: int = 0


@dataclass
class Message:
    seq: int
    id: str
    thread_id: str
    resource_id: str
    role: str
    parts: list[dict[str, Any]]
    created_at: str
    metadata: dict[str, Any]
    tokens: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "thread_id": self.thread_id,
            "role": self.role,
            "parts": self.parts,
            "created_at": self.created_at,
            "metadata": self.metadata,
        }


@dataclass
class AppendResult:
    appended: list[Message] = field(default_factory=list)
    skipped_duplicates: int = 0
    thread_created: bool = False


@dataclass
class SearchHit:
    message: Message
    score: float
    snippet: str


def content_hash(record: dict[str, Any]) -> str:
    """What makes a re-sent message 'the same': role, parts, metadata (the
    time is compared separately, and only when the client gave one)."""
    payload = json.dumps(
        [record["role"], record["parts"], record.get("metadata") or {}],
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


_MESSAGE_COLUMNS = "seq, id, thread_id, resource_id, role, parts, created_at, metadata, tokens"


def _message(row) -> Message:
    return Message(
        seq=row["seq"],
        id=row["id"],
        thread_id=row["thread_id"],
        resource_id=row["resource_id"],
        role=row["role"],
        parts=json.loads(row["parts"]),
        created_at=row["created_at"],
        metadata=json.loads(row["metadata"]),
        tokens=row["tokens"],
    )


def _thread(row) -> Thread:
    return Thread(
        id=row["id"],
        resource_id=row["resource_id"],
        title=row["title"],
        title_pinned=bool(row["title_pinned"]),
        metadata=json.loads(row["metadata"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        message_count=row["message_count"] if "message_count" in row.keys() else 0,
    )


class Store:
    """The project's SQLite database."""

    def __init__(self, db: Database):
        from om_mcp.store.om import OMStore

        self.db = db
        self.om = OMStore(db)

    @classmethod
    async def open(cls, path: str | Path) -> "Store":
        return cls(await Database.open(path))

    async def close(self) -> None:
        await self.db.close()

    # -- threads -------------------------------------------------------------

    async def get_thread(self, thread_id: str, count: bool = False) -> Thread | None:
        async with self.db.read() as tx:
            return await self._get_thread(tx, thread_id, count)

    async def _get_thread(self, tx: Transaction, thread_id: str, count: bool = False) -> Thread | None:
        # Counting messages scans the thread's index: only when asked.
        counted = ", (SELECT COUNT(*) FROM messages m WHERE m.thread_id = t.id) AS message_count" if count else ""
        row = await tx.one(f"SELECT t.*{counted} FROM threads t WHERE t.id = ?", (thread_id,))
        return _thread(row) if row else None

    async def _ensure_thread(
        self, tx: Transaction, thread_id: str, resource_id: str, metadata: dict[str, Any] | None
    ) -> tuple[Thread, bool]:
        thread = await self._get_thread(tx, thread_id)
        if thread is not None:
            if thread.resource_id != resource_id:
                raise StoreError(
                    f"thread {thread_id!r} belongs to resource {thread.resource_id!r}, "
                    f"not {resource_id!r}; a thread keeps its resource for life",
                    field="resource_id",
                )
            return thread, False
        stamp = now_iso()
        await tx.execute(
            "INSERT INTO resources (id, created_at, updated_at) VALUES (?, ?, ?) ON CONFLICT(id) DO NOTHING",
            (resource_id, stamp, stamp),
        )
        title = (metadata or {}).get("title")
        await tx.execute(
            "INSERT INTO threads (id, resource_id, title, metadata, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (thread_id, resource_id, title, json.dumps(metadata or {}), stamp, stamp),
        )
        return await self._get_thread(tx, thread_id), True

    async def list_threads(
        self,
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
        async with self.db.read() as tx:
            rows = await tx.all(
                "SELECT t.*, (SELECT COUNT(*) FROM messages m WHERE m.thread_id = t.id) AS message_count"
                f" FROM threads t WHERE {' AND '.join(where)}"
                " ORDER BY t.updated_at DESC, t.id LIMIT ? OFFSET ?",
                (*params, limit + 1, offset),
            )
        threads = [_thread(r) for r in rows]
        return threads[:limit], len(threads) > limit

    async def update_thread(
        self, thread_id: str, *, title: str | None = None, metadata: dict[str, Any] | None = None,
        pin_title: bool | None = None,
    ) -> Thread:
        async with self.db.write() as tx:
            thread = await self._get_thread(tx, thread_id)
            if thread is None:
                raise NotFound(f"unknown thread {thread_id!r}", field="thread_id")
            merged = dict(thread.metadata)
            if metadata:
                for key, value in metadata.items():
                    if value is None:
                        merged.pop(key, None)
                    else:
                        merged[key] = value
            await tx.execute(
                "UPDATE threads SET title = COALESCE(?, title), metadata = ?, updated_at = ?,"
                " title_pinned = COALESCE(?, title_pinned) WHERE id = ?",
                (title, json.dumps(merged), now_iso(), None if pin_title is None else int(pin_title), thread_id),
            )
            return await self._get_thread(tx, thread_id, count=True)

    async def set_generated_title(self, thread_id: str, title: str) -> tuple[str | None, bool]:
        """Set a model-proposed title unless the title is pinned; returns (old, changed)."""
        async with self.db.write() as tx:
            thread = await self._get_thread(tx, thread_id)
            if thread is None or thread.title_pinned or thread.title == title:
                return (thread.title if thread else None), False
            await tx.execute("UPDATE threads SET title = ? WHERE id = ?", (title, thread_id))
            return thread.title, True

    async def delete_thread(self, thread_id: str) -> int:
        """Delete a thread with its messages, index rows and working memory."""
        async with self.db.write() as tx:
            if await self._get_thread(tx, thread_id) is None:
                raise NotFound(f"unknown thread {thread_id!r}", field="thread_id")
            count = await tx.value("SELECT COUNT(*) FROM messages WHERE thread_id = ?", (thread_id,))
            await tx.execute(
                "DELETE FROM messages_fts WHERE rowid IN (SELECT seq FROM messages WHERE thread_id = ?)",
                (thread_id,),
            )
            await self.om.forget_thread(tx, thread_id)
            await tx.execute("DELETE FROM messages WHERE thread_id = ?", (thread_id,))
            await tx.execute("DELETE FROM threads WHERE id = ?", (thread_id,))
            return count

    # -- messages ------------------------------------------------------------

    async def append_messages(
        self,
        thread_id: str,
        resource_id: str,
        records: list[dict[str, Any]],
        *,
        thread_metadata: dict[str, Any] | None = None,
        on_thread_created: Callable[[Transaction, Thread], Any] | None = None,
        after_insert: Callable[[Transaction, list[Message]], Any] | None = None,
    ) -> AppendResult:
        """Insert a batch, all or nothing. Records carry id, role, parts,
        created_at, metadata, tokens, token_cache, index_text, index_dates.

        A record whose (thread, id) exists with the same content is skipped;
        with other content it is an error and nothing of the batch is written.
        """
        result = AppendResult()
        seen: dict[str, str] = {}
        async with self.db.write() as tx:
            thread, result.thread_created = await self._ensure_thread(tx, thread_id, resource_id, thread_metadata)
            if result.thread_created and on_thread_created is not None:
                await on_thread_created(tx, thread)
            recent = await tx.all(
                "SELECT f.body FROM messages m JOIN messages_fts f ON f.rowid = m.seq"
                " WHERE m.thread_id = ? AND f.body != '' ORDER BY m.seq DESC LIMIT 2",
                (thread_id,),
            )
            previous_bodies = tuple([r[0] for r in recent] + ["", ""])[:2]
            for index, record in enumerate(records):
                digest = content_hash(record)
                if record.get("created_at_given", True):
                    digest_in_batch = digest + record["created_at"]
                else:
                    digest_in_batch = digest
                if record["id"] in seen:
                    if seen[record["id"]] != digest_in_batch:
                        raise StoreError(
                            f"messages[{index}].id {record['id']!r} appears twice in the batch with different content",
                            field=f"messages[{index}].id",
                        )
                    result.skipped_duplicates += 1
                    continue
                seen[record["id"]] = digest_in_batch
                row = await tx.one(
                    "SELECT content_hash, created_at FROM messages WHERE thread_id = ? AND id = ?",
                    (thread_id, record["id"]),
                )
                existing = row["content_hash"] if row else None
                if row is not None and record.get("created_at_given", True) and (
                    datetime.fromisoformat(row["created_at"]) != datetime.fromisoformat(record["created_at"])
                ):
                    existing = "(different time)"
                if existing is not None:
                    if existing != digest:
                        raise StoreError(
                            f"messages[{index}].id {record['id']!r} already exists in thread {thread_id!r}"
                            " with different content; message ids are immutable",
                            field=f"messages[{index}].id",
                        )
                    result.skipped_duplicates += 1
                    continue
                created = datetime.fromisoformat(record["created_at"])
                cursor = await tx.execute(
                    "INSERT INTO messages (id, thread_id, resource_id, role, parts, created_at, created_ts,"
                    " metadata, tokens, token_cache, content_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        record["id"], thread_id, resource_id, record["role"],
                        json.dumps(record["parts"], ensure_ascii=False), record["created_at"],
                        created.timestamp(), json.dumps(record.get("metadata") or {}, ensure_ascii=False),
                        record["tokens"], json.dumps(record.get("token_cache")), digest,
                    ),
                )
                seq = cursor.lastrowid
                body = record.get("index_text", "")
                await tx.execute(
                    "INSERT INTO messages_fts (rowid, body, prev1, prev2) VALUES (?, ?, ?, ?)",
                    (seq, body, *previous_bodies),
                )
                if body:
                    previous_bodies = (body, previous_bodies[0])
                result.appended.append(
                    Message(seq, record["id"], thread_id, resource_id, record["role"], record["parts"],
                            record["created_at"], record.get("metadata") or {}, record["tokens"])
                )
            if result.appended:
                await tx.execute("UPDATE threads SET updated_at = ? WHERE id = ?", (now_iso(), thread_id))
                if after_insert is not None:
                    await after_insert(tx, result.appended)
        return result

    async def thread_messages(
        self,
        thread_id: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        roles: tuple[str, ...] | None = None,
    ) -> list[Message]:
        where, params = ["thread_id = ?"], [thread_id]
        if after_seq is not None:
            where.append("seq > ?")
            params.append(after_seq)
        if before_seq is not None:
            where.append("seq < ?")
            params.append(before_seq)
        if roles:
            where.append(f"role IN ({','.join('?' * len(roles))})")
            params.extend(roles)
        sql = (
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE {' AND '.join(where)}"
            f" ORDER BY seq {'DESC' if newest_first else 'ASC'}"
        )
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        async with self.db.read() as tx:
            return [_message(r) for r in await tx.all(sql, params)]

    async def find_message(self, resource_id: str, message_id: str, thread_id: str | None = None) -> Message | None:
        """A message by id within a resource (optionally one thread); newest wins on a clash."""
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE resource_id = ? AND id = ?"
        params: list[Any] = [resource_id, message_id]
        if thread_id is not None:
            sql += " AND thread_id = ?"
            params.append(thread_id)
        async with self.db.read() as tx:
            row = await tx.one(sql + " ORDER BY seq DESC LIMIT 1", params)
        return _message(row) if row else None

    async def messages_by_seq(self, seqs: list[int]) -> dict[int, Message]:
        if not seqs:
            return {}
        async with self.db.read() as tx:
            rows = await tx.all(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE seq IN ({','.join('?' * len(seqs))})", seqs
            )
        return {r["seq"]: _message(r) for r in rows}

    async def stale_token_counts(self, tokenizer: str, limit: int = 500) -> list[dict[str, Any]]:
        """Messages counted by another tokenizer (or version) than `tokenizer`."""
        async with self.db.read() as tx:
            rows = await tx.all(
                "SELECT seq, role, parts, token_cache FROM messages"
                " WHERE json_extract(token_cache, '$.tokenizer') IS NOT ? LIMIT ?",
                (tokenizer, limit),
            )
        return [
            {"seq": r["seq"], "role": r["role"], "parts": json.loads(r["parts"]),
             "token_cache": json.loads(r["token_cache"]) if r["token_cache"] else None}
            for r in rows
        ]

    async def set_token_counts(self, counts: list[tuple[int, int, dict[str, Any]]]) -> None:
        """(seq, tokens, token_cache) for each recounted message."""
        async with self.db.write() as tx:
            await tx.executemany(
                "UPDATE messages SET tokens = ?, token_cache = ? WHERE seq = ?",
                [(tokens, json.dumps(cache), seq) for seq, tokens, cache in counts],
            )

    # -- search --------------------------------------------------------------

    async def search(
        self,
        resource_id: str,
        match: str,
        *,
        thread_id: str | None = None,
        limit: int = 20,
        weights: tuple[float, float, float] = (1.0, 0.5, 0.4),
    ) -> list[SearchHit]:
        """BM25-ranked messages for an FTS5 MATCH expression (already escaped);
        `snippet` is the matching message's own text, marked."""
        if not match:
            return []
        where, params = ["messages_fts MATCH ?", "m.resource_id = ?"], [match, resource_id]
        if thread_id is not None:
            where.append("m.thread_id = ?")
            params.append(thread_id)
        async with self.db.read() as tx:
            rows = await tx.all(
                f"SELECT {', '.join('m.' + c.strip() for c in _MESSAGE_COLUMNS.split(','))},"
                f" bm25(messages_fts, {weights[0]}, {weights[1]}, {weights[2]}) AS rank,"
                " snippet(messages_fts, 0, '[', ']', ' … ', 16) AS snip"
                " FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid"
                f" WHERE {' AND '.join(where)} ORDER BY rank LIMIT ?",
                (*params, limit),
            )
        return [SearchHit(_message(r), -float(r["rank"]), r["snip"]) for r in rows]

    # -- working memory ------------------------------------------------------

    async def get_working_memory(self, scope: str, key: str) -> str | None:
        table = "resources" if scope == "resource" else "threads"
        async with self.db.read() as tx:
            return await tx.value(f"SELECT working_memory FROM {table} WHERE id = ?", (key,))

    async def update_working_memory(
        self, scope: str, key: str, update: Callable[[str | None], str | None], *, resource_id: str
    ) -> str | None:
        """Read-modify-write in one write transaction, so concurrent merges from
        several processes serialise and none is lost. `update` returns the new
        stored text, or None to leave it unchanged."""
        table = "resources" if scope == "resource" else "threads"
        async with self.db.write() as tx:
            if scope == "resource":
                stamp = now_iso()
                await tx.execute(
                    "INSERT INTO resources (id, created_at, updated_at) VALUES (?, ?, ?)"
                    " ON CONFLICT(id) DO NOTHING",
                    (resource_id, stamp, stamp),
                )
            elif await self._get_thread(tx, key) is None:
                raise NotFound(f"unknown thread {key!r}", field="thread_id")
            current = await tx.value(f"SELECT working_memory FROM {table} WHERE id = ?", (key,))
            new = update(current)
            if new is not None and new != current:
                await tx.execute(
                    f"UPDATE {table} SET working_memory = ?, updated_at = ? WHERE id = ?", (new, now_iso(), key)
                )
                return new
            return current

    async def set_working_memory_in_tx(self, tx: Transaction, scope: str, key: str, value: str) -> None:
        table = "resources" if scope == "resource" else "threads"
        await tx.execute(f"UPDATE {table} SET working_memory = ? WHERE id = ?", (value, key))
