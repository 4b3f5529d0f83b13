"""Copying a whole memory from one database to another (SQLite <-> PostgreSQL), row for row.

Every table is copied as it is, seqs and ids included, so cursors, group ranges,
event ids and search hits mean the same on both sides; only the search indexes
are rebuilt in the target's own form. The source is read in one snapshot.

Resumable and idempotent into PostgreSQL: rows go in batches of one transaction
each, keyed by their primary key, and a row already there is skipped, so a copy
that stopped (Ctrl-C, a lost connection) continues where it was when run again,
and a finished one run again changes nothing. The target remembers its source
(`om_meta.migrated_from`) and refuses to mix in any other memory. A SQLite target
must be new or empty.
"""

from __future__ import annotations

import os
import sqlite3
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from om_mcp.store import is_postgres, open_store
from om_mcp.store.errors import DatabaseRefused

BATCH = 1000


@dataclass(frozen=True)
class Table:
    name: str
    key: tuple[str, ...]
    columns: tuple[str, ...]


# Dependency order (a thread after its resource, a cursor after its record); leases are not
# copied: they belong to the processes of the source.
TABLES = [
    Table("resources", ("id",), ("id", "working_memory", "created_at", "updated_at")),
    Table(
        "threads",
        ("id",),
        (
            "id",
            "resource_id",
            "title",
            "title_pinned",
            "metadata",
            "working_memory",
            "created_at",
            "updated_at",
            "message_count",
            "last_assistant_at",
            "last_assistant_id",
            "last_model",
            "previous_model",
        ),
    ),
    Table("om_tokenizers", ("id",), ("id", "name")),
    Table(
        "messages",
        ("seq",),
        (
            "seq",
            "id",
            "thread_id",
            "resource_id",
            "role",
            "body",
            "parts",
            "created_at",
            "metadata",
            "tokens",
            "part_tokens",
            "counted_by",
            "observable",
        ),
    ),
    Table(
        "om_records",
        ("key",),
        (
            "key",
            "scope",
            "resource_id",
            "thread_id",
            "generation",
            "extracted",
            "last_observed_at",
            "last_reflection_at",
            "reflection_blocked_at",
            "last_buffered_at_tokens",
            "version",
            "created_at",
            "updated_at",
            "observation_tokens",
        ),
    ),
    Table(
        "om_cursors",
        ("record_key", "thread_id"),
        (
            "record_key",
            "thread_id",
            "seq",
            "pending_tokens",
            "pending_messages",
            "counted_seq",
            "current_task",
            "suggested_response",
        ),
    ),
    Table(
        "om_groups",
        ("id",),
        (
            "id",
            "record_key",
            "generation",
            "position",
            "kind",
            "thread_id",
            "first_seq",
            "last_seq",
            "first_message_id",
            "last_message_id",
            "text",
            "tokens",
            "observed_at",
            "created_at",
        ),
    ),
    Table(
        "om_buffered_reflections",
        ("record_key",),
        ("record_key", "cycle_id", "generation", "covered", "input_tokens", "text", "tokens", "hints", "created_at"),
    ),
    Table(
        "om_chunks",
        ("id",),
        (
            "id",
            "record_key",
            "cycle_id",
            "thread_id",
            "first_seq",
            "last_seq",
            "message_tokens",
            "text",
            "tokens",
            "hints",
            "last_message_at",
            "created_at",
            "first_message_id",
            "last_message_id",
            "message_count",
        ),
    ),
    Table(
        "om_events",
        ("id",),
        (
            "id",
            "type",
            "cycle_id",
            "record_key",
            "resource_id",
            "thread_id",
            "anchor_message_id",
            "payload",
            "created_at",
        ),
    ),
    Table("embeddings", ("kind", "ref", "embedder"), ("kind", "ref", "resource_id", "thread_id", "embedder", "vector")),
    Table(
        "model_health",
        ("model",),
        ("model", "state", "failures", "next_attempt_at", "last_error", "last_failure_at", "config_hash"),
    ),
    Table("ingest_state", ("source",), ("source", "offset", "last_id", "fingerprint", "updated_at")),
]
BOOLEANS = {("threads", "title_pinned"), ("messages", "observable")}


@dataclass
class Report:
    rows: dict[str, int] = field(default_factory=dict)  # added to the target now (rows already there not counted)
    totals: dict[str, int] = field(default_factory=dict)  # in the source
    indexed_threads: int = 0
    resumed: bool = False


def _quoted(names: tuple[str, ...]) -> str:
    return ", ".join(f'"{n}"' for n in names)


def _sqlite_path(location: str) -> str:
    return location.removeprefix("sqlite://")


def describe(location: str) -> str:
    """The location without a password, and a SQLite path made absolute."""
    if is_postgres(location):
        from om_mcp.store.postgres.database import redact

        return redact(location)
    return "sqlite://" + os.path.abspath(_sqlite_path(location))


