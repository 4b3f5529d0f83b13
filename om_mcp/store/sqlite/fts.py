"""The full-text index of messages: a contentless FTS5 table over `messages.body`.

Why this shape:
- Text is stored once, in `messages.body`. The FTS5 table is contentless
  (`content=''`): it keeps only the inverted index, and `detail=none` with
  `columnsize=0` keeps only which rows hold a word (no positions, no sizes),
  the smallest index FTS5 can build (about 0.25x the text). FTS5's bm25()
  needs positions, so candidates are chosen by the sum of their query words'
  weights (IDF x form weight) in SQL; the candidates' text is then read from
  `messages` and scored in Python (engine/search/rank.py, BM25F), which also
  gives each message the words of the two before it, so a reply is found by
  the question it answers, without indexing any text twice.
- Exact words (unicode61, no stemmer): the query side adds inflections and
  related terms with lower weights, so "use" never matches "us".
- Each row also holds one scope token for its resource, so a resource's
  search is an FTS5 intersection, not a join over every match.
- Deleted means gone: a contentless row is removed with the FTS5 'delete'
  command and the values it was indexed with, which `messages` still holds
  when `forget_*` runs; `purge` then merges the segments so no deleted word
  survives in the index, with `secure_delete` zeroing the freed pages.

Plain synchronous functions over a `sqlite3.Connection`; they never BEGIN or
COMMIT: the store runs them inside its own transactions.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from typing import Iterable, Sequence

TABLE = "messages_fts"
VOCAB = "messages_fts_vocab"
CONTEXT = 2  # earlier messages fetched with each hit (the reply's question), and later ones (its answer)

SCHEMA: list[str] = [
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5("
    "body, content='', detail=none, columnsize=0, tokenize='unicode61 remove_diacritics 2')",
    # Document frequencies of words: which query forms exist and how rare they are.
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {VOCAB} USING fts5vocab({TABLE}, 'row')",
]

_CHUNK = 500  # host parameters per statement (SQLite allows 32766; keep statements small)


@dataclass(frozen=True)
class Hit:
    """A message the search fetched: a match (score > 0) or the context around one (score 0)."""

    seq: int
    score: float  # candidate score of the message's own words (> 0); 0 when fetched only as context
    thread_id: str
    role: str
    created_at: str
    body: str
    metadata: str | None  # JSON text as stored (the speaker, when named, is also the body's "Name: " prefix)


@dataclass(frozen=True)
class Stats:
    """What IDF and length normalisation need, read from the index itself."""

    rows: int  # messages in the index
    avg_words: float  # average words per message
    df: dict[str, int]  # document frequency of each asked form that exists


def scope_token(resource_id: str) -> str:
    """One index word per resource: a private-use letter no text or query
    contains, then a hash (unicode61 keeps private-use characters in a word)."""
    return "\ue000" + hashlib.blake2b(resource_id.encode(), digest_size=8).hexdigest()


def _indexed(resource_id: str, body: str) -> str:
    return f"{scope_token(resource_id)} {body}"


def _rows(conn: sqlite3.Connection, where: str, params: Sequence) -> list[tuple[int, str, str]]:
    return conn.execute(f"SELECT seq, resource_id, body FROM messages WHERE {where}", params).fetchall()


def _chunks(values: list, size: int = _CHUNK) -> Iterable[list]:
    for i in range(0, len(values), size):
        yield values[i:i + size]


def index_messages(conn: sqlite3.Connection, seqs: Iterable[int]) -> int:
    """Index messages already inserted into `messages` (same transaction).

    The indexed value is read back from the stored row, so it is exactly what
    `forget_*` will later hand to FTS5 'delete'. Returns how many were indexed.
    """
    done = 0
    for chunk in _chunks([int(s) for s in seqs]):
        rows = _rows(conn, f"seq IN ({','.join('?' * len(chunk))})", chunk)
        conn.executemany(
            f"INSERT INTO {TABLE} (rowid, body) VALUES (?, ?)",
            [(seq, _indexed(resource, body)) for seq, resource, body in rows],
        )
        done += len(rows)
    return done


def _forget(conn: sqlite3.Connection, rows: list[tuple[int, str, str]]) -> int:
    conn.executemany(
        f"INSERT INTO {TABLE} ({TABLE}, rowid, body) VALUES ('delete', ?, ?)",
        [(seq, _indexed(resource, body)) for seq, resource, body in rows],
    )
    return len(rows)


def forget_thread(conn: sqlite3.Connection, thread_id: str) -> int:
    """Remove a thread's messages from the index; call before deleting its rows."""
    return _forget(conn, _rows(conn, "thread_id = ?", (thread_id,)))


def forget_resource(conn: sqlite3.Connection, resource_id: str) -> int:
    """Remove a resource's messages from the index; call before deleting its rows."""
    return _forget(conn, _rows(conn, "resource_id = ?", (resource_id,)))


