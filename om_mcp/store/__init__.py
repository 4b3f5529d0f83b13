"""Storage: threads, messages, the observation log and its state, search indexes.

The store knows tables and transactions, nothing of MCP or of models. Values
come in validated and counted by the engine; typed rows come out.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from om_mcp.store.errors import DatabaseRefused, NotFound, StoreError, StoreUnavailable
from om_mcp.store.keys import parse_key, record_key, resource_key, thread_key
from om_mcp.store.rows import (
    AppendResult, BufferedReflection, Chunk, ContextRead, DueWork, Event, Group, GroupHit, Hints, IngestState, Message,
    ModelHealth, NewGroup, NewMessage, Record, RecordState, ResourceSummary, Scope, SearchHit, SettledThread, Snapshot,
    Stats, Thread,
)
if TYPE_CHECKING:
    from om_mcp.store.sqlite.store import SQLiteStore

    Store = SQLiteStore


def __getattr__(name: str) -> Any:
    # The store class (and with it every operation module and anyio) loads on first use:
    # the host hook uses a few operation modules directly and starts faster without it.
    if name in ("Store", "SQLiteStore"):
        from om_mcp.store.sqlite.store import SQLiteStore

        globals().update(Store=SQLiteStore, SQLiteStore=SQLiteStore)
        return SQLiteStore
    raise AttributeError(f"module 'om_mcp.store' has no attribute {name!r}")


async def open_store(location: str | Path) -> "Store":
    """Open the database at a path (SQLite)."""
    from om_mcp.store.sqlite.store import SQLiteStore

    return await SQLiteStore.open(location)


__all__ = [
    "AppendResult", "BufferedReflection", "Chunk", "ContextRead", "DatabaseRefused", "DueWork", "Event", "Group",
    "GroupHit", "Hints", "IngestState", "Message", "ModelHealth", "NewGroup", "NewMessage", "NotFound", "Record",
    "RecordState", "ResourceSummary", "Scope", "SearchHit", "SettledThread", "Snapshot", "Stats", "Store", "StoreError",
    "StoreUnavailable", "Thread", "open_store", "parse_key", "record_key", "resource_key", "thread_key",
]
