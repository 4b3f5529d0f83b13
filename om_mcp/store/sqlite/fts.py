"""The full-text index of messages: a contentless FTS5 table over `messages.body`.

Why this shape:
- Text is stored once, in `messages.body`. The FTS5 table is contentless
  (`content=''`): it keeps only the inverted index, and `detail=none` with
  `columnsize=0` keeps only which rows hold a word (no positions, no sizes),
  the smallest index FTS5 can build (about 0.25x the text). FTS5's bm25()
  needs positions, so candidates are chosen by the sum of their query words'
  weights (IDF x form weight) in SQL; the candidates' text is then read from
  `messages` and scored in Python (om_mcp.engine.search, BM25F), which also
  gives each message the words of the two before it, so a reply is found by
  the question it answers, without indexing any text twice.
- Exact words (unicode61, no stemmer): the query side adds inflections and
  related terms with lower weights, so "use" never matches "us".
- Each row also holds one scope token for its resource, so a resource's
  search is an FTS5 intersection, not a join over every match. A resource
  holding most of the index skips it (the intersection would cost more than
  the rows it removes) and other resources' rows are dropped after ranking;
  `messages_fts_scopes` counts each resource's indexed messages for that.
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
from collections.abc import Iterable, Sequence
from datetime import UTC

from om_mcp.store.decode import GROUP_COLUMNS, group
from om_mcp.store.rows import GroupHit
from om_mcp.store.search import SearchPlan, TermStats, TextHit

TABLE = "messages_fts"
VOCAB = "messages_fts_vocab"
SCOPES = "messages_fts_scopes"
UNSCOPED_SHARE = 0.5  # a resource with at least this share of the messages skips its scope token
WINDOW_ROWS = 20_000  # widest date window searched on its own
CONTEXT = 2  # earlier messages fetched with each hit (the reply's question), and later ones (its answer)

SCHEMA: list[str] = [
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5("
    "body, content='', detail=none, columnsize=0, tokenize='unicode61 remove_diacritics 2')",
    # Document frequencies of words: which query forms exist and how rare they are.
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {VOCAB} USING fts5vocab({TABLE}, 'row')",
    # Indexed messages per resource: a resource holding most of the index is searched
    # without its scope token (intersecting with a doclist that long costs more than it saves).
    f"CREATE TABLE IF NOT EXISTS {SCOPES} (resource_id TEXT PRIMARY KEY, messages INTEGER NOT NULL) WITHOUT ROWID",
]

_MARK = "\ue000"
_CHUNK = 500  # host parameters per statement (SQLite allows 32766; keep statements small)


def scope_token(resource_id: str) -> str:
    """One index word per resource: a private-use letter no text or query
    contains, then a hash (unicode61 keeps private-use characters in a word)."""
    return _MARK + hashlib.blake2b(resource_id.encode(), digest_size=8).hexdigest()


def _indexed(resource_id: str, body: str) -> str:
    # The marker letter is taken out of the text, so no message can claim another resource's scope.
    return f"{scope_token(resource_id)} {body.replace(_MARK, ' ')}"


def _rows(conn: sqlite3.Connection, where: str, params: Sequence) -> list[tuple[int, str, str]]:
    return conn.execute(f"SELECT seq, resource_id, body FROM messages WHERE {where}", params).fetchall()


def _chunks(values: list, size: int = _CHUNK) -> Iterable[list]:
    for i in range(0, len(values), size):
        yield values[i : i + size]


def index_messages(conn: sqlite3.Connection, seqs: Iterable[int]) -> int:
    """Index messages already inserted into `messages` (same transaction).

    The indexed value is read back from the stored row, so it is exactly what
    `forget_*` will later hand to FTS5 'delete'. Returns how many were indexed.
    """
    done = 0
    for chunk in _chunks([int(s) for s in seqs]):
        done += index_rows(conn, _rows(conn, f"seq IN ({','.join('?' * len(chunk))})", chunk))
    return done


def index_rows(conn: sqlite3.Connection, rows: list[tuple[int, str, str]]) -> int:
    """Index messages inserted in this transaction from their (seq, resource, body) as inserted,
    which is what `forget_*` will hand to FTS5 'delete' (they read the stored rows)."""
    conn.executemany(
        f"INSERT INTO {TABLE} (rowid, body) VALUES (?, ?)",
        [(seq, _indexed(resource, body)) for seq, resource, body in rows],
    )
    _count(conn, rows, +1)
    return len(rows)


def _count(conn: sqlite3.Connection, rows: list[tuple[int, str, str]], sign: int) -> None:
    per: dict[str, int] = {}
    for _, resource, _ in rows:
        per[resource] = per.get(resource, 0) + sign
    conn.executemany(
        f"INSERT INTO {SCOPES} (resource_id, messages) VALUES (?, ?)"
        " ON CONFLICT (resource_id) DO UPDATE SET messages = messages + excluded.messages",
        list(per.items()),
    )
    if sign < 0:
        conn.execute(f"DELETE FROM {SCOPES} WHERE messages <= 0")


def _forget(conn: sqlite3.Connection, rows: list[tuple[int, str, str]]) -> int:
    conn.executemany(
        f"INSERT INTO {TABLE} ({TABLE}, rowid, body) VALUES ('delete', ?, ?)",
        [(seq, _indexed(resource, body)) for seq, resource, body in rows],
    )
    _count(conn, rows, -1)
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
    conn.execute(f"DELETE FROM {SCOPES}")
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


def term_stats(conn: sqlite3.Connection, forms: Sequence[str]) -> TermStats:
    """Document frequencies of `forms` (absent ones left out), the row count and average length."""
    # The averages record (rowid 1 of the %_data table): varint row count, then the
    # token total of each column. FTS5 keeps it current on every insert and delete.
    row = conn.execute(f"SELECT block FROM {TABLE}_data WHERE id = 1").fetchone()
    totals = _varints(row[0]) if row and row[0] else [0, 0]
    rows = totals[0] if totals else 0
    words = (totals[1] - rows) if len(totals) > 1 else 0  # less the scope token of each row
    df: dict[str, int] = {}
    for chunk in _chunks(list(dict.fromkeys(forms))):
        df.update(
            conn.execute(
                f"SELECT term, doc FROM {VOCAB} WHERE term IN ({','.join('?' * len(chunk))})", chunk
            ).fetchall()
        )
    return TermStats(rows, words / rows if rows else 0.0, df)


def seq_window(
    conn: sqlite3.Connection, resource_id: str, start: str, end: str, max_rows: int = WINDOW_ROWS
) -> tuple[int, int] | None:
    """The seq range of a resource's messages written in [start, end), found by
    bisecting seq over the resource's scope token (a resource's messages are
    appended in time order, so created_at grows with seq). None when the range
    is empty, wider than `max_rows` seqs, or the order does not hold at its
    edges (imported history): then the query uses no window."""
    scope = f'"{scope_token(resource_id)}"'

    def next_seq(at_least: int) -> int | None:
        row = conn.execute(
            f"SELECT rowid FROM {TABLE} WHERE {TABLE} MATCH ? AND rowid >= ? ORDER BY rowid LIMIT 1", (scope, at_least)
        ).fetchone()
        return row[0] if row else None

    def last_before(below: int) -> int | None:
        row = conn.execute(
            f"SELECT rowid FROM {TABLE} WHERE {TABLE} MATCH ? AND rowid < ? ORDER BY rowid DESC LIMIT 1", (scope, below)
        ).fetchone()
        return row[0] if row else None

    def created(seq: int) -> str:
        return _utc(conn.execute("SELECT created_at FROM messages WHERE seq = ?", (seq,)).fetchone()[0])

    def first_at_or_after(when: str) -> int | None:
        low, high, found = 0, conn.execute("SELECT MAX(seq) FROM messages").fetchone()[0] or 0, None
        while low <= high:
            seq = next_seq((low + high) // 2)
            if seq is None or created(seq) >= when:
                found = seq if seq is not None else found
                high = (low + high) // 2 - 1
            else:
                low = seq + 1
        return found

    begin, finish = _utc(start), _utc(end)
    lo = first_at_or_after(begin)
    if lo is None or created(lo) >= finish:
        return None
    after = first_at_or_after(finish)
    # The resource's last message before that: the seq just below may be another resource's, or deleted.
    end_seq = after if after is not None else (conn.execute("SELECT MAX(seq) FROM messages").fetchone()[0] or 0) + 1
    hi = last_before(end_seq)
    if hi is None or hi < lo:
        return None
    if hi - lo + 1 > max_rows or not (begin <= created(lo) < finish and begin <= created(hi) < finish):
        return None
    return lo, hi


def _utc(iso: str) -> str:
    """ISO-8601 text comparable as a string: UTC, fixed width."""
    from datetime import datetime

    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")


def search(
    conn: sqlite3.Connection,
    resource_id: str,
    match: Sequence[tuple[str, float]],
    *,
    thread_id: str | None = None,
    limit: int = 150,
    context: int = CONTEXT,
    windows: Sequence[tuple[int, int]] = (),
    window_match: Sequence[tuple[str, float]] = (),
) -> list[TextHit]:
    """The `limit` best matches in a resource (or one of its threads), and up
    to `context` non-empty messages before and after each in its thread, in
    one statement (Hits ordered by seq).

    `match` holds one (MATCH expression, weight) per query word, its words
    already quoted (engine/search/query.py); a message's candidate score is
    the sum of the weights of the expressions it matches. Empty finds nothing.
    `windows` are seq ranges (dates the query names, see seq_window): the
    best matches of `window_match` inside them join the candidates, so a
    message found by its date and a common word is not crowded out.
    """
    match = [(m, w) for m, w in match if m]
    window_match = [(m, w) for m, w in window_match if m] if windows else []
    if not match and not window_match:
        return []
    total = conn.execute(f"SELECT COUNT(*), SUM(messages) FROM {SCOPES}").fetchone()
    own = conn.execute(f"SELECT messages FROM {SCOPES} WHERE resource_id = ?", (resource_id,)).fetchone()
    if own is None:
        return []
    share = own[0] / (total[1] or 1)
    # A resource with most of the index: match without the scope and drop other resources'
    # rows after ranking, fetching more to make up for them.
    scoped = total[0] > 1 and share < UNSCOPED_SHARE
    fetch = limit if share >= 1 or scoped else int(limit / share * 1.25) + 1
    scope = f'"{scope_token(resource_id)}" AND ' if scoped else ""
    # A thread's search matches first and filters second: the thread's rows are looked up once per
    # candidate, after the words found them (a filter inside each MATCH looked the index up once
    # per row of the thread: seconds for a long one).
    in_thread = " CROSS JOIN messages t ON t.seq = g.seq WHERE t.thread_id = :thread" if thread_id is not None else ""

    def best(n: int, rows: list[str]) -> str:
        # The `limit` best by score. Ties at the cut are broken by what a message is, not where it sits in
        # this file, so a moved memory finds the same candidates; only the rows tied at the cut are looked up
        # for that (every candidate was, sorting them all by a sub-select).
        return f"""
        g{n}(seq, score) AS MATERIALIZED (SELECT g.seq, g.score FROM (SELECT seq, SUM(w) AS score
            FROM ({" UNION ALL ".join(rows)}) GROUP BY seq) g{in_thread}),
        c{n}(score) AS MATERIALIZED (SELECT score FROM g{n} ORDER BY score DESC LIMIT 1 OFFSET :limit - 1),
        r{n}(seq, score) AS (
            SELECT seq, score FROM g{n} WHERE score > COALESCE((SELECT score FROM c{n}), -1e308)
            UNION ALL SELECT * FROM (SELECT seq, score FROM g{n} WHERE score = (SELECT score FROM c{n})
                ORDER BY (SELECT created_at || ' ' || thread_id || ' ' || id FROM messages m
                    WHERE m.seq = g{n}.seq) DESC
                LIMIT :limit - (SELECT COUNT(*) FROM g{n} WHERE score > (SELECT score FROM c{n})))
        ),"""

    word_rows = [f"SELECT rowid AS seq, :w{i} AS w FROM {TABLE} WHERE {TABLE} MATCH :m{i}" for i in range(len(match))]
    ranked = [best(0, word_rows)] if word_rows else []
    for j, _ in enumerate(windows):
        ranked.append(
            best(
                j + 1,
                [
                    f"SELECT rowid AS seq, :vw{i} AS w FROM {TABLE} WHERE {TABLE} MATCH :vm{i}"
                    f" AND rowid BETWEEN :lo{j} AND :hi{j}"
                    for i in range(len(window_match))
                ],
            )
        )
    names = ([0] if word_rows else []) + [j + 1 for j in range(len(windows))]
    lists = " UNION ALL ".join(f"SELECT * FROM r{n}" for n in names)
    around = "".join(
        f" UNION SELECT (SELECT seq FROM messages WHERE thread_id = h.thread_id AND seq {op} h.seq AND body != ''"
        f" ORDER BY seq {order} LIMIT 1 OFFSET {k}) FROM placed h"
        for k in range(context)
        for op, order in (("<", "DESC"), (">", "ASC"))
    )
    sql = f"""
        WITH {"".join(ranked)}
        ranked(seq, score) AS MATERIALIZED ({lists}),
        hits(seq, score) AS MATERIALIZED (SELECT seq, MAX(score) FROM ranked GROUP BY seq),
        placed AS MATERIALIZED (
            SELECT m.seq, m.thread_id FROM hits CROSS JOIN messages m ON m.seq = hits.seq
            WHERE m.resource_id = :resource
        ),
        fetched(seq) AS (SELECT seq FROM placed{around})
        SELECT m.seq, COALESCE(hits.score, 0.0), m.thread_id, m.role, m.created_at, m.body, m.metadata
        FROM fetched CROSS JOIN messages m ON m.seq = fetched.seq LEFT JOIN hits ON hits.seq = m.seq
        ORDER BY m.seq"""
    params: dict = {"thread": thread_id, "limit": fetch, "resource": resource_id}
    for i, (expression, weight) in enumerate(match):
        params[f"m{i}"] = f"{scope}({expression})"
        params[f"w{i}"] = weight
    for i, (expression, weight) in enumerate(window_match):
        params[f"vm{i}"] = f"{scope}({expression})"
        params[f"vw{i}"] = weight
    for j, (lo, hi) in enumerate(windows):
        params[f"lo{j}"], params[f"hi{j}"] = lo, hi
    return [TextHit(*row) for row in conn.execute(sql, params).fetchall()]


def find(
    conn: sqlite3.Connection, resource_id: str, plan: SearchPlan, *, thread_id: str | None = None, limit: int = 50
) -> tuple[list[TextHit], TermStats]:
    """A search in one read: the query's document frequencies, the seq windows of the dates it names, then the
    candidates with their context."""
    stats = term_stats(conn, plan.forms())
    windows = [w for w in (seq_window(conn, resource_id, start, end) for start, end in plan.date_ranges()) if w]
    hits = search(
        conn,
        resource_id,
        plan.weighted_match(stats.df, stats.rows),
        thread_id=thread_id,
        limit=limit,
        windows=windows,
        window_match=plan.weighted_match(stats.df, stats.rows, budget=WINDOW_ROWS) if windows else (),
    )
    return hits, stats


# -- observation groups -------------------------------------------------------------------------


def search_groups(
    conn: sqlite3.Connection, resource_id: str, match: str, *, thread_id: str | None = None, limit: int = 20
) -> list[GroupHit]:
    """BM25 over the active observation groups of a resource and its retired pile (generation -1)."""
    if not match:
        return []
    sql = (
        f"SELECT {GROUP_COLUMNS}, bm25(om_groups_fts) AS rank"
        " FROM om_groups_fts f JOIN om_groups g ON g.id = f.group_id"
        " JOIN om_records r ON r.key = g.record_key AND (r.generation = g.generation OR g.generation = -1)"
        " WHERE om_groups_fts MATCH ? AND r.resource_id = ?"
    )
    params: list = [match, resource_id]
    if thread_id is not None:
        sql += " AND (g.thread_id = ? OR r.thread_id = ?)"
        params += [thread_id, thread_id]
    sql += " ORDER BY rank, g.record_key, g.generation, g.position LIMIT ?"
    params.append(limit)
    return [GroupHit(group(r[:-1]), resource_id, -float(r[-1])) for r in conn.execute(sql, params)]
