"""SQLite's synchronous mode: one connection, no thread and no event loop, for a short-lived
process (the host hooks, `om-mcp ingest`). The store's shared operations run on it through
`driver.run` inside `write`/`read`, exactly as on the store's write thread.

The database is opened quickly, and never waited on for long.

`database.connect` checks the whole file (`quick_check` reads every page) and
runs the migrations in a write transaction: right for a server that starts
once, too slow for a hook that runs on every prompt. Here the file's header,
owner and schema version are checked (a few pragmas); only a new or older
database goes through `database.connect`. A damaged page shows up as an error
when it is read, which the hook logs like any other.

A lock held by another process is waited for at most `BUSY_MS`; then the hook
gives up (fail-open) rather than hold up the agent.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from om_mcp.store.errors import DatabaseRefused
from om_mcp.store.migrations import APPLICATION_ID, LATEST_VERSION
from om_mcp.store.sqlite import checks

BUSY_MS = 1500
R = TypeVar("R")


def open_database(path: str) -> sqlite3.Connection:
    """A connection to an om-mcp database at the current schema; DatabaseRefused when the file is not usable."""
    checks.before_open(Path(path))
    conn = _connect(path)
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as error:
        conn.close()
        raise DatabaseRefused(f"{path} cannot be read as a database ({error}): move it aside") from None
    if app_id == APPLICATION_ID and version == LATEST_VERSION:
        return conn
    conn.close()
    from om_mcp.store.sqlite.database import connect  # a new or older file: the full checks and the migrations

    connect(path).close()
    return _connect(path)


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_MS / 1000, factory=checks.Connection)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA secure_delete = ON")
    return conn


def write(conn: sqlite3.Connection, op: Callable[..., R], *args: object) -> R:
    """Run `op(conn, *args)` in one write transaction (BEGIN IMMEDIATE ... COMMIT), rolled back on error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = op(conn, *args)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except sqlite3.Error:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


def read(conn: sqlite3.Connection, op: Callable[..., R], *args: object) -> R:
    """Run `op(conn, *args)` on one snapshot of the database."""
    conn.execute("BEGIN")
    try:
        return op(conn, *args)
    finally:
        conn.execute("ROLLBACK")


@contextmanager
def savepoint(conn: sqlite3.Connection, name: str = "om_direct") -> Iterator[None]:
    """Inside a transaction: what the block writes is undone on error, the rest stays."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        conn.execute(f"ROLLBACK TO {name}")
        conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")
