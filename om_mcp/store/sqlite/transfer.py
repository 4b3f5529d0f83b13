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
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from om_mcp.privacy import redaction_event
from om_mcp.store.errors import StoreError
from om_mcp.store.rows import AppendResult, NewMessage
from om_mcp.store.sqlite import fts
from om_mcp.store.sqlite.coordination import add_events
from om_mcp.store.sqlite.decode import MESSAGE_COLUMNS, THREAD_COLUMNS, dumps, message, stored_parts, thread
from om_mcp.store.sqlite.messages import _new_only, _update_thread
from om_mcp.store.sqlite.privacy import count_redactions
from om_mcp.store.summaries import ImportResult

T = TypeVar("T")
Item = tuple[str, Any]  # ("resource" | "thread" | "record" | "group", record dict) or ("messages", (thread id, rows))


# -- export ------------------------------------------------------------------------------


def export(
    conn: sqlite3.Connection, consume: Callable[[Iterator[dict[str, Any]]], T], resource_id: str | None = None
) -> T:
    """`consume(records)` over every resource (or one), in the format's order, in one snapshot."""
    return consume(_records(conn, resource_id))


def _records(conn: sqlite3.Connection, resource_id: str | None) -> Iterator[dict[str, Any]]:
    where = "WHERE id = ?" if resource_id is not None else ""
    resources = conn.execute(
        f"SELECT id, working_memory, created_at, updated_at FROM resources {where} ORDER BY created_at, id",
        (resource_id,) if resource_id is not None else (),
    ).fetchall()
    for rid, memory, created, updated in resources:
        yield {"type": "resource", "id": rid, "working_memory": memory, "created_at": created, "updated_at": updated}
        threads = conn.execute(
            f"SELECT {THREAD_COLUMNS}, t.working_memory FROM threads t WHERE t.resource_id = ?"
            " ORDER BY t.created_at, t.id",
            (rid,),
        ).fetchall()
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
            for m in conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = ? ORDER BY m.seq", (t.id,)
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
        for (key,) in conn.execute("SELECT key FROM om_records WHERE resource_id = ? ORDER BY key", (rid,)).fetchall():
            yield from _record(conn, key)


def _record(conn: sqlite3.Connection, key: str) -> Iterator[dict[str, Any]]:
    scope, rid, tid, generation, extracted, observed, reflected, created, updated = conn.execute(
        "SELECT scope, resource_id, thread_id, generation, extracted, last_observed_at, last_reflection_at,"
        " created_at, updated_at FROM om_records WHERE key = ?",
        (key,),
    ).fetchone()
    through, hints = {}, {}
    for thread_id, seq, task, response in conn.execute(
        "SELECT c.thread_id, c.seq, c.current_task, c.suggested_response FROM om_cursors c"
        " JOIN threads t ON t.id = c.thread_id WHERE c.record_key = ? ORDER BY c.thread_id",
        (key,),
    ).fetchall():
        if seq:
            last = conn.execute(
                "SELECT id FROM messages WHERE thread_id = ? AND seq <= ? ORDER BY seq DESC LIMIT 1", (thread_id, seq)
            ).fetchone()
            if last:
                through[thread_id] = last[0]
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
    for gid, gen, position, kind, thread_id, first, last, text, tokens, observed_at, created_at in conn.execute(
        "SELECT id, generation, position, kind, thread_id, first_message_id, last_message_id, text, tokens,"
        " observed_at, created_at FROM om_groups WHERE record_key = ? ORDER BY generation, position",
        (key,),
    ):
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
        }


# -- import ------------------------------------------------------------------------------


