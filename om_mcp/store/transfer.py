"""Moving a memory between databases: export as format records, import in one transaction.

`export` hands a generator of records (the shapes of `om_mcp.importers.jsonl_records`)
to a consumer inside ONE read transaction, so the file is a consistent snapshot
however long the writing takes, and nothing is held in memory. Database-local
numbers leave as message ids: cursors as `observed_through`, group ranges as
`first_message_id` / `last_message_id`.

`import_records` takes prepared items (messages already validated and counted by
the engine) and writes them in ONE write transaction: a file that turns out bad
halfway changes nothing. It is idempotent: what exists is skipped (a message with
the same id and content, a thread, an observation record with its log), a message
id with other content is an error naming it. Running totals are recomputed from
the rows at the end, never trusted from the file.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any, TypeVar

from om_mcp.store import tombstones
from om_mcp.store.access import Access
from om_mcp.store.decode import MESSAGE_COLUMNS, THREAD_COLUMNS, dumps, message, thread
from om_mcp.store.errors import StoreError
from om_mcp.store.messages import _new_only, insert_new
from om_mcp.store.rows import AppendResult, NewMessage
from om_mcp.store.summaries import ImportResult
from om_mcp.store.tx import Tx

T = TypeVar("T")
Item = tuple[str, Any]  # ("resource" | "thread" | "record" | "group", record dict) or ("messages", (thread id, rows))
OnBatch = Callable[[AppendResult], Awaitable[None]]  # told what one message batch stored


# -- export ------------------------------------------------------------------------------


async def export(tx: Tx, consume: Callable[[Iterator[dict[str, Any]]], T], access: Access) -> T:
    """`consume(records)` over the resources `access` grants (every one, or some), in the format's
    order, in one snapshot."""
    return await tx.stream(consume, _records(tx, access))


async def _records(tx: Tx, access: Access) -> AsyncIterator[dict[str, Any]]:
    within, granted = access.sql_filter("id", 1)
    resources = await tx.fetch(
        f"SELECT id, working_memory, created_at, updated_at FROM resources WHERE {within} ORDER BY created_at, id",
        *granted,
    )
    for rid, memory, created, updated in resources:
        yield {"type": "resource", "id": rid, "working_memory": memory, "created_at": created, "updated_at": updated}
        threads = await tx.fetch(
            f"SELECT {THREAD_COLUMNS}, t.working_memory FROM threads t WHERE t.resource_id = $1"
            " ORDER BY t.created_at, t.id",
            rid,
        )
        for row in threads:
            t = thread(row[:-1])
            yield {
                "type": "thread",
                "id": t.id,
                "resource_id": rid,
                "title": t.title,
                "title_pinned": t.title_pinned,
                "metadata": t.metadata,
                "working_memory": row[-1],
                "created_at": t.created_at,
                "updated_at": t.updated_at,
            }
            for m in await tx.fetch(
                f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = $1 ORDER BY m.seq", t.id
            ):
                found = message(m)
                yield {
                    "type": "message",
                    "id": found.id,
                    "thread_id": t.id,
                    "role": found.role,
                    "parts": found.parts,
                    "created_at": found.created_at,
                    "metadata": found.metadata,
                }
        for (key,) in await tx.fetch("SELECT key FROM om_records WHERE resource_id = $1 ORDER BY key", rid):
            async for item in _record(tx, key):
                yield item


async def _record(tx: Tx, key: str) -> AsyncIterator[dict[str, Any]]:
    row = await tx.fetchrow(
        "SELECT scope, resource_id, thread_id, generation, extracted, last_observed_at, last_reflection_at,"
        " created_at, updated_at FROM om_records WHERE key = $1",
        key,
    )
    assert row is not None  # listed in this snapshot
    scope, rid, tid, generation, extracted, observed, reflected, created, updated = row
    through, hints = {}, {}
    for thread_id, seq, task, response in await tx.fetch(
        "SELECT c.thread_id, c.seq, c.current_task, c.suggested_response FROM om_cursors c"
        " JOIN threads t ON t.id = c.thread_id WHERE c.record_key = $1 ORDER BY c.thread_id",
        key,
    ):
        if seq:
            last = await tx.fetchval(
                "SELECT id FROM messages WHERE thread_id = $1 AND seq <= $2 ORDER BY seq DESC LIMIT 1", thread_id, seq
            )
            if last:
                through[thread_id] = last
        if task or response:
            hints[thread_id] = {"current_task": task, "suggested_response": response}
    yield {
        "type": "observation_record",
        "key": key,
        "scope": scope,
        "resource_id": rid,
        "thread_id": tid,
        "generation": generation,
        "observed_through": through,
        "hints": hints,
        "extracted": json.loads(extracted or "{}"),
        "last_observed_at": observed,
        "last_reflection_at": reflected,
        "created_at": created,
        "updated_at": updated,
    }
    for row in await tx.fetch(
        "SELECT id, generation, position, kind, thread_id, first_message_id, last_message_id, text, tokens,"
        " observed_at, created_at, retired_by, retired_reason, replaced_by FROM om_groups WHERE record_key = $1"
        " ORDER BY generation, position",
        key,
    ):
        gid, gen, position, kind, thread_id, first, last, text, tokens, observed_at, created_at = row[:11]
        retired = {"retired_by": row[11], "retired_reason": row[12], "replaced_by": row[13]} if gen < 0 else {}
        yield {
            "type": "observation_group",
            "id": gid,
            "record_key": key,
            "generation": gen,
            "position": position,
            "kind": kind,
            "thread_id": thread_id,
            "first_message_id": first,
            "last_message_id": last,
            "text": text,
            "tokens": tokens,
            "observed_at": observed_at,
            "created_at": created_at,
            **retired,
        }


# -- import ------------------------------------------------------------------------------


class _Import:
    def __init__(self, tx: Tx, counted_by: int, on_batch: OnBatch | None):
        self.tx, self.counted_by, self.on_batch = tx, counted_by, on_batch
        self.result = ImportResult()
        self.new_threads: dict[str, str] = {}  # thread id -> its exported updated_at
        self.touched_threads: set[str] = set()
        self.skipped_records: set[str] = set()
        self.records: dict[str, tuple[str, str | None, str]] = {}  # key -> (scope, thread id, resource id)
        # Deleted threads and resources (their tombstones): an earlier export brings none of it back.
        self.buried_resources: set[str] = set()
        self.buried_threads: dict[str, str] = {}  # thread id -> its resource

    async def resource(self, r: dict[str, Any]) -> None:
        exists = await self.tx.fetchval("SELECT 1 FROM resources WHERE id = $1", r["id"])
        if not exists and await tombstones.buried(self.tx, tombstones.RESOURCE, r["id"]):
            self.buried_resources.add(r["id"])
            self.result.skipped["forgotten resource"] += 1
            return
        await self.tx.execute(
            "INSERT INTO resources (id, working_memory, created_at, updated_at) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (id) DO UPDATE SET working_memory = COALESCE(resources.working_memory,"
            " excluded.working_memory)",
            r["id"],
            r.get("working_memory"),
            r["created_at"],
            r["updated_at"],
        )
        self._count("resource", not exists)

    async def thread(self, t: dict[str, Any]) -> None:
        owner = await self.tx.fetchval("SELECT resource_id FROM threads WHERE id = $1 FOR UPDATE", t["id"])
        if owner is None and (
            t["resource_id"] in self.buried_resources or await tombstones.buried(self.tx, tombstones.THREAD, t["id"])
        ):
            self.buried_threads[t["id"]] = t["resource_id"]
            self.result.skipped["forgotten thread"] += 1
            return
        if owner is not None:
            if owner != t["resource_id"]:
                raise StoreError(
                    f"thread {t['id']!r} exists here under resource {owner!r}, not {t['resource_id']!r}",
                    field="thread.resource_id",
                )
            self._count("thread", False)
            return
        await self.tx.execute(
            "INSERT INTO threads (id, resource_id, title, title_pinned, metadata, working_memory, created_at,"
            " updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            t["id"],
            t["resource_id"],
            t.get("title"),
            bool(t.get("title_pinned")),
            dumps(t.get("metadata") or {}),
            t.get("working_memory"),
            t["created_at"],
            t["updated_at"],
        )
        self.new_threads[t["id"]] = t["updated_at"]
        self._count("thread", True)

    async def messages(self, thread_id: str, rows: list[NewMessage]) -> None:
        if thread_id in self.buried_threads:
            self.result.skipped["forgotten message"] += len(rows)
            await tombstones.count_refused(self.tx, self.buried_threads[thread_id], len(rows))
            return
        found = await self.tx.fetchrow(f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.id = $1", thread_id)
        assert found is not None  # the format puts a thread before its messages
        current = thread(found)
        outcome = AppendResult(thread=current)
        fresh = await _new_only(self.tx, thread_id, current.resource_id, rows, outcome)
        if outcome.skipped_duplicates:
            self.result.skipped["message"] += outcome.skipped_duplicates
        if outcome.forgotten:
            self.result.skipped["forgotten message"] += outcome.forgotten
        if not fresh:
            return
        await insert_new(self.tx, current, fresh, self.counted_by, outcome)
        if self.on_batch is not None:
            await self.on_batch(outcome)
        self.touched_threads.add(thread_id)
        self.result.added["message"] += len(fresh)

    async def record(self, r: dict[str, Any]) -> None:
        key = r["key"]
        self.records[key] = (r["scope"], r.get("thread_id"), r["resource_id"])
        forgotten = r["resource_id"] in self.buried_resources or (
            r["scope"] == "thread" and r.get("thread_id") in self.buried_threads
        )
        if forgotten or await self.tx.fetchval("SELECT 1 FROM om_records WHERE key = $1", key):
            self.skipped_records.add(key)
            self._count("observation_record", False)
            return
        await self.tx.execute(
            "INSERT INTO om_records (key, scope, resource_id, thread_id, generation, extracted, last_observed_at,"
            " last_reflection_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            key,
            r["scope"],
            r["resource_id"],
            r.get("thread_id"),
            r["generation"],
            dumps(r.get("extracted") or {}),
            r.get("last_observed_at"),
            r.get("last_reflection_at"),
            r["created_at"],
            r["updated_at"],
        )
        threads = (
            [r["thread_id"]]
            if r["scope"] == "thread"
            else [
                t
                for (t,) in await self.tx.fetch(
                    "SELECT id FROM threads WHERE resource_id = $1 ORDER BY id", r["resource_id"]
                )
            ]
        )
        through, hints = r.get("observed_through") or {}, r.get("hints") or {}
        for thread_id in threads:
            seq = await self._seq(thread_id, through.get(thread_id)) if through.get(thread_id) else 0
            hint = hints.get(thread_id) or {}
            await self.tx.execute(
                "INSERT INTO om_cursors (record_key, thread_id, seq, current_task, suggested_response)"
                " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (record_key, thread_id) DO UPDATE SET seq = excluded.seq,"
                " current_task = excluded.current_task, suggested_response = excluded.suggested_response",
                key,
                thread_id,
                seq,
                hint.get("current_task"),
                hint.get("suggested_response"),
            )
            self.touched_threads.add(thread_id)
        self._count("observation_record", True)

    async def group(self, g: dict[str, Any]) -> None:
        key = g["record_key"]
        if key in self.skipped_records:
            self._count("observation_group", False)
            return
        scope, record_thread, resource_id = self.records[key]
        where = g.get("thread_id") or (record_thread if scope == "thread" else None)
        first = await self._seq(where, g.get("first_message_id"), resource_id)
        last = await self._seq(where, g.get("last_message_id"), resource_id)
        gid = g["id"]
        if await self.tx.fetchval("SELECT 1 FROM om_groups WHERE id = $1", gid):
            gid = uuid.uuid4().hex[:16]  # taken by another record here: the log keeps the group, not its id
        await self.tx.execute(
            "INSERT INTO om_groups (id, record_key, generation, position, kind, thread_id, first_seq, last_seq,"
            " first_message_id, last_message_id, text, tokens, observed_at, created_at, retired_by, retired_reason,"
            " replaced_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
            gid,
            key,
            g["generation"],
            g["position"],
            g["kind"],
            g.get("thread_id"),
            first,
            last,
            g.get("first_message_id"),
            g.get("last_message_id"),
            g["text"],
            g["tokens"],
            g.get("observed_at"),
            g["created_at"],
            g.get("retired_by"),
            g.get("retired_reason"),
            g.get("replaced_by"),
        )
        await self.tx.index_groups(key, [(gid, g["text"])])
        self._count("observation_group", True)

    async def _seq(self, thread_id: str | None, message_id: str | None, resource_id: str | None = None) -> int:
        """A message id back to this database's seq (0 when there is none)."""
        if not message_id:
            return 0
        if thread_id is not None:
            seq = await self.tx.fetchval(
                "SELECT seq FROM messages WHERE thread_id = $1 AND id = $2", thread_id, message_id
            )
        else:  # a reflection over several threads names no thread: the newest message with that id
            seq = await self.tx.fetchval(
                "SELECT m.seq FROM threads t JOIN messages m ON m.thread_id = t.id AND m.id = $1"
                " WHERE t.resource_id = $2 ORDER BY m.seq DESC LIMIT 1",
                message_id,
                resource_id,
            )
        return seq or 0

    async def finish(self) -> ImportResult:
        for key in sorted(set(self.records) - self.skipped_records):
            await self.tx.execute(
                "UPDATE om_records SET observation_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM om_groups"
                " WHERE record_key = om_records.key AND generation = om_records.generation) WHERE key = $1",
                key,
            )
        for thread_id in sorted(self.touched_threads):
            await self.tx.execute(
                "UPDATE om_cursors SET"
                " pending_tokens = (SELECT COALESCE(SUM(m.tokens), 0) FROM messages m"
                "  WHERE m.thread_id = om_cursors.thread_id AND m.seq > om_cursors.seq AND m.observable),"
                " pending_messages = (SELECT COUNT(*) FROM messages m"
                "  WHERE m.thread_id = om_cursors.thread_id AND m.seq > om_cursors.seq AND m.observable),"
                " counted_seq = (SELECT COALESCE(MAX(m.seq), 0) FROM messages m"
                "  WHERE m.thread_id = om_cursors.thread_id)"
                " WHERE thread_id = $1",
                thread_id,
            )
        for thread_id, updated_at in self.new_threads.items():
            await self.tx.execute("UPDATE threads SET updated_at = $1 WHERE id = $2", updated_at, thread_id)
        return self.result

    def _count(self, kind: str, added: bool) -> None:
        (self.result.added if added else self.result.skipped)[kind] += 1


async def import_records(
    tx: Tx, items: Iterable[Item], counted_by: int = 0, on_batch: OnBatch | None = None
) -> ImportResult:
    """Write resources, threads, message batches, observation records and groups, in the
    format's order (references point back), in the caller's one transaction. `on_batch` is
    awaited with what each message batch stored, in that transaction (the engine's append
    steps: `engine/append.py`)."""
    run = _Import(tx, counted_by, on_batch)
    for kind, value in items:
        if kind == "messages":
            await run.messages(*value)
        else:
            await getattr(run, kind)(value)
    return await run.finish()


async def set_thread_times(tx: Tx, thread_id: str, created_at: str | None, updated_at: str | None) -> None:
    """Give an imported conversation its real dates (appends stamp the time of the import)."""
    await tx.execute(
        "UPDATE threads SET created_at = COALESCE($1, created_at), updated_at = COALESCE($2, updated_at) WHERE id = $3",
        created_at,
        updated_at,
        thread_id,
    )