def forget_messages(conn: sqlite3.Connection, seqs: Iterable[int]) -> int:
    """Remove messages from the index; call before deleting their rows."""
    done = 0
    for chunk in _chunks([int(s) for s in seqs]):
        done += _forget(conn, _rows(conn, f"seq IN ({','.join('?' * len(chunk))})", chunk))
    return done


def purge(conn: sqlite3.Connection) -> None:
    """Make forgotten words unrecoverable from the database file.

    FTS5 'delete' only records a tombstone; the word stays in the old segment
    until it is rewritten. 'optimize' merges every segment into one without
    the deleted rows; secure_delete zeroes the pages this frees. The caller
    must then checkpoint the WAL (`PRAGMA wal_checkpoint(TRUNCATE)`, outside
    the transaction), or old page images survive in the -wal file. The store
    should also open every connection with `PRAGMA secure_delete = ON`, so the
    deleted `messages` rows are zeroed too. Cost: a rewrite of the whole index.
    """
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute(f"INSERT INTO {TABLE} ({TABLE}) VALUES ('optimize')")


def rebuild(conn: sqlite3.Connection) -> int:
    """Re-create the index from `messages` (after a schema change or damage)."""
    conn.execute(f"INSERT INTO {TABLE} ({TABLE}) VALUES ('delete-all')")
    seqs = [r[0] for r in conn.execute("SELECT seq FROM messages ORDER BY seq")]
    return index_messages(conn, seqs)


def _varints(blob: bytes) -> list[int]:
    """SQLite varints: big-endian 7-bit groups, high bit set on all but the
    last byte; a ninth byte, when reached, carries 8 bits."""
    values, i = [], 0
    while i < len(blob):
        value = 0
        for n in range(9):
            byte = blob[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
    return values


def term_stats(conn: sqlite3.Connection, forms: Sequence[str]) -> Stats:
    """Document frequencies of `forms` (absent ones left out), the row count and average length."""
    # The averages record (rowid 1 of the %_data table): varint row count, then the
    # token total of each column. FTS5 keeps it current on every insert and delete.
    row = conn.execute(f"SELECT block FROM {TABLE}_data WHERE id = 1").fetchone()
    totals = _varints(row[0]) if row and row[0] else [0, 0]
    rows = totals[0] if totals else 0
    words = (totals[1] - rows) if len(totals) > 1 else 0  # less the scope token of each row
    df: dict[str, int] = {}
    for chunk in _chunks(list(dict.fromkeys(forms))):
        df.update(conn.execute(
            f"SELECT term, doc FROM {VOCAB} WHERE term IN ({','.join('?' * len(chunk))})", chunk
        ).fetchall())
    return Stats(rows, words / rows if rows else 0.0, df)


def search(
    conn: sqlite3.Connection, resource_id: str, match: Sequence[tuple[str, float]], *, thread_id: str | None = None,
    limit: int = 150, context: int = CONTEXT,
) -> list[Hit]:
    """The `limit` best matches in a resource (or one of its threads), and up
    to `context` non-empty messages before and after each in its thread, in
    one statement.

    `match` holds one (MATCH expression, weight) per query word, its words
    already quoted (engine/search/query.py); a message's candidate score is
    the sum of the weights of the expressions it matches. Empty finds nothing.
    """
    match = [(m, w) for m, w in match if m]
    if not match:
        return []
    scope = f'"{scope_token(resource_id)}"'
    in_thread = " AND rowid IN (SELECT seq FROM messages WHERE thread_id = :thread)" if thread_id is not None else ""
    terms = " UNION ALL ".join(
        f"SELECT rowid AS seq, :w{i} AS w FROM {TABLE} WHERE {TABLE} MATCH :m{i}{in_thread}" for i in range(len(match))
    )
    around = "".join(
        f" UNION SELECT (SELECT seq FROM messages WHERE thread_id = h.thread_id AND seq {op} h.seq AND body != ''"
        f" ORDER BY seq {order} LIMIT 1 OFFSET {k}) FROM placed h"
        for k in range(context) for op, order in (("<", "DESC"), (">", "ASC"))
    )
    sql = f"""
        WITH hits(seq, score) AS MATERIALIZED (
            SELECT seq, SUM(w) FROM ({terms}) GROUP BY seq ORDER BY 2 DESC, seq DESC LIMIT :limit
        ),
        placed AS MATERIALIZED (SELECT m.seq, m.thread_id FROM hits CROSS JOIN messages m ON m.seq = hits.seq),
        fetched(seq) AS (SELECT seq FROM placed{around})
        SELECT m.seq, COALESCE(hits.score, 0.0), m.thread_id, m.role, m.created_at, m.body, m.metadata
        FROM fetched CROSS JOIN messages m ON m.seq = fetched.seq LEFT JOIN hits ON hits.seq = m.seq
        ORDER BY m.seq"""
    params: dict = {"thread": thread_id, "limit": limit}
    for i, (expression, weight) in enumerate(match):
        params[f"m{i}"] = f"{scope} AND ({expression})"
        params[f"w{i}"] = weight
    return [Hit(*row) for row in conn.execute(sql, params).fetchall()]
