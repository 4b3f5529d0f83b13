"""The rows of a copy: read from the source in batches within one snapshot, written to the
target skipping rows already there, and the target finished (counters, search indexes) in its own form."""

from __future__ import annotations

import sqlite3
from array import array
from collections.abc import Callable
from typing import Any

import anyio

from om_mcp.store.copy_tables import BOOLEANS, POSTGRES_COLUMNS, Table, quoted
from om_mcp.store.vectors import floats

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

    async def columns(self, table: Table) -> list[str]:
        return await anyio.to_thread.run_sync(sqlite_columns, self.conn, table.name)

    async def batch(self, table: Table, after: tuple | None, limit: int) -> list[tuple]:
        """The next `limit` rows by primary key, after the key `after` (None: from the start)."""
        where = f"WHERE ({quoted(table.key)}) > ({', '.join('?' * len(table.key))})" if after else ""
        sql = f"SELECT {quoted(table.columns)} FROM {table.name} {where} ORDER BY {quoted(table.key)} LIMIT {limit}"
        rows = await anyio.to_thread.run_sync(lambda: self.conn.execute(sql, after or ()).fetchall())
        return [
            tuple(
                list(floats(v)) if c == "vector" else bool(v) if (table.name, c) in BOOLEANS else v
                for c, v in zip(table.columns, r)
            )
            for r in rows
        ]

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

    async def columns(self, table: Table) -> list[str]:
        return [r[0] for r in await self.conn.fetch(POSTGRES_COLUMNS, table.name)]

    async def batch(self, table: Table, after: tuple | None, limit: int) -> list[tuple]:
        columns = quoted(table.columns).replace('"vector"', '"vector"::real[]')
        marks = ", ".join(f"${i}" for i in range(1, len(table.key) + 1))
        where = f"WHERE ({quoted(table.key)}) > ({marks})" if after else ""
        rows = await self.conn.fetch(
            f"SELECT {columns} FROM {table.name} {where} ORDER BY {quoted(table.key)} LIMIT {limit}", *(after or ())
        )
        return [tuple(r) for r in rows]

    async def close(self) -> None:
        await self.transaction.rollback()
        await self.conn.close()


def sqlite_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]  # generated columns are not listed


async def target_columns(store: Any, table: Table) -> list[str]:
    if store.backend == "postgres":
        return await store.db.read(lambda conn: _names(conn.fetch(POSTGRES_COLUMNS, table.name)))
    return await store.db.read(sqlite_columns, table.name)


async def _names(rows: Any) -> list[str]:
    return [r[0] for r in await rows]


# -- writing the target -------------------------------------------------------------------------


def _without_nul(table: Table, row: tuple) -> tuple:
    """A message whose text holds NUL (PostgreSQL text cannot): exact parts as JSON, searchable body without it."""
    body, parts = table.at(row, "body"), table.at(row, "parts")
    if not isinstance(body, str) or "\x00" not in body:
        return row
    import json

    exact = parts if parts is not None else json.dumps([{"type": "text", "text": body}], separators=(",", ":"))
    fixed = {"body": body.replace("\x00", " "), "parts": exact}
    return tuple(fixed.get(c, v) for c, v in zip(table.columns, row))


async def write_postgres(store: Any, table: Table, rows: list[tuple]) -> None:
    if table.name == "messages":
        rows = [_without_nul(table, r) for r in rows]
    columns = table.columns + (("doclen",) if table.name == "om_groups" else ())
    if table.name == "om_groups":
        from om_mcp.store.postgres.search import doclen

        rows = [(*r, doclen(str(table.at(r, "text")))) for r in rows]
    marks = ", ".join(f"${i}::real[]" if c == "vector" else f"${i}" for i, c in enumerate(columns, start=1))
    sql = f"INSERT INTO {table.name} ({quoted(columns)}) VALUES ({marks}) ON CONFLICT DO NOTHING"

    async def insert(conn: Any) -> None:
        await conn.executemany(sql, rows)

    await store.db.write(insert)


async def write_sqlite(store: Any, table: Table, rows: list[tuple]) -> None:
    rows = [
        tuple(
            array("f", v).tobytes() if c == "vector" else int(v) if isinstance(v, bool) else v
            for c, v in zip(table.columns, r)
        )
        for r in rows
    ]
    sql = f"INSERT OR IGNORE INTO {table.name} ({quoted(table.columns)}) VALUES ({', '.join('?' * len(table.columns))})"
    await store.db.write(lambda conn: conn.executemany(sql, rows))


async def finish_postgres(store: Any, advance: Callable[[int], None] | None) -> int:
    """Identity and event counters past the copied rows; the search index for every thread missing from it."""
    from om_mcp.store.postgres import search

    async def counters(conn: Any) -> list[tuple[str, str]]:
        for table, column in (("messages", "seq"), ("om_tokenizers", "id"), ("om_working_memory_history", "id")):
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


async def finish_sqlite(store: Any) -> None:
    """The search indexes rebuilt from the copied rows."""

    def rebuild(conn: sqlite3.Connection) -> None:
        from om_mcp.store.sqlite import fts

        fts.rebuild(conn)
        conn.execute("DELETE FROM om_groups_fts")
        conn.execute(
            "INSERT INTO om_groups_fts (group_id, record_key, text) SELECT id, record_key, text FROM om_groups"
        )

    await store.db.write(rebuild)
