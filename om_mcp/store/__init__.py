"""SQLite storage: migrations, threads, messages, search index, working memory."""

from om_mcp.store.database import Database, Transaction
from om_mcp.store.store import AppendResult, Message, NotFound, SearchHit, Store, StoreError, Thread

__all__ = [
    "AppendResult", "Database", "Message", "NotFound", "SearchHit", "Store", "StoreError", "Thread", "Transaction",
]
