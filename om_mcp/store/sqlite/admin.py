"""Looking after the file: sizes and counts, a full integrity check, backups."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from om_mcp.store import overview
from om_mcp.store.rows import Stats
from om_mcp.store.sqlite.driver import run


def stats(conn: sqlite3.Connection, path: str) -> Stats:
    size = os.path.getsize(path) if path != ":memory:" and os.path.exists(path) else 0
    wal = Path(path + "-wal")
    return run(
        conn,
        overview.stats,
        path=path,
        bytes=size,
        wal_bytes=wal.stat().st_size if wal.exists() else 0,
        schema_version=conn.execute("PRAGMA user_version").fetchone()[0],
    )


def integrity(conn: sqlite3.Connection) -> list[str]:
    """SQLite's full check (every page, every index entry) plus ours: the search indexes
    sound and holding every message once, running totals right."""
    problems: list[str] = []
    try:
        problems += [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall() if r[0] != "ok"]
        for table in ("messages_fts", "om_groups_fts"):
            conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 0)")
    except sqlite3.OperationalError as error:
        if "readonly" not in str(error):  # opened read-only: FTS5 checks itself through an INSERT
            problems.append(str(error))
            return problems
    except sqlite3.DatabaseError as error:
        problems.append(str(error))
        return problems
    # The index keeps no row list to scan (contentless, detail=none); its per-resource counts move with it.
    stored = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    counted = conn.execute("SELECT COALESCE(SUM(messages), 0) FROM messages_fts_scopes").fetchone()[0]
    if stored != counted:
        problems.append(f"the search index holds {counted} messages of {stored}")
    drift = conn.execute(
        "SELECT COUNT(*) FROM om_cursors c WHERE c.pending_tokens != (SELECT COALESCE(SUM(m.tokens), 0)"
        " FROM messages m WHERE m.thread_id = c.thread_id AND m.seq > c.seq AND m.seq <= c.counted_seq"
        " AND m.observable)"
    ).fetchone()[0]
    if drift:
        problems.append(f"{drift} unobserved-token totals disagree with their messages")
    return problems


def checkpoint(conn: sqlite3.Connection, wait_ms: int | None = None) -> bool:
    """Fold the WAL into the file and truncate it, so deleted text leaves the file and the -wal; False
    when another connection's read snapshot kept it from finishing (the old pages are still there).
    SQLite waits for readers up to the busy timeout (`wait_ms` instead, when given)."""
    if wait_ms is not None:
        before = conn.execute("PRAGMA busy_timeout").fetchone()[0]
        conn.execute(f"PRAGMA busy_timeout = {int(wait_ms)}")
    try:
        busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.OperationalError as error:
        if "locked" not in str(error).lower() and "busy" not in str(error).lower():
            raise
        return False  # a writer held the file meanwhile: the next attempt folds it in
    finally:
        if wait_ms is not None:
            conn.execute(f"PRAGMA busy_timeout = {before}")
    return not busy


def backup(conn: sqlite3.Connection, target: str) -> int:
    """An online, consistent copy through SQLite's backup API; returns its size."""
    destination = sqlite3.connect(target)
    try:
        conn.backup(destination)
    finally:
        destination.close()
    return os.path.getsize(target)


# -- `om-mcp doctor` and `om-mcp backup` on a file opened directly (`store.local`) ---------------


def schema_version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def write_refusal(conn: sqlite3.Connection) -> str | None:
    """Why a write cannot start on the file now (another process holds it, the disk refuses),
    or None when one can; nothing is written."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except sqlite3.OperationalError as error:
        return str(error)
    return None


def snapshot_integrity(conn: sqlite3.Connection) -> list[str]:
    """`integrity` inside one read transaction: every check sees the same file."""
    conn.execute("BEGIN")
    try:
        return integrity(conn)
    finally:
        conn.execute("ROLLBACK")


def raw_integrity(path: str) -> list[str]:
    """SQLite's findings on a file the store refused (it may not even be SQLite), read-only."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = conn.execute("PRAGMA integrity_check(10)").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as error:
        return [f"SQLite cannot check it: {error}"]
    return [r[0] for r in rows if r[0] != "ok"]


def thread_and_message_counts(path: str | os.PathLike[str]) -> tuple[int, int]:
    """What a copy holds (threads, messages), read from the copy itself."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT COUNT(*), COALESCE(SUM(message_count), 0) FROM threads").fetchone()
    finally:
        conn.close()
