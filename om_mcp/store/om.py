"""Observational-memory state: records, cursors, observation groups, buffered
chunks and reflections, leases and events.

Every commit is one write transaction that first checks the state the cycle
started from (its cursor, its generation, the chunk tail). A check that fails
means someone else got there first: the commit writes nothing and returns
False, and the caller discards its work. That, not the leases, is what makes
double observation impossible; leases only avoid paying for the same model
call twice.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable

from om_mcp.store.database import Database, Transaction
from om_mcp.store.store import Message, _MESSAGE_COLUMNS, _message, now_iso

# System messages are never observed, except the temporal-gap markers the engine writes.
_OBSERVABLE = "(m.role != 'system' OR json_extract(m.metadata, '$.om_kind') = 'temporal-gap')"


def _unobserved_filter(key: str, resource_id: str, thread_id: str | None) -> tuple[str, str, list[Any]]:
    """FROM and WHERE for messages after their thread's cursor. For one thread
    the cursor is a constant, so SQLite walks (thread_id, seq) from it instead
    of scanning every message of the resource."""
    if thread_id is not None:
        cursor = "(SELECT COALESCE(MAX(seq), 0) FROM om_cursors WHERE record_key = ? AND thread_id = ?)"
        return " FROM messages m", f"m.thread_id = ? AND m.seq > {cursor} AND {_OBSERVABLE}", [thread_id, key, thread_id]
    join = " FROM messages m LEFT JOIN om_cursors c ON c.record_key = ? AND c.thread_id = m.thread_id"
    return join, f"m.resource_id = ? AND m.seq > COALESCE(c.seq, 0) AND {_OBSERVABLE}", [key, resource_id]


@dataclass
class Record:
    key: str
    scope: str
    resource_id: str
    thread_id: str | None
    generation: int
    current_task: str | None
    suggested_response: str | None
    extracted: dict[str, Any]
    last_observed_at: str | None
    last_reflection_at: str | None
    reflection_blocked_at: int | None
    last_buffered_at_tokens: int
    version: int
    cursors: dict[str, int] = field(default_factory=dict)


@dataclass
class Group:
    id: str
    generation: int
    position: int
    kind: str  # observation | reflection
    thread_id: str | None
    first_seq: int
    last_seq: int
    first_message_id: str | None
    last_message_id: str | None
    text: str
    tokens: int
    observed_at: str | None

    @property
    def range(self) -> str:
        return f"{self.first_message_id}:{self.last_message_id}"


@dataclass
class NewGroup:
    """A group a cycle wants to add; position and generation are set on commit."""

    text: str
    tokens: int
    first_seq: int
    last_seq: int
    first_message_id: str | None
    last_message_id: str | None
    thread_id: str | None = None
    kind: str = "observation"
    observed_at: str | None = None


@dataclass
class Chunk:
    id: str
    cycle_id: str
    thread_id: str
    first_seq: int
    last_seq: int
    message_ids: list[str]
    message_tokens: int
    observations: str
    observation_tokens: int
    hints: dict[str, Any]
    last_message_at: str | None
    created_at: str


@dataclass
class BufferedReflection:
    cycle_id: str
    generation: int
    covered: int
    input_tokens: int
    text: str
    tokens: int
    hints: dict[str, Any]


@dataclass
class Snapshot:
    """Everything status and the turn logic need, read in one transaction."""

    record: Record
    pending_tokens: int
    pending_messages: int
    observation_tokens: int
    chunks: list[Chunk]
    buffered_reflection: "BufferedReflection | None"
    message_count: int


@dataclass
class Event:
    id: int
    type: str
    cycle_id: str | None
    record_key: str | None
    resource_id: str | None
    thread_id: str | None
    payload: dict[str, Any]
    created_at: str


def _record(row, cursors: dict[str, int]) -> Record:
    return Record(
        key=row["key"], scope=row["scope"], resource_id=row["resource_id"], thread_id=row["thread_id"],
        generation=row["generation"], current_task=row["current_task"], suggested_response=row["suggested_response"],
        extracted=json.loads(row["extracted"]), last_observed_at=row["last_observed_at"],
        last_reflection_at=row["last_reflection_at"], reflection_blocked_at=row["reflection_blocked_at"],
        last_buffered_at_tokens=row["last_buffered_at_tokens"], version=row["version"], cursors=cursors,
    )


def _group(row) -> Group:
    return Group(
        id=row["id"], generation=row["generation"], position=row["position"], kind=row["kind"],
        thread_id=row["thread_id"], first_seq=row["first_seq"], last_seq=row["last_seq"],
        first_message_id=row["first_message_id"], last_message_id=row["last_message_id"], text=row["text"],
        tokens=row["tokens"], observed_at=row["observed_at"],
    )


def _chunk(row) -> Chunk:
    return Chunk(
        id=row["id"], cycle_id=row["cycle_id"], thread_id=row["thread_id"], first_seq=row["first_seq"],
        last_seq=row["last_seq"], message_ids=json.loads(row["message_ids"]), message_tokens=row["message_tokens"],
        observations=row["observations"], observation_tokens=row["observation_tokens"],
        hints=json.loads(row["hints"]), last_message_at=row["last_message_at"], created_at=row["created_at"],
    )


class OMStore:
    """Queries and conditional commits for observational memory."""

    def __init__(self, db: Database):
        self.db = db

    # -- reads -----------------------------------------------------------------

    async def record(self, key: str) -> Record | None:
        async with self.db.read(consistent=True) as tx:
            return await self._record(tx, key)

    async def _record(self, tx: Transaction, key: str) -> Record | None:
        row = await tx.one("SELECT * FROM om_records WHERE key = ?", (key,))
        if row is None:
            return None
        cursors = {r["thread_id"]: r["seq"] for r in await tx.all(
            "SELECT thread_id, seq FROM om_cursors WHERE record_key = ?", (key,))}
        return _record(row, cursors)

    async def ensure_record(self, key: str, scope: str, resource_id: str, thread_id: str | None) -> Record:
        record = await self.record(key)
        if record is not None:
            return record
        async with self.db.write() as tx:
            stamp = now_iso()
            await tx.execute(
                "INSERT INTO om_records (key, scope, resource_id, thread_id, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING",
                (key, scope, resource_id, thread_id, stamp, stamp),
            )
            return await self._record(tx, key)

    async def snapshot(self, key: str, resource_id: str, thread_id: str | None, count_thread: str) -> Snapshot | None:
        """The record and its windows; `thread_id` None counts every thread of
        the resource as pending (resource scope)."""
        source, where, params = _unobserved_filter(key, resource_id, thread_id)
        async with self.db.read(consistent=True) as tx:
            record = await self._record(tx, key)
            if record is None:
                return None
            pending = await tx.one(f"SELECT COALESCE(SUM(m.tokens), 0), COUNT(*){source} WHERE {where}", params)
            observation_tokens = await tx.value(
                "SELECT COALESCE(SUM(tokens), 0) FROM om_groups WHERE record_key = ? AND generation = ?",
                (key, record.generation),
            )
            chunks = await self._chunks(tx, key)
            row = await tx.one("SELECT * FROM om_buffered_reflections WHERE record_key = ?", (key,))
            count = await tx.value("SELECT COUNT(*) FROM messages WHERE thread_id = ?", (count_thread,))
        buffered = None if row is None else BufferedReflection(
            cycle_id=row["cycle_id"], generation=row["generation"], covered=row["covered"],
            input_tokens=row["input_tokens"], text=row["text"], tokens=row["tokens"], hints=json.loads(row["hints"]),
        )
        return Snapshot(record, pending[0], pending[1], observation_tokens, chunks, buffered, count)

    async def groups(self, key: str, generation: int | None = None) -> list[Group]:
        async with self.db.read() as tx:
            return await self._groups(tx, key, generation)

    async def _groups(self, tx: Transaction, key: str, generation: int | None = None) -> list[Group]:
        if generation is None:
            rows = await tx.all(
                "SELECT g.* FROM om_groups g JOIN om_records r ON r.key = g.record_key AND r.generation = g.generation"
                " WHERE g.record_key = ? ORDER BY g.position", (key,)
            )
            return [_group(r) for r in rows]
        rows = await tx.all(
            "SELECT * FROM om_groups WHERE record_key = ? AND generation = ? ORDER BY position", (key, generation)
        )
        return [_group(r) for r in rows]

    async def generations(self, key: str) -> list[tuple[int, list[Group]]]:
        """Every generation, newest first."""
        async with self.db.read() as tx:
            rows = await tx.all(
                "SELECT * FROM om_groups WHERE record_key = ? ORDER BY generation DESC, position", (key,)
            )
        out: dict[int, list[Group]] = {}
        for row in rows:
            out.setdefault(row["generation"], []).append(_group(row))
        return list(out.items())

    async def chunks(self, key: str) -> list[Chunk]:
        async with self.db.read() as tx:
            return await self._chunks(tx, key)

    async def _chunks(self, tx: Transaction, key: str) -> list[Chunk]:
        rows = await tx.all("SELECT * FROM om_chunks WHERE record_key = ? ORDER BY first_seq", (key,))
        return [_chunk(r) for r in rows]

    async def buffered_reflection(self, key: str) -> BufferedReflection | None:
        async with self.db.read() as tx:
            row = await tx.one("SELECT * FROM om_buffered_reflections WHERE record_key = ?", (key,))
        if row is None:
            return None
        return BufferedReflection(
            cycle_id=row["cycle_id"], generation=row["generation"], covered=row["covered"],
            input_tokens=row["input_tokens"], text=row["text"], tokens=row["tokens"], hints=json.loads(row["hints"]),
        )

    async def unobserved(
        self, key: str, resource_id: str, thread_id: str | None = None, after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """Messages after their thread's cursor, oldest first. System messages are
        never observed, except the temporal-gap markers the engine writes."""
        source, where, params = _unobserved_filter(key, resource_id, thread_id)
        sql = f"SELECT {', '.join('m.' + c.strip() for c in _MESSAGE_COLUMNS.split(','))}{source} WHERE {where}"
        if after_seq is not None:
            sql += " AND m.seq > ?"
            params.append(after_seq)
        sql += " ORDER BY m.seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        async with self.db.read() as tx:
            return [_message(r) for r in await tx.all(sql, params)]

    async def unobserved_tail(
        self, key: str, resource_id: str, thread_id: str, budget: int
    ) -> tuple[list[Message], int]:
        """The newest unobserved messages of a thread whose tokens fit `budget`
        (at least one), oldest first, and how many older ones were left out.
        Chosen on the stored token counts, so only the kept rows are decoded."""
        join, where, params = _unobserved_filter(key, resource_id, thread_id)
        async with self.db.read(consistent=True) as tx:
            # Newest first, a page at a time: only as many rows as fit are read.
            used, first, seen, before = 0, None, 0, None
            while True:
                page_where = where + ("" if before is None else f" AND m.seq < {int(before)}")
                sizes = await tx.all(
                    f"SELECT m.seq, m.tokens{join} WHERE {page_where} ORDER BY m.seq DESC LIMIT 256", params
                )
                stop = not sizes
                for seq, tokens in sizes:
                    if used + tokens > budget:
                        stop = True
                        break
                    used += tokens
                    first = seq
                    seen += 1
                if stop or len(sizes) < 256:
                    break
                before = sizes[-1][0]
            total = await tx.value(f"SELECT COUNT(*){join} WHERE {where}", params)
            if first is None:
                return [], total
            rows = await tx.all(
                f"SELECT {', '.join('m.' + c.strip() for c in _MESSAGE_COLUMNS.split(','))}{join}"
                f" WHERE {where} AND m.seq >= ? ORDER BY m.seq",
                [*params, first],
            )
        return [_message(r) for r in rows], total - len(rows)

    # -- leases ----------------------------------------------------------------

    async def acquire_lease(self, key: str, op: str, owner: str, ttl: float, cycle_id: str | None = None) -> bool:
        """Take or renew the (key, op) lease; False while another owner holds a live one."""
        now = time.time()
        async with self.db.write() as tx:
            row = await tx.one("SELECT owner, expires_at FROM om_leases WHERE key = ? AND op = ?", (key, op))
            if row is not None and row["owner"] != owner and row["expires_at"] > now:
                return False
            await tx.execute(
                "INSERT INTO om_leases (key, op, owner, cycle_id, expires_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT(key, op) DO UPDATE SET owner = excluded.owner, cycle_id = excluded.cycle_id,"
                " expires_at = excluded.expires_at",
                (key, op, owner, cycle_id, now + ttl),
            )
            return True

    async def release_lease(self, key: str, op: str, owner: str) -> None:
        async with self.db.write() as tx:
            await tx.execute("DELETE FROM om_leases WHERE key = ? AND op = ? AND owner = ?", (key, op, owner))

    @staticmethod
    async def _holds(tx: Transaction, key: str, op: str, owner: str | None) -> bool:
        if owner is None:
            return True
        row = await tx.one("SELECT owner, expires_at FROM om_leases WHERE key = ? AND op = ?", (key, op))
        return row is not None and row["owner"] == owner

    # -- commits ----------------------------------------------------------------

    async def commit_observation(
        self,
        key: str,
        *,
        expected_cursors: dict[str, int],
        new_cursors: dict[str, int],
        groups: list[NewGroup],
        hints: dict[str, Any],
        lease: tuple[str, str] | None = None,
        events: Iterable[dict[str, Any]] = (),
    ) -> bool:
        """Append groups and move cursors, if the cursors are still where the cycle saw them."""
        async with self.db.write() as tx:
            if lease and not await self._holds(tx, key, lease[0], lease[1]):
                return False
            if not await self._cursors_match(tx, key, expected_cursors):
                return False
            generation = await tx.value("SELECT generation FROM om_records WHERE key = ?", (key,))
            await self._append_groups(tx, key, generation, groups)
            await self._set_cursors(tx, key, new_cursors)
            # Buffering intervals count from what is still unobserved.
            await tx.execute("UPDATE om_records SET last_buffered_at_tokens = 0 WHERE key = ?", (key,))
            # A chunk overlapping what was just observed would observe it twice.
            for thread_id, seq in new_cursors.items():
                await tx.execute(
                    "DELETE FROM om_chunks WHERE record_key = ? AND thread_id = ? AND first_seq <= ?",
                    (key, thread_id, seq),
                )
            await self._apply_hints(tx, key, hints, observed=True)
            await self._add_events(tx, events)
            return True

    async def append_chunk(
        self, key: str, *, expected_tail: int, chunk: Chunk, lease: tuple[str, str] | None = None,
        events: Iterable[dict[str, Any]] = (), buffered_at_tokens: int | None = None,
    ) -> bool:
        """Store a buffered chunk that continues exactly after the cursor or the last chunk."""
        async with self.db.write() as tx:
            if lease and not await self._holds(tx, key, lease[0], lease[1]):
                return False
            if await self._tail(tx, key, chunk.thread_id) != expected_tail:
                return False
            await tx.execute(
                "INSERT INTO om_chunks (id, record_key, cycle_id, thread_id, first_seq, last_seq, message_ids,"
                " message_tokens, observations, observation_tokens, hints, last_message_at, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(cycle_id) DO NOTHING",
                (chunk.id, key, chunk.cycle_id, chunk.thread_id, chunk.first_seq, chunk.last_seq,
                 json.dumps(chunk.message_ids), chunk.message_tokens, chunk.observations, chunk.observation_tokens,
                 json.dumps(chunk.hints), chunk.last_message_at, chunk.created_at),
            )
            if buffered_at_tokens is not None:
                await tx.execute(
                    "UPDATE om_records SET last_buffered_at_tokens = ?, version = version + 1 WHERE key = ?",
                    (buffered_at_tokens, key),
                )
            await self._apply_extracted_only(tx, key, chunk.hints)
            await self._add_events(tx, events)
            return True

    async def tail(self, key: str, thread_id: str) -> int:
        async with self.db.read() as tx:
            return await self._tail(tx, key, thread_id)

    async def _tail(self, tx: Transaction, key: str, thread_id: str) -> int:
        """The last seq that is observed or buffered in a thread."""
        cursor = await tx.value(
            "SELECT seq FROM om_cursors WHERE record_key = ? AND thread_id = ?", (key, thread_id)
        ) or 0
        chunk_end = await tx.value(
            "SELECT MAX(last_seq) FROM om_chunks WHERE record_key = ? AND thread_id = ?", (key, thread_id)
        ) or 0
        return max(cursor, chunk_end)

    async def activate_chunks(
        self, key: str, chunk_ids: list[str], groups: list[NewGroup], *, lease: tuple[str, str] | None = None,
        events: Iterable[dict[str, Any]] = (),
    ) -> bool:
        """Move a prefix of the buffered chunks into the log, with no model call."""
        async with self.db.write() as tx:
            if lease and not await self._holds(tx, key, lease[0], lease[1]):
                return False
            chunks = await self._chunks(tx, key)
            prefix = chunks[: len(chunk_ids)]
            if [c.id for c in prefix] != chunk_ids or not prefix:
                return False
            thread_id = prefix[0].thread_id
            cursor = await tx.value(
                "SELECT seq FROM om_cursors WHERE record_key = ? AND thread_id = ?", (key, thread_id)
            ) or 0
            # Chunks must continue right after the cursor, with no message skipped.
            if prefix[0].first_seq <= cursor:
                return False
            generation = await tx.value("SELECT generation FROM om_records WHERE key = ?", (key,))
            await self._append_groups(tx, key, generation, groups)
            await self._set_cursors(tx, key, {thread_id: prefix[-1].last_seq})
            # The buffering high-water mark drops with the tokens that left the window.
            await tx.execute(
                "UPDATE om_records SET last_buffered_at_tokens = MAX(0, last_buffered_at_tokens - ?) WHERE key = ?",
                (sum(c.message_tokens for c in prefix), key),
            )
            await tx.execute(
                f"DELETE FROM om_chunks WHERE id IN ({','.join('?' * len(chunk_ids))})", chunk_ids
            )
            last = prefix[-1]
            await self._apply_hints(
                tx, key, {**last.hints, "last_observed_at": last.last_message_at}, observed=True
            )
            await self._add_events(tx, events)
            return True

    async def commit_reflection(
        self,
        key: str,
        *,
        generation: int,
        covered: int,
        groups: list[NewGroup],
        hints: dict[str, Any],
        lease: tuple[str, str] | None = None,
        events: Iterable[dict[str, Any]] = (),
        blocked_at: int | None = None,
    ) -> bool:
        """Start generation+1: the reflected groups, then every group of `generation`
        past the first `covered` (those were added while the reflection ran)."""
        async with self.db.write() as tx:
            if lease and not await self._holds(tx, key, lease[0], lease[1]):
                return False
            current = await tx.value("SELECT generation FROM om_records WHERE key = ?", (key,))
            if current != generation:
                return False
            old = await self._groups(tx, key, generation)
            if len(old) < covered:
                return False
            kept = [
                NewGroup(g.text, g.tokens, g.first_seq, g.last_seq, g.first_message_id, g.last_message_id,
                         g.thread_id, g.kind, g.observed_at)
                for g in old[covered:]
            ]
            await self._append_groups(tx, key, generation + 1, groups + kept)
            await tx.execute(
                "UPDATE om_records SET generation = ?, last_reflection_at = ?, reflection_blocked_at = ?,"
                " version = version + 1, updated_at = ? WHERE key = ?",
                (generation + 1, now_iso(), blocked_at, now_iso(), key),
            )
            await tx.execute("DELETE FROM om_buffered_reflections WHERE record_key = ?", (key,))
            await self._apply_hints(tx, key, hints, observed=False)
            await self._add_events(tx, events)
            return True

    async def store_buffered_reflection(
        self, key: str, reflection: BufferedReflection, *, lease: tuple[str, str] | None = None,
        events: Iterable[dict[str, Any]] = (),
    ) -> bool:
        async with self.db.write() as tx:
            if lease and not await self._holds(tx, key, lease[0], lease[1]):
                return False
            if await tx.value("SELECT generation FROM om_records WHERE key = ?", (key,)) != reflection.generation:
                return False
            await tx.execute(
                "INSERT OR REPLACE INTO om_buffered_reflections (record_key, cycle_id, generation, covered,"
                " input_tokens, text, tokens, hints, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, reflection.cycle_id, reflection.generation, reflection.covered, reflection.input_tokens,
                 reflection.text, reflection.tokens, json.dumps(reflection.hints), now_iso()),
            )
            await tx.execute("UPDATE om_records SET version = version + 1 WHERE key = ?", (key,))
            await self._add_events(tx, events)
            return True

    async def discard_buffered_reflection(self, key: str) -> None:
        async with self.db.write() as tx:
            await tx.execute("DELETE FROM om_buffered_reflections WHERE record_key = ?", (key,))

    async def add_events(self, events: Iterable[dict[str, Any]]) -> None:
        async with self.db.write() as tx:
            await self._add_events(tx, events)

    async def events(
        self, *, thread_id: str | None = None, record_key: str | None = None, cycle_id: str | None = None,
        after_id: int = 0, limit: int = 100,
    ) -> list[Event]:
        where, params = ["id > ?"], [after_id]
        for column, value in (("thread_id", thread_id), ("record_key", record_key), ("cycle_id", cycle_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        async with self.db.read() as tx:
            rows = await tx.all(
                f"SELECT * FROM om_events WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?", (*params, limit)
            )
        return [
            Event(r["id"], r["type"], r["cycle_id"], r["record_key"], r["resource_id"], r["thread_id"],
                  json.loads(r["payload"]), r["created_at"])
            for r in reversed(rows)
        ]

    async def forget_thread(self, tx: Transaction, thread_id: str) -> None:
        """Remove what observational memory derived from a deleted thread."""
        await tx.execute(
            "DELETE FROM om_groups_fts WHERE group_id IN (SELECT id FROM om_groups WHERE thread_id = ?"
            " OR record_key = ?)", (thread_id, f"thread:{thread_id}"),
        )
        await tx.execute("DELETE FROM om_records WHERE key = ?", (f"thread:{thread_id}",))
        await tx.execute("DELETE FROM om_groups WHERE thread_id = ?", (thread_id,))
        await tx.execute("DELETE FROM embeddings WHERE thread_id = ?", (thread_id,))
        await tx.execute("DELETE FROM om_chunks WHERE thread_id = ?", (thread_id,))
        await tx.execute("DELETE FROM om_cursors WHERE thread_id = ?", (thread_id,))
        await tx.execute("DELETE FROM om_events WHERE thread_id = ?", (thread_id,))

    # -- helpers ------------------------------------------------------------------

    @staticmethod
    async def _cursors_match(tx: Transaction, key: str, expected: dict[str, int]) -> bool:
        for thread_id, seq in expected.items():
            current = await tx.value(
                "SELECT seq FROM om_cursors WHERE record_key = ? AND thread_id = ?", (key, thread_id)
            ) or 0
            if current != seq:
                return False
        return True

    @staticmethod
    async def _set_cursors(tx: Transaction, key: str, cursors: dict[str, int]) -> None:
        for thread_id, seq in cursors.items():
            await tx.execute(
                "INSERT INTO om_cursors (record_key, thread_id, seq) VALUES (?, ?, ?)"
                " ON CONFLICT(record_key, thread_id) DO UPDATE SET seq = MAX(seq, excluded.seq)",
                (key, thread_id, seq),
            )

    @staticmethod
    async def _append_groups(tx: Transaction, key: str, generation: int, groups: list[NewGroup]) -> None:
        position = await tx.value(
            "SELECT COALESCE(MAX(position), -1) FROM om_groups WHERE record_key = ? AND generation = ?",
            (key, generation),
        )
        stamp = now_iso()
        for group in groups:
            position += 1
            group_id = uuid.uuid4().hex[:16]
            await tx.execute(
                "INSERT INTO om_groups (id, record_key, generation, position, kind, thread_id, first_seq, last_seq,"
                " first_message_id, last_message_id, text, tokens, observed_at, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (group_id, key, generation, position, group.kind, group.thread_id, group.first_seq,
                 group.last_seq, group.first_message_id, group.last_message_id, group.text, group.tokens,
                 group.observed_at, stamp),
            )
            await tx.execute(
                "INSERT INTO om_groups_fts (group_id, record_key, text) VALUES (?, ?, ?)", (group_id, key, group.text)
            )

    @staticmethod
    async def _apply_hints(tx: Transaction, key: str, hints: dict[str, Any], observed: bool) -> None:
        """Store continuation hints and extracted values; an absent hint keeps the old one."""
        sets, params = ["version = version + 1", "updated_at = ?"], [now_iso()]
        for name in ("current_task", "suggested_response"):
            if hints.get(name):
                sets.append(f"{name} = ?")
                params.append(hints[name])
        if observed and hints.get("last_observed_at"):
            sets.append("last_observed_at = ?")
            params.append(hints["last_observed_at"])
        if hints.get("extracted"):
            row = await tx.value("SELECT extracted FROM om_records WHERE key = ?", (key,))
            merged = {**json.loads(row or "{}"), **hints["extracted"]}
            sets.append("extracted = ?")
            params.append(json.dumps(merged, ensure_ascii=False))
        await tx.execute(f"UPDATE om_records SET {', '.join(sets)} WHERE key = ?", (*params, key))

    @classmethod
    async def _apply_extracted_only(cls, tx: Transaction, key: str, hints: dict[str, Any]) -> None:
        # A buffered chunk's extracted values persist at once (OM-25); its
        # continuation hints wait for activation.
        if hints.get("extracted"):
            await cls._apply_hints(tx, key, {"extracted": hints["extracted"]}, observed=False)

    @staticmethod
    async def _add_events(tx: Transaction, events: Iterable[dict[str, Any]]) -> None:
        for event in events:
            await tx.execute(
                "INSERT INTO om_events (type, cycle_id, record_key, resource_id, thread_id, anchor_message_id,"
                " payload, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (event["type"], event.get("cycle_id"), event.get("record_id"), event.get("resource_id"),
                 event.get("thread_id"), event.get("anchor_message_id"),
                 json.dumps(event, ensure_ascii=False, default=str), event.get("created_at") or now_iso()),
            )