# -- reading the source ----------------------------------------------------------------------


class SqliteSource:
    """A read-only connection holding one read transaction for the whole copy."""

    def __init__(self, path: str):
        self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self.conn.execute("BEGIN")

    async def count(self, table: Table) -> int:
        return await anyio.to_thread.run_sync(
            lambda: self.conn.execute(f"SELECT COUNT(*) FROM {table.name}").fetchone()[0]
        )

    async def batch(self, table: Table, after: tuple | None) -> list[tuple]:
        where = f"WHERE ({_quoted(table.key)}) > ({', '.join('?' * len(table.key))})" if after else ""
        sql = f"SELECT {_quoted(table.columns)} FROM {table.name} {where} ORDER BY {_quoted(table.key)} LIMIT {BATCH}"
        rows = await anyio.to_thread.run_sync(lambda: self.conn.execute(sql, after or ()).fetchall())
        if table.name == "embeddings":
            rows = [(*r[:5], list(_floats(r[5]))) for r in rows]
        return [tuple(bool(v) if (table.name, c) in BOOLEANS else v for c, v in zip(table.columns, r)) for r in rows]

    async def close(self) -> None:
        self.conn.close()


class PostgresSource:
    """One connection in one REPEATABLE READ snapshot for the whole copy."""

    def __init__(self, conn: Any, transaction: Any):
        self.conn, self.transaction = conn, transaction

    @classmethod
    async def open(cls, url: str) -> PostgresSource:
        import asyncpg

        from om_mcp.store.postgres.database import SETTINGS

        conn = await asyncpg.connect(url, server_settings=SETTINGS)
        transaction = conn.transaction(isolation="repeatable_read", readonly=True)
        await transaction.start()
        return cls(conn, transaction)

    async def count(self, table: Table) -> int:
        return await self.conn.fetchval(f"SELECT COUNT(*) FROM {table.name}")

    async def batch(self, table: Table, after: tuple | None) -> list[tuple]:
        columns = _quoted(table.columns).replace('"vector"', '"vector"::real[]')
        marks = ", ".join(f"${i}" for i in range(1, len(table.key) + 1))
        where = f"WHERE ({_quoted(table.key)}) > ({marks})" if after else ""
        rows = await self.conn.fetch(
            f"SELECT {columns} FROM {table.name} {where} ORDER BY {_quoted(table.key)} LIMIT {BATCH}", *(after or ())
        )
        return [tuple(r) for r in rows]

    async def close(self) -> None:
        await self.transaction.rollback()
        await self.conn.close()


def _floats(blob: bytes) -> array:
    values = array("f")
    values.frombytes(blob)
    return values


# -- writing the target -------------------------------------------------------------------------


def _without_nul(row: tuple) -> tuple:
    """A message whose text holds NUL (PostgreSQL text cannot): exact parts as JSON, searchable body without it."""
    body, parts = row[5], row[6]
    if "\x00" not in body:
        return row
    import json

    exact = parts if parts is not None else json.dumps([{"type": "text", "text": body}], separators=(",", ":"))
    return (*row[:5], body.replace("\x00", " "), exact, *row[7:])


async def _pg_write(store: Any, table: Table, rows: list[tuple]) -> None:
    if table.name == "messages":
        rows = [_without_nul(r) for r in rows]
    columns = table.columns + (("doclen",) if table.name == "om_groups" else ())
    if table.name == "om_groups":
        from om_mcp.store.postgres.search import doclen

        rows = [(*r, doclen(r[10])) for r in rows]
    marks = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
    if table.name == "embeddings":
        marks = marks.rsplit(", ", 1)[0] + f", ${len(columns)}::real[]"
    sql = f"INSERT INTO {table.name} ({_quoted(columns)}) VALUES ({marks}) ON CONFLICT DO NOTHING"

    async def insert(conn: Any) -> None:
        await conn.executemany(sql, rows)

    await store.db.write(insert)


async def _sqlite_write(store: Any, table: Table, rows: list[tuple]) -> None:
    if table.name == "embeddings":
        rows = [(*r[:5], array("f", r[5]).tobytes()) for r in rows]
    rows = [tuple(int(v) if isinstance(v, bool) else v for v in r) for r in rows]
    sql = (
        f"INSERT OR IGNORE INTO {table.name} ({_quoted(table.columns)}) VALUES ({', '.join('?' * len(table.columns))})"
    )
    await store.db.write(lambda conn: conn.executemany(sql, rows))


