"""The full-text index over messages: contentless FTS5, so the text is stored once.

Each message is indexed with the two messages before it in its thread (columns
body, prev1, prev2, weighted lower), so an answer is found by the words of the
question it answers. The index keeps no copy of the text: `messages.body` is the
one copy, and the `prev` values are derived again from it when an entry must be
deleted (messages are immutable and only leave with their whole thread, so the
derivation is exact).

Deleted means gone: FTS5 keeps a deleted entry's tokens in old segments until
they are merged, so `purge` optimizes the index after a deletion; with
`secure_delete` on, the freed pages are zeroed.

Every function runs inside the caller's transaction.
"""

from __future__ import annotations

import sqlite3
from typing import Iterable

from om_mcp.store.rows import Hit

TOKENIZER = "porter unicode61 remove_diacritics 2"
COLUMN_WEIGHTS = (1.0, 0.5, 0.4)  # the message, the one before it, the one before that

SCHEMA = [
    f"CREATE VIRTUAL TABLE messages_fts USING fts5(body, prev1, prev2, content = '', tokenize = '{TOKENIZER}')",
]


def _previous(conn: sqlite3.Connection, thread_id: str, before_seq: int) -> list[str]:
    rows = conn.execute(
        "SELECT body FROM messages WHERE thread_id = ? AND seq < ? AND body != '' ORDER BY seq DESC LIMIT 2",
        (thread_id, before_seq),
    ).fetchall()
    return [r[0] for r in rows] + [""] * (2 - len(rows))


def _entries(bodies: Iterable[tuple[int, str]], previous: list[str]) -> list[tuple[int, str, str, str]]:
    out = []
    prev1, prev2 = previous
    for seq, body in bodies:
        if not body:
            continue
        out.append((seq, body, prev1, prev2))
        prev1, prev2 = body, prev1
    return out


def index_messages(conn: sqlite3.Connection, thread_id: str, rows: list[tuple[int, str]]) -> None:
    """Index new messages of one thread: (seq, body), oldest first."""
    if not rows:
        return
    entries = _entries(rows, _previous(conn, thread_id, rows[0][0]))
    conn.executemany("INSERT INTO messages_fts (rowid, body, prev1, prev2) VALUES (?, ?, ?, ?)", entries)


def forget_thread(conn: sqlite3.Connection, thread_id: str) -> None:
    """Remove a thread's entries; call before its rows are deleted."""
    bodies = conn.execute("SELECT seq, body FROM messages WHERE thread_id = ? ORDER BY seq", (thread_id,))
    conn.executemany(
        "INSERT INTO messages_fts (messages_fts, rowid, body, prev1, prev2) VALUES ('delete', ?, ?, ?, ?)",
        _entries(bodies, ["", ""]),
    )


def purge(conn: sqlite3.Connection) -> None:
    """Rewrite the indexes so deleted entries' tokens leave the file."""
    conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')")
    conn.execute("INSERT INTO om_groups_fts (om_groups_fts) VALUES ('optimize')")


def rebuild(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('delete-all')")
    threads = [r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM messages")]
    for thread_id in threads:
        bodies = conn.execute("SELECT seq, body FROM messages WHERE thread_id = ? ORDER BY seq", (thread_id,))
        conn.executemany(
            "INSERT INTO messages_fts (rowid, body, prev1, prev2) VALUES (?, ?, ?, ?)", _entries(bodies, ["", ""])
        )


def search(
    conn: sqlite3.Connection, resource_id: str, match: str, *, thread_id: str | None = None, limit: int = 20
) -> list[Hit]:
    """BM25-ranked message seqs for an FTS5 MATCH expression (already escaped)."""
    if not match:
        return []
    where, params = "messages_fts MATCH ? AND m.resource_id = ?", [match, resource_id]
    if thread_id is not None:
        where += " AND m.thread_id = ?"
        params.append(thread_id)
    weights = ", ".join(str(w) for w in COLUMN_WEIGHTS)
    rows = conn.execute(
        f"SELECT m.seq, bm25(messages_fts, {weights}) AS rank FROM messages_fts"
        f" JOIN messages m ON m.seq = messages_fts.rowid WHERE {where} ORDER BY rank LIMIT ?",
        (*params, limit),
    ).fetchall()
    return [Hit(seq, -float(rank)) for seq, rank in rows]