class _Import:
    def __init__(self, conn: sqlite3.Connection, counted_by: int):
        self.conn, self.counted_by = conn, counted_by
        self.result = ImportResult()
        self.new_threads: dict[str, str] = {}  # thread id -> its exported updated_at
        self.touched_threads: set[str] = set()
        self.skipped_records: set[str] = set()
        self.records: dict[str, tuple[str, str | None, str]] = {}  # key -> (scope, thread id, resource id)

    def resource(self, r: dict[str, Any]) -> None:
        exists = self.conn.execute("SELECT 1 FROM resources WHERE id = ?", (r["id"],)).fetchone()
        self.conn.execute(
            "INSERT INTO resources (id, working_memory, created_at, updated_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET working_memory = COALESCE(resources.working_memory,"
            " excluded.working_memory)",
            (r["id"], r.get("working_memory"), r["created_at"], r["updated_at"]),
        )
        self._count("resource", not exists)

    def thread(self, t: dict[str, Any]) -> None:
        row = self.conn.execute("SELECT resource_id FROM threads WHERE id = ?", (t["id"],)).fetchone()
        if row is not None:
            if row[0] != t["resource_id"]:
                raise StoreError(
                    f"thread {t['id']!r} exists here under resource {row[0]!r}, not {t['resource_id']!r}",
                    field="thread.resource_id",
                )
            self._count("thread", False)
            return
        self.conn.execute(
            "INSERT INTO threads (id, resource_id, title, title_pinned, metadata, working_memory, created_at,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                t["id"],
                t["resource_id"],
                t.get("title"),
                int(bool(t.get("title_pinned"))),
                dumps(t.get("metadata") or {}),
                t.get("working_memory"),
                t["created_at"],
                t["updated_at"],
            ),
        )
        self.new_threads[t["id"]] = t["updated_at"]
        self._count("thread", True)

    def messages(self, thread_id: str, rows: list[NewMessage]) -> None:
        found = self.conn.execute(f"SELECT {THREAD_COLUMNS} FROM threads t WHERE t.id = ?", (thread_id,)).fetchone()
        current = thread(found)
        outcome = AppendResult()
        fresh = _new_only(self.conn, thread_id, rows, outcome)
        if outcome.skipped_duplicates:
            self.result.skipped["message"] += outcome.skipped_duplicates
        if not fresh:
            return
        indexed = []
        for m in fresh:
            cursor = self.conn.execute(
                "INSERT INTO messages (id, thread_id, resource_id, role, body, parts, created_at, metadata, tokens,"
                " part_tokens, counted_by, observable) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    m.id,
                    thread_id,
                    current.resource_id,
                    m.role,
                    m.body,
                    stored_parts(m.parts, m.body),
                    m.created_at,
                    dumps(m.metadata) if m.metadata else None,
                    m.tokens,
                    dumps(m.part_tokens) if m.part_tokens and len(m.part_tokens) > 1 else None,
                    self.counted_by,
                    int(m.observable),
                ),
            )
            assert cursor.lastrowid is not None  # set by the INSERT
            indexed.append((cursor.lastrowid, m.body))
        fts.index_messages(self.conn, [seq for seq, _ in indexed])
        _update_thread(self.conn, current, fresh)
        redacted = count_redactions(self.conn, current.resource_id, fresh)
        if redacted:
            add_events(self.conn, [redaction_event(thread_id, current.resource_id, redacted)])
        self.touched_threads.add(thread_id)
        self.result.added["message"] += len(fresh)

    def record(self, r: dict[str, Any]) -> None:
        key = r["key"]
        self.records[key] = (r["scope"], r.get("thread_id"), r["resource_id"])
        if self.conn.execute("SELECT 1 FROM om_records WHERE key = ?", (key,)).fetchone():
            self.skipped_records.add(key)
            self._count("observation_record", False)
            return
        self.conn.execute(
            "INSERT INTO om_records (key, scope, resource_id, thread_id, generation, extracted, last_observed_at,"
            " last_reflection_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
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
            ),
        )
        threads = (
            [r["thread_id"]]
            if r["scope"] == "thread"
            else [t for (t,) in self.conn.execute("SELECT id FROM threads WHERE resource_id = ?", (r["resource_id"],))]
        )
        through, hints = r.get("observed_through") or {}, r.get("hints") or {}
        for thread_id in threads:
            seq = self._seq(thread_id, through.get(thread_id)) if through.get(thread_id) else 0
            hint = hints.get(thread_id) or {}
            self.conn.execute(
                "INSERT OR REPLACE INTO om_cursors (record_key, thread_id, seq, current_task, suggested_response)"
                " VALUES (?, ?, ?, ?, ?)",
                (key, thread_id, seq, hint.get("current_task"), hint.get("suggested_response")),
            )
            self.touched_threads.add(thread_id)
        self._count("observation_record", True)

    def group(self, g: dict[str, Any]) -> None:
        key = g["record_key"]
        if key in self.skipped_records:
            self._count("observation_group", False)
            return
        scope, record_thread, resource_id = self.records[key]
        where = g.get("thread_id") or (record_thread if scope == "thread" else None)
        first = self._seq(where, g.get("first_message_id"), resource_id)
        last = self._seq(where, g.get("last_message_id"), resource_id)
        gid = g["id"]
        if self.conn.execute("SELECT 1 FROM om_groups WHERE id = ?", (gid,)).fetchone():
            gid = uuid.uuid4().hex[:16]  # taken by another record here: the log keeps the group, not its id
        self.conn.execute(
            "INSERT INTO om_groups (id, record_key, generation, position, kind, thread_id, first_seq, last_seq,"
            " first_message_id, last_message_id, text, tokens, observed_at, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
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
            ),
        )
        self.conn.execute(
            "INSERT INTO om_groups_fts (group_id, record_key, text) VALUES (?, ?, ?)", (gid, key, g["text"])
        )
        self._count("observation_group", True)

    def _seq(self, thread_id: str | None, message_id: str | None, resource_id: str | None = None) -> int:
        """A message id back to this database's seq (0 when there is none)."""
        if not message_id:
            return 0
        if thread_id is not None:
            row = self.conn.execute(
                "SELECT seq FROM messages WHERE thread_id = ? AND id = ?", (thread_id, message_id)
            ).fetchone()
        else:  # a reflection over several threads names no thread: the newest message with that id
            row = self.conn.execute(
                "SELECT m.seq FROM threads t JOIN messages m ON m.thread_id = t.id AND m.id = ?"
                " WHERE t.resource_id = ? ORDER BY m.seq DESC LIMIT 1",
                (message_id, resource_id),
            ).fetchone()
        return row[0] if row else 0

    def finish(self) -> ImportResult:
        for key in set(self.records) - self.skipped_records:
            self.conn.execute(
                "UPDATE om_records SET observation_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM om_groups"
                " WHERE record_key = om_records.key AND generation = om_records.generation) WHERE key = ?",
                (key,),
            )
        for thread_id in self.touched_threads:
            self.conn.execute(
                "UPDATE om_cursors SET"
                " pending_tokens = (SELECT COALESCE(SUM(m.tokens), 0) FROM messages m"
                "  WHERE m.thread_id = om_cursors.thread_id AND m.seq > om_cursors.seq AND m.observable),"
                " pending_messages = (SELECT COUNT(*) FROM messages m"
                "  WHERE m.thread_id = om_cursors.thread_id AND m.seq > om_cursors.seq AND m.observable),"
                " counted_seq = (SELECT COALESCE(MAX(m.seq), 0) FROM messages m"
                "  WHERE m.thread_id = om_cursors.thread_id)"
                " WHERE thread_id = ?",
                (thread_id,),
            )
        for thread_id, updated_at in self.new_threads.items():
            self.conn.execute("UPDATE threads SET updated_at = ? WHERE id = ?", (updated_at, thread_id))
        return self.result

    def _count(self, kind: str, added: bool) -> None:
        (self.result.added if added else self.result.skipped)[kind] += 1


def import_records(conn: sqlite3.Connection, items: Iterable[Item], counted_by: int = 0) -> ImportResult:
    """Write resources, threads, message batches, observation records and groups, in the
    format's order (references point back), in the caller's one transaction."""
    run = _Import(conn, counted_by)
    for kind, value in items:
        if kind == "messages":
            run.messages(*value)
        else:
            getattr(run, kind)(value)
    return run.finish()


def set_thread_times(conn: sqlite3.Connection, thread_id: str, created_at: str | None, updated_at: str | None) -> None:
    """Give an imported conversation its real dates (appends stamp the time of the import)."""
    conn.execute(
        "UPDATE threads SET created_at = COALESCE(?, created_at), updated_at = COALESCE(?, updated_at) WHERE id = ?",
        (created_at, updated_at, thread_id),
    )
