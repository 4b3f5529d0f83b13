"""Storage: threads, messages, the observation log and its state, search indexes.

The store knows tables and transactions, nothing of MCP or of models. Values
come in validated and counted by the engine; typed rows come out.
"""

from __future__ import annotations

from pathlib import Path

from om_mcp.store.errors import DatabaseRefused, NotFound, StoreError, StoreUnavailable
from om_mcp.store.keys import parse_key, record_key, resource_key, thread_key
from om_mcp.store.rows import (
    AppendResult, BufferedReflection, Chunk, ContextRead, DueWork, Event, Group, GroupHit, Hints, IngestState, Message,
    ModelHealth, NewGroup, NewMessage, Record, RecordState, ResourceSummary, Scope, SearchHit, SettledThread, Snapshot,
    Stats, Thread,
)
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from om_mcp.store.sqlite.store import SQLiteStore as Store


async def open_store(location: str | Path) -> "Store":
    """Open the database at a path (SQLite)."""
    from om_mcp.store.sqlite.store import SQLiteStore

    return await SQLiteStore.open(location)


def __getattr__(name: str):
    # The SQLite store (and the thread it runs on) loads when first used, not when rows are.
    if name in ("Store", "SQLiteStore"):
        from om_mcp.store.sqlite.store import SQLiteStore

        return SQLiteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AppendResult", "BufferedReflection", "Chunk", "ContextRead", "DatabaseRefused", "DueWork", "Event", "Group",
    "GroupHit", "Hints", "IngestState", "Message", "ModelHealth", "NewGroup", "NewMessage", "NotFound", "Record",
    "RecordState", "ResourceSummary", "Scope", "SearchHit", "SettledThread", "Snapshot", "Stats", "Store", "StoreError",
    "StoreUnavailable", "Thread", "open_store", "parse_key", "record_key", "resource_key", "thread_key",
]
