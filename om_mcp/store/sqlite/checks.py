"""Is this file ours, and can we use it? Asked once, before the server answers anyone.

A bad path used to surface as a 72-line traceback at the client's first request.
Now each problem is refused at start with one line that says what to do:
a directory, an unwritable place, a file that is not SQLite (garbage, truncated),
another application's database, a schema newer than this version, a damaged file.
"""

from __future__ import annotations

import os
import sqlite3
import weakref
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlsplit

from om_mcp.store.errors import DatabaseRefused
from om_mcp.store.migrations import APPLICATION_ID, LATEST_VERSION

SQLITE_MAGIC = b"SQLite format 3\x00"
# Tables every om-mcp database has had since schema 1: a file with them and no
# application id was made before the id existed, and is adopted.
OUR_TABLES = {"threads", "messages", "resources"}
# quick_check reads every page; past this size it would hold up start-up, so
# only the schema's own tables are checked then (doctor runs the full check).
FULL_CHECK_MAX_BYTES = 256 * 1024 * 1024

# POSIX locks belong to the process, not to a descriptor: closing *any* descriptor of the database
# file drops every lock this process's SQLite connections hold on it, WAL's shared lock among them
# (another process closing its connection then thinks itself the last one, checkpoints and deletes
# the -wal under us). SQLite's own descriptors are safe, it defers their close; ours is the header
# read below, so it is made only while no connection of this process has the file open.
_open_here: Counter[str] = Counter()


class Connection(sqlite3.Connection):
    """A connection the header checks know about: `sqlite3.connect(..., factory=Connection)`."""

    def __init__(self, database: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
        super().__init__(database, *args, **kwargs)  # type: ignore[arg-type]
        key = _file_of(database)
        self._release = weakref.finalize(self, _open_here.subtract, [key] if key else [])
        if key:
            _open_here[key] += 1

    def close(self) -> None:
        super().close()
        self._release()


def _file_of(database: str | os.PathLike[str]) -> str | None:
    """The real path of the file a connection opens (a path or a `file:` URI), None for memory."""
    name = os.fspath(database)
    if name.startswith("file:"):
        name = unquote(urlsplit(name).path)
    return os.path.realpath(name) if name and name != ":memory:" else None


def before_open(path: Path, *, writable: bool = True) -> None:
    """Checks that need no SQLite: the path itself (`writable=False`: opened read-only)."""
    if path.is_dir():
        raise DatabaseRefused(f"{path} is a directory: give the database file's path, e.g. {path / 'memory.db'}")
    if not writable:
        _header_checks(path)
        return
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DatabaseRefused(
            f"cannot create the folder {folder}: {error.strerror}; choose another --db path"
        ) from None
    # WAL mode writes -wal and -shm files beside the database, so the folder must be writable too.
    if not os.access(folder, os.W_OK | os.X_OK):
        raise DatabaseRefused(f"the folder {folder} is not writable: fix its permissions or choose another --db path")
    if not path.exists():
        return
    if not os.access(path, os.R_OK | os.W_OK):
        raise DatabaseRefused(f"{path} is not readable and writable by this user: fix its permissions")
    _header_checks(path)


def _header_checks(path: Path) -> None:
    size = path.stat().st_size
    if size == 0 or _open_here[os.path.realpath(path)] > 0:
        return  # checked when this process first opened it; reading it again would drop its locks
    with path.open("rb") as handle:
        header = handle.read(100)
    if not header.startswith(SQLITE_MAGIC):
        raise DatabaseRefused(f"{path} is not a SQLite database: move it aside or choose another --db path")
    if len(header) == 100:
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        # The in-header page count is valid when the two change counters agree.
        if header[24:28] == header[92:96] and page_size and size < pages * page_size:
            raise DatabaseRefused(
                f"{path} is truncated ({size} of {pages * page_size} bytes): restore a backup or move it aside"
            )


def after_open(conn: sqlite3.Connection, path: str) -> None:
    """Checks that need the file open: ownership, schema version, integrity."""
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as error:
        raise DatabaseRefused(f"{path} cannot be read as a database ({error}): move it aside") from None
    if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables and not OUR_TABLES <= tables):
        raise DatabaseRefused(f"{path} belongs to another application: choose another --db path for om-mcp")
    if version > LATEST_VERSION:
        raise DatabaseRefused(
            f"{path} was written by a newer om-mcp (schema {version}; this version knows up to {LATEST_VERSION}):"
            " upgrade om-mcp"
        )
    if not tables:
        return
    problems = integrity(conn, full=path == ":memory:" or Path(path).stat().st_size <= FULL_CHECK_MAX_BYTES)
    if problems:
        raise DatabaseRefused(
            f"{path} is damaged ({problems[0]}): restore a backup or move it aside (om-mcp doctor tells more)"
        )


def integrity(conn: sqlite3.Connection, *, full: bool) -> list[str]:
    """Problems found by SQLite's own check; empty when the file is sound."""
    try:
        if full:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        else:
            rows = [r for table in ("threads", "om_records") for r in conn.execute(f"PRAGMA quick_check({table})")]
    except sqlite3.DatabaseError as error:
        return [str(error)]
    return [r[0] for r in rows if r[0] != "ok"]
