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
        return await self.db.read(on_connection(op), *args, **kwargs)

    async def _write(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.write(on_connection(op), *args, **kwargs)

    async def delete_thread(self, thread_id: str) -> int:
        count = await super().delete_thread(thread_id)
        await self.db.raw(admin.checkpoint)  # the deleted pages' old images leave the -wal file too
        return count

    async def delete_resource(self, resource_id: str) -> tuple[int, int]:
        counts = await super().delete_resource(resource_id)
        await self.db.raw(admin.checkpoint)
        return counts

    async def apply_rewrite(self, plan: Rewrite) -> Rewritten | None:
        done = await super().apply_rewrite(plan)
        if done is not None:
            await self.db.raw(admin.checkpoint)  # the old pages leave the -wal too
        return done

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
