"""Where a memory lives: a SQLite file path or a postgresql:// URL, and opening it."""

from __future__ import annotations

from pathlib import Path

from om_mcp.store.interface import Store


def is_postgres(location: str | Path) -> bool:
    """A postgresql:// (or postgres://) URL, as opposed to a SQLite file path."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


async def open_store(location: str | Path) -> Store:
    """Open the database: a postgresql:// URL (PostgreSQL), else a file path (SQLite)."""
    if is_postgres(location):
        from om_mcp.store.postgres.store import PostgresStore  # asyncpg is imported only when used

        return await PostgresStore.open(str(location))
    if isinstance(location, str) and location.startswith("sqlite://"):
        location = location.removeprefix("sqlite://")
    from om_mcp.store.sqlite.store import SQLiteStore

    return await SQLiteStore.open(location)
