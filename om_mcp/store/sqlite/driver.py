"""SQLite's side of `store.tx.Tx`: the shared rules on a `sqlite3.Connection`.

Every method runs its statement at once, so an operation's coroutine never
suspends and `run_sync` drives it whole, on the store's write thread or in the
hook's process. The rules' statements are written in PostgreSQL's dialect;
`translate` rewrites the few spellings SQLite does not share, once per statement:

* `$n` placeholders become `?n` (SQLite's numbered placeholders);
* `x = ANY ($n::text[])` becomes `x IN (SELECT value FROM json_each(?n))`, the
  list arriving as JSON text;
* `GREATEST`/`LEAST` of two values become SQLite's two-argument `MAX`/`MIN`;
* row locks (`FOR UPDATE`, `FOR SHARE`, `SKIP LOCKED`) go: SQLite's one writer
  (BEGIN IMMEDIATE) already holds the whole database;
* casts (`::bigint`) go: SQLite's columns carry their values' types.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from array import array
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from functools import lru_cache
from typing import Any, Concatenate, ParamSpec, TypeVar

from om_mcp.store.decode import dumps, stored_parts
from om_mcp.store.gate import Gate
from om_mcp.store.rows import NewMessage
from om_mcp.store.sqlite import fts
from om_mcp.store.tx import Row, Tx, iterate_sync, run_sync

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

_ANY = re.compile(r"= ANY ?\(\$(\d+)(?:::\w+\[\])?\)")
_LOCK = re.compile(r" FOR (?:UPDATE|SHARE)(?: OF \w+)?(?: SKIP LOCKED)?")
_CAST = re.compile(r"::\w+(?:\[\])?")
_PLACEHOLDER = re.compile(r"\$(\d+)")

DUE = (
    "SELECT r.key, r.resource_id, COALESCE(r.thread_id, (SELECT c2.thread_id FROM om_cursors c2"
    "  WHERE c2.record_key = r.key ORDER BY c2.pending_tokens DESC LIMIT 1)),"
    " (SELECT COALESCE(SUM(c.pending_tokens), 0) FROM om_cursors c WHERE c.record_key = r.key) AS pending"
    " FROM om_records r WHERE pending >= ? OR r.observation_tokens >= ?"
)


INSERT_MESSAGE = (
    "INSERT INTO messages (id, thread_id, resource_id, role, body, parts, created_at, metadata, tokens,"
    " part_tokens, counted_by, observable) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


@lru_cache(maxsize=2048)
def translate(sql: str) -> str:
    """A statement of the shared rules in SQLite's dialect (see the module docstring)."""
    sql = _ANY.sub(r"IN (SELECT value FROM json_each($\1))", sql)
    sql = _LOCK.sub("", sql)
    sql = _CAST.sub("", sql)
    sql = sql.replace("GREATEST(", "MAX(").replace("LEAST(", "MIN(")
    return _PLACEHOLDER.sub(r"?\1", sql)


