"""`SQLiteStore`: the store operations on one SQLite file, one trip to the database thread each.

The shared rules (`store.operations`) run whole on the database thread through
`driver.SQLiteTx`; what only SQLite has (FTS5 search, the file's checks,
checkpoints and backups) is this package's own modules.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from om_mcp.store.interface import Store
from om_mcp.store.operations import Op
from om_mcp.store.rows import Rewrite, Rewritten
from om_mcp.store.sqlite import admin, fts
from om_mcp.store.sqlite.database import Database
from om_mcp.store.sqlite.driver import on_connection

P = ParamSpec("P")
R = TypeVar("R")


def _reads(
    op: Callable[Concatenate[sqlite3.Connection, P], R],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """A read of SQLite's own (a plain function of the connection)."""

    async def method(self: SQLiteStore, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.read(op, *args, **kwargs)

    method.__name__, method.__doc__ = op.__name__, op.__doc__
    return method


class SQLiteStore(Store):
    """The memory's SQLite database."""

    backend: Literal["sqlite"] = "sqlite"

    def __init__(self, db: Database):
        self.db = db
        self.location = db.path

    @classmethod
    async def open(cls, path: str | Path) -> SQLiteStore:
        return cls(await Database.open(path))

    async def close(self) -> None:
        await self.db.close()

    async def _read(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.read(on_connection(op, self.gate), *args, **kwargs)

    async def _write(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.write(on_connection(op, self.gate), *args, **kwargs)

    # After a deletion the WAL is folded into the file, so the deleted pages' old images leave the file
    # and the -wal. A connection reading an older snapshot (an export in progress) keeps them there: then
    # the erase is marked pending (status shows it, `om-mcp forget` exits non-zero) until a later
    # checkpoint, by `finish_erase` (the worker's poll, `om-mcp forget --finish`, the next forget), ends it.
    async def delete_thread(self, thread_id: str) -> int:
        count = await super().delete_thread(thread_id)
        await self.finish_erase(started=True)
        return count

    async def delete_resource(self, resource_id: str) -> tuple[int, int]:
        counts = await super().delete_resource(resource_id)
        await self.finish_erase(started=True)
        return counts

    async def apply_rewrite(self, plan: Rewrite) -> Rewritten | None:
        done = await super().apply_rewrite(plan)
        if done is not None:
            done.erased = await self.finish_erase(started=True)
        return done

    async def finish_erase(self, *, started: bool = False, wait: bool = True) -> bool:
        """Fold the WAL in; True when no erase is left pending. `started`: a deletion just committed (an
        erase that cannot finish now is marked pending); `wait`: wait for readers up to the busy timeout
        (else give up at once: a poll that only tries)."""
        if not started and await self.erase_pending() is None:
            return True
        if await self.db.raw(admin.checkpoint, None if wait else 0):
            if await self.erase_pending() is not None:
                await self.clear_erase_pending()
            return True
        if started:
            await self.mark_erase_pending()
        return False

    # search
    search_messages = _reads(fts.find)
    search_groups = _reads(fts.search_groups)

    # the file
    async def stats(self):
        return await self.db.read(admin.stats, self.db.path)

    integrity = _reads(admin.integrity)

    async def backup(self, target: str) -> int:
        return await self.db.raw(admin.backup, target)

    # changes seen by other processes: SQLite's processes share a file, not a channel
    async def broadcast(self, message: dict) -> None:
        return None

    async def listen(self, callback):
        async def stop() -> None:
            return None

        return stop
