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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from om_mcp.store.copy_rows import PostgresSource, SqliteSource, finish_postgres, finish_sqlite, target_columns

# The writers are bound here and looked up at each run, so a test can make one fail part-way.
from om_mcp.store.copy_rows import write_postgres as _pg_write
from om_mcp.store.copy_rows import write_sqlite as _sqlite_write
from om_mcp.store.copy_tables import TABLES, shared_columns
from om_mcp.store.errors import DatabaseRefused
from om_mcp.store.locations import is_postgres, open_store

BATCH = 1000  # rows per batch, one target transaction each: what a stopped copy may have to redo


@dataclass
class Report:
    rows: dict[str, int] = field(default_factory=dict)  # added to the target now (rows already there not counted)
    totals: dict[str, int] = field(default_factory=dict)  # in the source
    indexed_threads: int = 0
    resumed: bool = False


def _sqlite_path(location: str) -> str:
    return location.removeprefix("sqlite://")


def describe(location: str) -> str:
    """The location without a password, and a SQLite path made absolute."""
    if is_postgres(location):
        from om_mcp.store.urls import redact

        return redact(location)
    return "sqlite://" + os.path.abspath(_sqlite_path(location))


# -- the copy ----------------------------------------------------------------------------------


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


async def _count(store: Any, table: str) -> int:
    if store.backend == "postgres":
        return await store.db.read(lambda conn: conn.fetchval(f"SELECT COUNT(*) FROM {table}"))
    return await store.db.read(lambda conn: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


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
        for named in TABLES:
            table = shared_columns(named, await reader.columns(named), await target_columns(store, named))
            before, after = await _count(store, table.name), None
            while rows := await reader.batch(table, after, BATCH):
                await write(store, table, rows)
                after = tuple(table.at(rows[-1], k) for k in table.key)
                if advance:
                    advance(len(rows))
            report.rows[table.name] = await _count(store, table.name) - before
        if store.backend == "postgres":
            threads = await _count(store, "threads")
            report.indexed_threads = await finish_postgres(
                store, progress("search index", threads) if progress else None
            )
        else:
            await finish_sqlite(store)
    finally:
        await reader.close()
        await store.close()
    return report