def _params(args: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(json.dumps(a) if isinstance(a, list | tuple) else a for a in args)


class SQLiteTx(Tx):
    backend = "sqlite"

    def __init__(self, conn: sqlite3.Connection, gate: Gate | None = None):
        self.conn = conn
        self.gate = gate

    async def _fetch(self, sql: str, *args: Any) -> list[Row]:
        return self.conn.execute(translate(sql), _params(args)).fetchall()

    async def _fetchrow(self, sql: str, *args: Any) -> Row | None:
        return self.conn.execute(translate(sql), _params(args)).fetchone()

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        row = self.conn.execute(translate(sql), _params(args)).fetchone()
        return row[0] if row else None

    async def _execute(self, sql: str, *args: Any) -> int:
        return self.conn.execute(translate(sql), _params(args)).rowcount

    async def _executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(translate(sql), [_params(r) for r in rows])

    async def _scan(self, sql: str, *args: Any, until: Callable[[Row], bool]) -> None:
        cursor = self.conn.execute(translate(sql), _params(args))
        try:
            for row in cursor:  # stepped lazily: SQLite reads no further than asked
                if until(row):
                    return
        finally:
            cursor.close()

    async def epoch(self) -> float:
        # The processes on one file share its machine, and so its clock.
        return time.time()

    async def lock_key(self, key: str) -> None:
        """A write transaction already holds the file's write lock (BEGIN IMMEDIATE)."""

    async def _insert_messages(
        self, thread_id: str, resource_id: str, counted_by: int, fresh: list[NewMessage]
    ) -> list[int]:
        conn = self.conn
        rows = [
            (
                m.id,
                thread_id,
                resource_id,
                m.role,
                m.body,
                stored_parts(m.parts, m.body),
                m.created_at,
                dumps(m.metadata) if m.metadata else None,
                m.tokens,
                dumps(m.part_tokens) if m.part_tokens and len(m.part_tokens) > 1 else None,
                counted_by,
                int(m.observable),
            )
            for m in fresh
        ]
        if len(rows) == 1:  # the common append: its seq from the insert itself
            seqs = [int(conn.execute(INSERT_MESSAGE, rows[0]).lastrowid or 0)]
        else:
            base = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
            base = base[0] if base else 0
            conn.executemany(INSERT_MESSAGE, rows)
            # One writer: the rows took the next seqs, unless an earlier batch's seqs were deleted and reused.
            seqs = list(range(base + 1, base + len(fresh) + 1))
            if conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()[0] != seqs[-1]:
                seqs = [
                    conn.execute(
                        "SELECT seq FROM messages WHERE thread_id = ? AND id = ?", (thread_id, m.id)
                    ).fetchone()[0]
                    for m in fresh
                ]
        fts.index_rows(conn, [(seq, resource_id, m.body) for seq, m in zip(seqs, fresh)])
        return seqs

    async def _index_groups(self, key: str, groups: list[tuple[str, str]]) -> None:
        self.conn.executemany(
            "INSERT INTO om_groups_fts (group_id, record_key, text) VALUES (?, ?, ?)",
            [(gid, key, text) for gid, text in groups],
        )

    async def forget_index(self, thread_ids: list[str], group_ids: list[str]) -> None:
        for thread_id in thread_ids:
            fts.forget_thread(self.conn, thread_id)
        self.conn.execute(
            "DELETE FROM om_groups_fts WHERE group_id IN (SELECT value FROM json_each(?))", (json.dumps(group_ids),)
        )

    async def unindex_messages(self, thread_id: str, seqs: list[int]) -> list[int]:
        fts.forget_messages(self.conn, seqs)
        return []  # an entry holds its own message's words only

    async def reindex_messages(self, thread_id: str, seqs: list[int]) -> None:
        fts.index_messages(self.conn, seqs)

    async def purge(self, resource_id: str | None = None) -> None:
        # Rewrite both search indexes, so the deleted rows' words leave the file (secure_delete zeroes the pages).
        fts.purge(self.conn)
        self.conn.execute("INSERT INTO om_groups_fts (om_groups_fts) VALUES ('optimize')")

    async def next_event_ids(self, count: int) -> int | None:
        return None  # AUTOINCREMENT, and one writer: ids in commit order

    async def due_rows(self, min_pending: int, min_observation_tokens: int) -> list[Row]:
        return self.conn.execute(DUE, (min_pending, min_observation_tokens)).fetchall()

    def json_field(self, column: str, name: str) -> str:
        return f"json_extract({column}, '$.{name}')"

    async def rank_vectors(
        self, where: str, args: list[Any], query: list[float], limit: int | None
    ) -> list[Row] | None:
        return None

    def vector(self, values: list[float]) -> Any:
        return array("f", values).tobytes()

    folds_exactly = True  # om_casefold is store/scrub.py's fold, registered by database.py

    def contains(self, column: str, text: str) -> str:
        return f"instr(om_casefold({column}), {text}) > 0"

    def json_elements(self, column: str) -> str:
        return f"json_each({column})"

    async def stream(self, consume: Callable[[Iterator[T]], Any], items: AsyncIterator[T]) -> Any:
        return consume(iterate_sync(items))


def on_connection(
    op: Callable[Concatenate[Tx, P], Coroutine[Any, Any, R]], gate: Gate | None = None
) -> Callable[Concatenate[sqlite3.Connection, P], R]:
    """A shared operation as a plain function of a connection (what `Database.read`/`write` run);
    `gate`: the store's (its privacy settings), else the built-in rules."""

    def on(conn: sqlite3.Connection, *args: P.args, **kwargs: P.kwargs) -> R:
        return run_sync(op(SQLiteTx(conn, gate), *args, **kwargs))

    on.__name__, on.__doc__ = op.__name__, op.__doc__
    return on


def run(
    conn: sqlite3.Connection,
    op: Callable[Concatenate[Tx, P], Coroutine[Any, Any, R]],
    *args: P.args,
    **kwargs: P.kwargs,
) -> R:
    """A shared operation, synchronously, in the caller's transaction on `conn` (the hook's way in)."""
    return run_sync(op(SQLiteTx(conn), *args, **kwargs))