async def _claim(store: Any, source: str) -> bool:
    """Mark the PostgreSQL target as this source's copy; True when resuming one. Refuses another memory."""

    async def claim(conn: Any) -> bool:
        mark = await conn.fetchval("SELECT value FROM om_meta WHERE key = 'migrated_from' FOR UPDATE")
        if mark is not None and mark != source:
            raise DatabaseRefused(f"the target already holds a copy of {mark}, not of {source}: use an empty database")
        if mark is None:
            if await conn.fetchval("SELECT EXISTS (SELECT 1 FROM threads) OR EXISTS (SELECT 1 FROM om_records)"):
                raise DatabaseRefused("the target database already holds a memory: copy into an empty database")
            await conn.execute("INSERT INTO om_meta (key, value) VALUES ('migrated_from', $1)", source)
        return mark is not None

    return await store.db.write(claim)


async def _finish_postgres(store: Any, advance: Callable[[int], None] | None) -> int:
    """Identity and event counters past the copied rows; the search index for every thread missing from it."""
    from om_mcp.store.postgres import search

    async def counters(conn: Any) -> list[tuple[str, str]]:
        for table, column in (("messages", "seq"), ("om_tokenizers", "id")):
            await conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'),"
                f" GREATEST((SELECT MAX({column}) FROM {table}), 1), (SELECT MAX({column}) FROM {table}) IS NOT NULL)"
            )
        await conn.execute(
            "UPDATE om_counters SET value = GREATEST(value, (SELECT COALESCE(MAX(id), 0)"
            " FROM om_events)) WHERE name = 'events'"
        )
        rows = await conn.fetch(
            "SELECT DISTINCT m.thread_id, m.resource_id FROM messages m WHERE m.body <> ''"
            " AND NOT EXISTS (SELECT 1 FROM messages_fts f WHERE f.seq = m.seq) ORDER BY 1"
        )
        return [(r[0], r[1]) for r in rows]

    missing = await store.db.write(counters)

    async def index(conn: Any, thread_id: str, resource_id: str) -> None:
        await search.forget_threads(conn, [thread_id])  # a thread half indexed by an earlier run: again, whole
        rows = await conn.fetch("SELECT seq, body FROM messages WHERE thread_id = $1 ORDER BY seq", thread_id)
        await search.index_messages(conn, thread_id, resource_id, [(r[0], r[1]) for r in rows])

    for thread_id, resource_id in missing:
        await store.db.write(index, thread_id, resource_id)
        if advance:
            advance(1)
    return len(missing)


def _finish_sqlite(conn: sqlite3.Connection) -> None:
    from om_mcp.store.sqlite import fts

    fts.rebuild(conn)
    conn.execute("DELETE FROM om_groups_fts")
    conn.execute("INSERT INTO om_groups_fts (group_id, record_key, text) SELECT id, record_key, text FROM om_groups")


# -- the copy ----------------------------------------------------------------------------------


async def _count(store: Any, table: Table) -> int:
    if store.backend == "postgres":
        return await store.db.read(lambda conn: conn.fetchval(f"SELECT COUNT(*) FROM {table.name}"))
    return await store.db.read(lambda conn: conn.execute(f"SELECT COUNT(*) FROM {table.name}").fetchone()[0])


async def copy(
    source: str, target: str, *, progress: Callable[[str, int], Callable[[int], None]] | None = None
) -> Report:
    """Copy the memory at `source` into `target` (a file path, sqlite:///path or postgresql://...).
    `progress(description, total)` returns the `advance(n)` of a progress bar."""
    if describe(source) == describe(target):
        raise DatabaseRefused("the source and the target are the same database")
    if not is_postgres(source) and not os.path.isfile(_sqlite_path(source)):
        raise DatabaseRefused(f"no database at {_sqlite_path(source)}: check --from")
    await (await open_store(source)).close()  # checked, and migrated to this version's schema
    store = await open_store(target)
    report = Report()
    reader = await PostgresSource.open(source) if is_postgres(source) else SqliteSource(_sqlite_path(source))
    try:
        if store.backend == "postgres":
            report.resumed = await _claim(store, describe(source))
        elif (await store.stats()).threads:
            raise DatabaseRefused(f"{describe(target)} already holds a memory: copy into a new file")
        report.totals = {t.name: await reader.count(t) for t in TABLES}
        advance = progress("copying rows", sum(report.totals.values())) if progress else None
        write = _pg_write if store.backend == "postgres" else _sqlite_write
        for table in TABLES:
            before, after = await _count(store, table), None
            while rows := await reader.batch(table, after):
                await write(store, table, rows)
                after = tuple(rows[-1][table.columns.index(k)] for k in table.key)
                if advance:
                    advance(len(rows))
            report.rows[table.name] = await _count(store, table) - before
        if store.backend == "postgres":
            threads = await store.db.read(lambda conn: conn.fetchval("SELECT COUNT(*) FROM threads"))
            report.indexed_threads = await _finish_postgres(
                store, progress("search index", threads) if progress else None
            )
        else:
            await store.db.write(_finish_sqlite)
    finally:
        await reader.close()
        await store.close()
    return report
