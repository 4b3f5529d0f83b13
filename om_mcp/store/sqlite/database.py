"""One SQLite connection per process, and the thread its work runs on.

Every store operation is a plain function of a `sqlite3.Connection` that runs
whole, in one transaction, in one trip to a worker thread: the event loop hands
it over once and gets the result back once, however many statements it runs.
A capacity limiter of one keeps operations from interleaving on the connection.
The same functions run directly (no event loop) in the short-lived hook process.

Several processes may open the same file (Claude Desktop and an IDE on one
database is the normal case): WAL lets readers and one writer work at once,
`busy_timeout` makes SQLite wait for a lock instead of failing, and every write
starts with BEGIN IMMEDIATE so two writers queue up front rather than deadlock
on a lock upgrade. A retry loop covers the rare "database is locked" that still
escapes (for example while another process checkpoints).

A database on a read-only filesystem (a mounted backup, a read-only container
volume) is opened read-only, so reading it (`status`, `search`, `export`, ...)
works; a write then fails with a message saying the file is read-only.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import quote

import anyio

from om_mcp.store.errors import DatabaseRefused, StoreUnavailable
from om_mcp.store.migrations import LATEST_VERSION, MIGRATIONS
from om_mcp.store.scrub import fold
from om_mcp.store.sqlite import checks
from om_mcp.store.sqlite.migrations import migrate

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000
LOCKED_RETRY_SECONDS = 30.0

P = ParamSpec("P")
R = TypeVar("R")
Op = Callable[Concatenate[sqlite3.Connection, P], R]


def connect(path: str | Path, *, check: bool = True) -> sqlite3.Connection:
    """Open (creating if needed), check and migrate the database; refuse what is not ours."""
    path = str(path)
    if path != ":memory:" and Path(path).is_file() and on_read_only_filesystem(Path(path)):
        return _connect_read_only(Path(path), check)
    if check and path != ":memory:":
        checks.before_open(Path(path))
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000, factory=checks.Connection
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if check:
            checks.after_open(conn, path)
        _retry_locked(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        conn.execute("PRAGMA synchronous = NORMAL")
        # Freed pages are zeroed, so deleted text does not linger in the file.
        conn.execute("PRAGMA secure_delete = ON")
        # lower() knows only ASCII; forgetting a phrase must ignore case and Unicode normalisation in any
        # script (store/scrub.py `fold`, `Tx.contains`).
        conn.create_function("om_casefold", 1, _casefold, deterministic=True)
        write(conn, migrate, [m.sqlite for m in MIGRATIONS])
    except BaseException:
        conn.close()
        raise
    return conn


def on_read_only_filesystem(path: Path) -> bool:
    try:
        return bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except (AttributeError, OSError):  # no statvfs (Windows): treated as writable
        return False


def _connect_read_only(path: Path, check: bool) -> sqlite3.Connection:
    """Open a database whose filesystem takes no writes: read-only, no migration."""
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    if not shm.exists():
        if wal.exists() and wal.stat().st_size:
            raise DatabaseRefused(
                f"{path} is on a read-only filesystem with changes still in {wal.name}, which SQLite cannot read"
                " without writing: copy the database with its -wal file to a writable place and open the copy"
            )
        uri += "&immutable=1"  # nothing can change it: no locks, no shared-memory file needed
    if check:
        checks.before_open(path, writable=False)
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, factory=checks.Connection)
    try:
        conn.create_function("om_casefold", 1, _casefold, deterministic=True)
        if check:
            checks.after_open(conn, str(path))
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version < LATEST_VERSION:
            raise DatabaseRefused(
                f"{path} needs an upgrade to schema {LATEST_VERSION} (it has {version}), which a read-only"
                " filesystem cannot take: open it once where it can be written"
            )
    except BaseException:
        conn.close()
        raise
    log.info("%s is on a read-only filesystem: opened read-only", path)
    return conn


def _casefold(value: str | None) -> str | None:
    return fold(value) if isinstance(value, str) else value


def write(conn: sqlite3.Connection, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run `op` in a write transaction (BEGIN IMMEDIATE ... COMMIT), rolled back on error."""
    _retry_locked(lambda: conn.execute("BEGIN IMMEDIATE"))
    try:
        result = op(conn, *args, **kwargs)
    except BaseException:
        # SQLite rolls back by itself after some errors (a full disk, an I/O error); a
        # second ROLLBACK would fail and hide the error that matters.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    try:
        _retry_locked(lambda: conn.execute("COMMIT"))
    except sqlite3.Error:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


def read(conn: sqlite3.Connection, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run `op` in a read transaction: all its statements see one snapshot."""
    conn.execute("BEGIN")
    try:
        return op(conn, *args, **kwargs)
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


class Database:
    """The connection and the thread its operations run on."""

    def __init__(self, conn: sqlite3.Connection, path: str):
        self.conn = conn
        self.path = path
        self._limiter = anyio.CapacityLimiter(1)

    @classmethod
    async def open(cls, path: str | Path) -> Database:
        conn = await anyio.to_thread.run_sync(connect, path)
        return cls(conn, str(path))

    async def write(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._run(write, op, *args, **kwargs)

    async def read(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._run(read, op, *args, **kwargs)

    async def raw(self, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run `op` with no transaction around it (checkpoints, VACUUM, backups)."""
        return await self._run(_direct, op, *args, **kwargs)

    async def _run(self, runner: Callable[..., R], op: Callable[..., Any], *args: Any, **kwargs: Any) -> R:
        def job() -> R:
            try:
                return runner(self.conn, op, *args, **kwargs)
            except sqlite3.OperationalError as error:
                unavailable = _unavailable(error)
                if unavailable is None:
                    raise
                raise unavailable from error

        # Not abandoned on cancel: a transaction always finishes or rolls back.
        return await anyio.to_thread.run_sync(job, limiter=self._limiter)

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self.conn.close, limiter=self._limiter)


def _direct(conn: sqlite3.Connection, op: Op[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    return op(conn, *args, **kwargs)


def _unavailable(error: sqlite3.OperationalError) -> StoreUnavailable | None:
    """A write the file cannot take, said plainly instead of SQLite's terse text."""
    text = str(error).lower()
    if "readonly" in text or "read-only" in text:
        return StoreUnavailable(
            "the database file is read-only: check its permissions (and its folder's), or its filesystem's mount"
        )
    if "disk is full" in text or "database or disk is full" in text:
        return StoreUnavailable("the disk holding the database is full: free some space, nothing was written")
    if "disk i/o error" in text:
        # What a write gets when the file or its filesystem turned read-only under an open connection.
        return StoreUnavailable(
            "the database file cannot be written (disk I/O error): check that its disk is"
            " healthy, not full and not read-only, and the file's permissions; nothing was written"
        )
    return None


def _is_locked(error: sqlite3.OperationalError) -> bool:
    text = str(error).lower()
    return "locked" in text or "busy" in text


def _retry_locked(operation: Callable[[], R]) -> R:
    deadline = time.monotonic() + LOCKED_RETRY_SECONDS
    delay = 0.02
    while True:
        try:
            return operation()
        except sqlite3.OperationalError as error:
            if not _is_locked(error) or time.monotonic() > deadline:
                raise
            log.debug("database busy, retrying: %s", error)
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 0.5)
