"""Storage: threads, messages, the observation log and its state, search indexes.

The store knows tables and transactions, nothing of MCP or of models. Values
come in validated and counted by the engine; typed rows come out. Two backends
behind one interface (`interface.Store`, its operations mapped to their rules in
`operations.py`): SQLite (a file path) and PostgreSQL (a postgresql:// URL, for several
processes or machines on one memory). Above the store, code reaches it through the names
exported here and `store.local` (the SQLite file opened directly), `store.urls`, `store.errors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from om_mcp.lazy import face
from om_mcp.store.access import EVERY_RESOURCE, NO_RESOURCE, Access
from om_mcp.store.errors import DatabaseRefused, NotFound, StoreError, StoreUnavailable
from om_mcp.store.gate import Gate, GateError, gate_for
from om_mcp.store.interface import Store
from om_mcp.store.keys import parse_key, record_key, resource_key, thread_key
from om_mcp.store.location import is_postgres, open_store
from om_mcp.store.operations import Operations, Transaction
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
    OAuthGrant,
    OAuthSecret,
    Record,
    RecordState,
    Remembered,
    ResourceSummary,
    Scope,
    SearchHit,
    SessionSummary,
    SettledThread,
    Snapshot,
    Stats,
    Thread,
)
from om_mcp.store.sessions import QUIET_SECONDS, WORKER_LEASE, quiet_before
from om_mcp.store.summaries import ImportResult, SeriesInputs, ThreadState

# The SQLite store (and the thread it runs on) loads when first used, not when rows are; so does the
# copier between backends (`om-mcp migrate`, `backup` of a PostgreSQL memory: both drivers' copy code).
__getattr__ = face(__name__, {"SQLiteStore": "sqlite.store", "copy_memory": "copy"})

if TYPE_CHECKING:
    from om_mcp.store.copy import copy_memory
    from om_mcp.store.sqlite.store import SQLiteStore


__all__ = [
    "EVERY_RESOURCE",
    "NO_RESOURCE",
    "RETIRED",
    "Access",
    "AppendResult",
    "BufferedReflection",
    "Chunk",
    "ContextRead",
    "copy_memory",
    "DatabaseRefused",
    "DueWork",
    "Event",
    "Gate",
    "GateError",
    "Group",
    "GroupHit",
    "Hints",
    "ImportResult",
    "IngestState",
    "Message",
    "ModelHealth",
    "NewGroup",
    "NewMessage",
    "OAuthGrant",
    "OAuthSecret",
    "NotFound",
    "Operations",
    "QUIET_SECONDS",
    "Record",
    "RecordState",
    "Remembered",
    "ResourceSummary",
    "Scope",
    "SearchHit",
    "SeriesInputs",
    "SessionSummary",
    "SettledThread",
    "Snapshot",
    "Stats",
    "Store",
    "StoreError",
    "SQLiteStore",
    "StoreUnavailable",
    "Thread",
    "ThreadState",
    "Transaction",
    "WORKER_LEASE",
    "copy_memory",
    "gate_for",
    "is_postgres",
    "open_store",
    "parse_key",
    "quiet_before",
    "record_key",
    "resource_key",
    "thread_key",
]
