"""Storage: threads, messages, the observation log and its state, search indexes.

The store knows tables and transactions, nothing of MCP or of models. Values
come in validated and counted by the engine; typed rows come out. Two backends
behind one interface (`interface.Store`): SQLite (a file path) and PostgreSQL
(a postgresql:// URL, for several processes or machines on one memory).
"""

from __future__ import annotations

from om_mcp.store.errors import DatabaseRefused, NotFound, StoreError, StoreUnavailable
from om_mcp.store.interface import Store
from om_mcp.store.keys import parse_key, record_key, resource_key, thread_key
from om_mcp.store.location import is_postgres, open_store
from om_mcp.store.rows import (
    RETIRED,
    AppendResult,
    BufferedReflection,
    Chunk,
    ContextRead,
    DueWork,
    Event,
    Group,
    GroupHit,
    Hints,
    IngestState,
    Message,
    ModelHealth,
    NewGroup,
    NewMessage,
    Record,
    RecordState,
    Remembered,
    ResourceSummary,
    Scope,
    SearchHit,
    SettledThread,
    Snapshot,
    Stats,
    Thread,
)


def __getattr__(name: str):
    # The SQLite store (and the thread it runs on) loads when first used, not when rows are.
    if name == "SQLiteStore":
        from om_mcp.store.sqlite.store import SQLiteStore

        return SQLiteStore
    if name == "copy_memory":  # `om-mcp migrate`: both drivers' copy code, loaded when it runs
        from om_mcp.store.copy import copy_memory

        return copy_memory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "RETIRED",
    "AppendResult",
    "BufferedReflection",
    "Chunk",
    "ContextRead",
    "copy_memory",
    "DatabaseRefused",
    "DueWork",
    "Event",
    "Group",
    "GroupHit",
    "Hints",
    "IngestState",
    "Message",
    "ModelHealth",
    "NewGroup",
    "NewMessage",
    "NotFound",
    "Record",
    "RecordState",
    "Remembered",
    "ResourceSummary",
    "Scope",
    "SearchHit",
    "SettledThread",
    "Snapshot",
    "Stats",
    "Store",
    "StoreError",
    "SQLiteStore",
    "StoreUnavailable",
    "Thread",
    "is_postgres",
    "open_store",
    "parse_key",
    "record_key",
    "resource_key",
    "thread_key",
]
