"""One SQLite connection per process, with short write transactions.

Several processes may open the same file (Claude Desktop and an IDE on one
database is the normal case). WAL lets readers and one writer work at once,
`busy_timeout` makes SQLite wait for a lock instead of failing, and every write
starts with BEGIN IMMEDIATE so two writers queue up front rather than deadlock
on a lock upgrade. A retry loop on top covers the rare "database is locked"
that still escapes (for example while another process checkpoints).
"""

from __future__ import annotations

import logging
import random
import sqlite3
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

import aiosqlite
import anyio

from om_mcp.store.schema import MIGRATIONS

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000
LOCKED_RETRY_SECONDS = 30.0


def _is_locked(error: sqlite3.OperationalError) -> bool:
    text = str(error).lower()
    return "locked" in text or "busy" in text


class Database:
    """An aiosqlite connection, a process-local lock, and transactions."""

    def __init__(self, conn: aiosqlite.Connection, path: str):
        self._conn = conn
        self.path = path
        # aiosqlite runs statements one at a time on its thread, but a
        # transaction spans several awaits: the lock keeps two coroutines
        # from interleaving statements inside one BEGIN ... COMMIT.
        self._lock = anyio.Lock()

    @classmethod
    async def open(cls, path: str | Path) -> "Database":
        path = str(path)
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        pending = aiosqlite.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        # A connection someone forgot to close must not keep the process alive
        # at exit (aiosqlite's worker thread is not a daemon by default).
        pending._thread.daemon = True
        conn = await pending
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        await _retry_locked(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        await conn.execute("PRAGMA synchronous = NORMAL")
        await conn.execute("PRAGMA foreign_keys = ON")
        db = cls(conn, path)
        await db._migrate()
        return db

    async def close(self) -> None:
        await self._conn.close()

    async def _migrate(self) -> None:
        async with self.write() as tx:
            row = await tx.one("PRAGMA user_version")
            current = row[0]
            for version, script in enumerate(MIGRATIONS, start=1):
                if version <= current:
                    continue
                for statement in _split_sql(script):
                    await tx.execute(statement)
                await tx.execute(f"PRAGMA user_version = {version}")
                log.info("database migrated to schema version %d", version)

    @asynccontextmanager
    async def write(self) -> AsyncIterator["Transaction"]:
        """A write transaction: BEGIN IMMEDIATE ... COMMIT, rolled back on error."""
        async with self._lock:
            # Shielded: a BEGIN cancelled mid-flight still runs on aiosqlite's
            # thread, and would leave a transaction (and the write lock) open.
            with anyio.CancelScope(shield=True):
                await _retry_locked(lambda: self._conn.execute("BEGIN IMMEDIATE"))
            try:
                yield Transaction(self._conn)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._conn.rollback()
                raise
            else:
                with anyio.CancelScope(shield=True):
                    await _retry_locked(self._conn.commit)

    @asynccontextmanager
    async def read(self, consistent: bool = False) -> AsyncIterator["Transaction"]:
        """Run reads. A single statement is atomic on its own; `consistent`
        wraps several in one snapshot (BEGIN ... ROLLBACK), at two more
        round trips to the database thread."""
        async with self._lock:
            if not consistent:
                yield Transaction(self._conn)
                return
            with anyio.CancelScope(shield=True):
                await self._conn.execute("BEGIN")
            try:
                yield Transaction(self._conn)
            finally:
                with anyio.CancelScope(shield=True):
                    await self._conn.rollback()


class Transaction:
    """Statement helpers bound to an open transaction."""

    def __init__(self, conn: aiosqlite.Connection):
        self._conn = conn

    async def execute(self, sql: str, params: Iterable[Any] = ()) -> aiosqlite.Cursor:
        return await _retry_locked(lambda: self._conn.execute(sql, tuple(params)))

    async def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        await self._conn.executemany(sql, [tuple(r) for r in rows])

    async def all(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        cursor = await self._conn.execute(sql, tuple(params))
        return list(await cursor.fetchall())

    async def one(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Row | None:
        cursor = await self._conn.execute(sql, tuple(params))
        return await cursor.fetchone()

    async def value(self, sql: str, params: Iterable[Any] = ()) -> Any:
        row = await self.one(sql, params)
        return None if row is None else row[0]


async def _retry_locked(operation):
    deadline = anyio.current_time() + LOCKED_RETRY_SECONDS
    delay = 0.02
    while True:
        try:
            return await operation()
        except sqlite3.OperationalError as error:
            if not _is_locked(error) or anyio.current_time() > deadline:
                raise
            log.debug("database busy, retrying: %s", error)
            await anyio.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 0.5)


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements (triggers need care with ';')."""
    statements, buffer = [], []
    for line in script.splitlines():
        buffer.append(line)
        candidate = "\n".join(buffer).strip()
        if candidate and sqlite3.complete_statement(candidate):
            statements.append(candidate)
            buffer = []
    rest = "\n".join(buffer).strip()
    if rest:
        statements.append(rest)
    return statements
