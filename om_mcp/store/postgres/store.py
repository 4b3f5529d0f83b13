"""`PostgresStore`: the store operations on PostgreSQL, one transaction each.

The shared rules (`store.operations`) run through `driver.PgTx` in a read (one
REPEATABLE READ snapshot) or a write (READ COMMITTED with row locks); what only
PostgreSQL has (its search index, pgvector, LISTEN/NOTIFY) is this package's own.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from om_mcp.store import observations
from om_mcp.store.errors import StoreError
from om_mcp.store.gate import Gate
from om_mcp.store.interface import Store
from om_mcp.store.migrations import MIGRATIONS
from om_mcp.store.operations import Op, writes
from om_mcp.store.postgres import admin, search, vectors
from om_mcp.store.postgres.database import SETTINGS, PgDatabase
from om_mcp.store.postgres.driver import PgTx
from om_mcp.store.postgres.listen import CHANNEL, Listener, payload
from om_mcp.store.postgres.migrate import migrate
from om_mcp.store.urls import redact

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


def _reads(op: Callable[Concatenate[Any, P], Awaitable[R]]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    async def method(self: PostgresStore, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.read(op, *args, **kwargs)

    method.__name__, method.__doc__ = op.__name__, op.__doc__
    return method


def _on_tx(op: Op[P, R], pgvector: bool, gate: Gate | None = None) -> Callable[Concatenate[Any, P], Awaitable[R]]:
    async def run(conn: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        return await op(PgTx(conn, pgvector, gate), *args, **kwargs)

    run.__name__ = op.__name__  # named in the retry log
    return run


class PostgresStore(Store):
    """The memory's PostgreSQL database (tables in its `om` schema)."""

    backend: Literal["postgres"] = "postgres"

    def __init__(self, db: PgDatabase, vector_status: str | None):
        self.db = db
        self.location = redact(db.url)
        self.pgvector = vector_status  # "pgvector 0.8.6", or None: compared in Python
        self.origin = uuid.uuid4().hex  # this process, in notifications
        self._listeners: list[Listener] = []

    @classmethod
    async def open(cls, url: str) -> PostgresStore:
        db = await PgDatabase.open(url)
        try:
            async with db.pool.acquire() as conn:
                await migrate(conn, redact(url), [m.postgres for m in MIGRATIONS])
                status = await vectors.status(conn)
        except BaseException:
            await db.close()
            raise
        log.info("database: PostgreSQL %s; vectors: %s", redact(url), status or vectors.WITHOUT)
        return cls(db, status)

    async def close(self) -> None:
        for listener in self._listeners:
            await listener.stop()
        self._listeners.clear()
        await self.db.close()

    async def _read(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.read(_on_tx(op, self.pgvector is not None, self.gate), *args, **kwargs)

    async def _write(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.write(_on_tx(op, self.pgvector is not None, self.gate), *args, **kwargs)

    due_work = writes(observations.due)  # skips rows locked by commits: FOR UPDATE SKIP LOCKED

    # search and vectors
    search_messages = _reads(search.find)
    search_groups = _reads(search.search_groups)

    # the database
    @property
    def vector_status(self) -> str:
        return f"{self.pgvector} (in the database)" if self.pgvector else vectors.WITHOUT

    async def stats(self):
        return await self.db.read(admin.stats, self.location, self.vector_status)

    integrity = _reads(admin.integrity)

    async def backup(self, target: str) -> int:
        # SQLite's backup API has no PostgreSQL counterpart here: `Memory.backup` copies this database
        # into a SQLite file (store/copy.py, which opens both backends, so it cannot live in either).
        raise StoreError("a PostgreSQL memory is backed up with `om-mcp backup` (a copy), or pg_dump")

    async def finish_erase(self, *, started: bool = False, wait: bool = True) -> bool:
        """PostgreSQL has no file of ours to fold: deleted rows are gone from every table at once
        (their space is reclaimed by its VACUUM)."""
        return True

    # changes seen by other processes
    async def broadcast(self, message: dict[str, Any]) -> None:
        """Tell the other processes on this database (LISTEN/NOTIFY; delivered at once, not stored)."""
        text = payload(self.origin, message)

        async def send(conn: Any) -> None:
            await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, text)

        await self.db.raw(send)

    async def listen(self, callback: Callable[[dict[str, Any]], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        """Call `callback` with what other processes broadcast; returns the coroutine that stops listening."""
        listener = Listener(self.db.url, SETTINGS, self.origin, callback)
        await listener.start()
        self._listeners.append(listener)

        async def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)
                await listener.stop()

        return stop
