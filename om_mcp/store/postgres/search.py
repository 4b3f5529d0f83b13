"""Full-text search on PostgreSQL: the same ranking as SQLite's FTS5, on tsvector.

Every search statement of the PostgreSQL store is here, so a change of the
ranking is one module. Measured against FTS5 on LoCoMo in
benchmarks/pg_search_lab.py (the `pg-bm25-stats` design of docs/postgres-notes.md).

Index: one row per message with text, `messages_fts(seq, resource_id, thread_id,
doclen, tsv)`, where tsv weighs the message A, the one before it in its thread
B and the one before that C (SQLite's body/prev1/prev2 columns at 1.0/0.5/0.4),
under a GIN index. The earlier messages' text is not stored again.

Ranking: FTS5's bm25, constants and all, but with per-resource statistics.
Per resource, `search_stats` keeps the message count and total length,
`search_terms` how many messages hold each lexeme; both move in the append (and
delete) transaction, lexemes locked in sorted order so two appenders cannot
deadlock. A query reads the counters (one round trip), then scores the GIN
matches, counting each lexeme's occurrences per weight from the tsvector as FTS5
counts them per column (second round trip). Words in more than half the
messages have bm25's floor idf (a speaker's name, say): they do not select
candidates while rarer words do, and the messages holding only them follow, as
in FTS5, in a third round trip taken only when the first found too few.

The query string is an FTS5 expression of quoted terms OR-ed together
(`"a" OR "b"`), as `engine.search.query.Query.match` writes it; `terms()` reads it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from om_mcp.store.decode import GROUP_COLUMNS, group
from om_mcp.store.rows import GroupHit, Hit
from om_mcp.store.search import SearchPlan, TermStats, TextHit

CONFIG = "english"  # stemming: +4.5 points of R@10 over 'simple' on LoCoMo
WEIGHT_B, WEIGHT_C = 0.5, 0.4  # the message counts 1.0 (A), the one before 0.5 (B), the one before that 0.4 (C)
K1, B = 1.2, 0.75  # FTS5's bm25 constants
_TOKEN = re.compile(r"\w+", re.UNICODE)
_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
_OPERATORS = {"OR", "AND", "NOT", "NEAR"}

TABLES = """
CREATE TABLE messages_fts (
    seq bigint PRIMARY KEY REFERENCES messages(seq) ON DELETE CASCADE,
    resource_id text COLLATE "C" NOT NULL,
    thread_id text COLLATE "C" NOT NULL,
    doclen integer NOT NULL,
    tsv tsvector NOT NULL,
    tf jsonb NOT NULL  -- lexeme -> its weighted count (1 per occurrence in the message, 0.5 / 0.4 before it)
);
CREATE INDEX messages_fts_by_thread ON messages_fts (thread_id);
CREATE TABLE search_stats (resource_id text COLLATE "C" PRIMARY KEY, n_docs bigint NOT NULL, total_len bigint NOT NULL);
CREATE TABLE search_terms (
    resource_id text COLLATE "C" NOT NULL,
    lexeme text COLLATE "C" NOT NULL,
    ndoc bigint NOT NULL,
    PRIMARY KEY (resource_id, lexeme)
);
"""


async def create(conn: Any) -> None:
    """The tables, and the GIN index: on (resource_id, tsv) where btree_gin can be had
    (it narrows the matches to one resource inside the index), else on tsv alone."""
    await conn.execute(TABLES)
    try:
        async with conn.transaction():  # a savepoint: a refused extension must not end the migration
            await conn.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
        await conn.execute("CREATE INDEX messages_fts_words ON messages_fts USING gin (resource_id, tsv)")
    except Exception:  # noqa: BLE001 - not installed or not allowed: the plain index works, a little slower
        await conn.execute("CREATE INDEX messages_fts_words ON messages_fts USING gin (tsv)")
        await conn.execute("CREATE INDEX messages_fts_by_resource ON messages_fts (resource_id)")


def doclen(*texts: str) -> int:
    """FTS5 bm25's document length: every token of every column."""
    return sum(len(_TOKEN.findall(t)) for t in texts)


def terms(match: str) -> list[str]:
    """The terms of an FTS5 OR-expression of quoted strings (bare words are taken too)."""
    found = [m.replace('""', '"') for m in _QUOTED.findall(match)]
    rest = _QUOTED.sub(" ", match)
    found += [w for w in rest.split() if w not in _OPERATORS and _TOKEN.search(w)]
    return [t for t in dict.fromkeys(found) if t.strip()]


# -- the index, kept in the writing transaction -------------------------------------------


async def _previous(conn: Any, thread_id: str, before_seq: int) -> list[str]:
    rows = await conn.fetch(
        "SELECT body FROM messages WHERE thread_id = $1 AND seq < $2 AND body <> '' ORDER BY seq DESC LIMIT 2",
        thread_id,
        before_seq,
    )
    return [r[0] for r in rows] + [""] * (2 - len(rows))


WEIGHTED_COUNT = (
    f"cardinality(array_positions(w.weights, 'A')) + {WEIGHT_B}::float8 *"
    f" cardinality(array_positions(w.weights, 'B')) + {WEIGHT_C}::float8 *"
    f" cardinality(array_positions(w.weights, 'C'))"
)

INDEX = f"""
WITH entries AS (
    SELECT u.seq, u.doclen, setweight(to_tsvector('{CONFIG}', u.body), 'A')
           || setweight(to_tsvector('{CONFIG}', u.prev1), 'B')
           || setweight(to_tsvector('{CONFIG}', u.prev2), 'C') AS tsv
    FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::int[]) AS u(seq, body, prev1, prev2, doclen)
), new AS (
    INSERT INTO messages_fts (seq, resource_id, thread_id, doclen, tsv, tf)
    SELECT e.seq, $1, $2, e.doclen, e.tsv,
           (SELECT coalesce(jsonb_object_agg(w.lexeme, {WEIGHTED_COUNT}), '{{}}') FROM unnest(e.tsv) AS w)
    FROM entries e
    RETURNING tsv
), counted AS (
    INSERT INTO search_terms (resource_id, lexeme, ndoc)
    SELECT $1, lexeme, count(*) FROM new, unnest(tsvector_to_array(new.tsv)) AS lexeme
    GROUP BY lexeme ORDER BY lexeme
    ON CONFLICT (resource_id, lexeme) DO UPDATE SET ndoc = search_terms.ndoc + excluded.ndoc
)
INSERT INTO search_stats (resource_id, n_docs, total_len) VALUES ($1, cardinality($3::bigint[]), $8)
ON CONFLICT (resource_id) DO UPDATE SET n_docs = search_stats.n_docs + excluded.n_docs,
    total_len = search_stats.total_len + excluded.total_len
"""


async def index_messages(conn: Any, thread_id: str, resource_id: str, rows: list[tuple[int, str]]) -> None:
    """Index new messages of one thread, (seq, body) oldest first, and count them."""
    prev1, prev2 = await _previous(conn, thread_id, rows[0][0]) if rows else ("", "")
    entries = []
    for seq, body in rows:
        if not body:
            continue
        entries.append((seq, body, prev1, prev2, doclen(body, prev1, prev2)))
        prev1, prev2 = body, prev1
    if not entries:
        return
    columns = list(zip(*entries))
    await conn.execute(INDEX, resource_id, thread_id, *[list(c) for c in columns], sum(columns[4]))


# Removes the entries {where} picks and takes them off the per-resource counters.
FORGET = """
WITH gone AS (
    DELETE FROM messages_fts WHERE {where} RETURNING resource_id, doclen, tsv
), lexemes AS (
    SELECT resource_id, lexeme, count(*) AS n FROM gone, unnest(tsvector_to_array(gone.tsv)) AS lexeme
    GROUP BY resource_id, lexeme
), counted AS (
    UPDATE search_terms st SET ndoc = st.ndoc - l.n FROM lexemes l
    WHERE st.resource_id = l.resource_id AND st.lexeme = l.lexeme
)
UPDATE search_stats s SET n_docs = s.n_docs - g.n, total_len = s.total_len - g.len
FROM (SELECT resource_id, count(*) AS n, sum(doclen) AS len FROM gone GROUP BY resource_id) g
WHERE s.resource_id = g.resource_id
"""


async def _forget(conn: Any, where: str, values: list[Any]) -> None:
    """Remove the entries `where` ($1: `values`) picks and their counts; a word no message holds any
    more leaves too."""
    resources = [r[0] for r in await conn.fetch(f"SELECT DISTINCT resource_id FROM messages_fts WHERE {where}", values)]
    if not resources:
        return
    # The counter rows first, in the order appenders take them, so the two cannot deadlock.
    await conn.execute(
        "SELECT 1 FROM search_terms WHERE resource_id = ANY ($2::text[]) AND lexeme IN (SELECT DISTINCT lexeme"
        f" FROM messages_fts, unnest(tsvector_to_array(tsv)) AS lexeme WHERE {where})"
        " ORDER BY resource_id, lexeme FOR UPDATE",
        values,
        resources,
    )
    await conn.execute(FORGET.format(where=where), values)
    await conn.execute("DELETE FROM search_terms WHERE resource_id = ANY ($1::text[]) AND ndoc <= 0", resources)
    await conn.execute("DELETE FROM search_stats WHERE resource_id = ANY ($1::text[]) AND n_docs <= 0", resources)


async def forget_threads(conn: Any, thread_ids: list[str]) -> None:
    """Remove threads' entries and their counts."""
    if thread_ids:
        await _forget(conn, "thread_id = ANY ($1::text[])", thread_ids)


async def forget_messages(conn: Any, thread_id: str, seqs: list[int]) -> list[int]:
    """Remove messages' entries, and those of the two after each (their entries weigh its words in,
    B and C); the latter's seqs, to `index_again` once the messages are gone."""
    after: set[int] = set()
    for seq in seqs:
        after |= {
            r[0]
            for r in await conn.fetch(
                "SELECT seq FROM messages WHERE thread_id = $1 AND seq > $2 AND NOT (seq = ANY ($3::bigint[]))"
                " AND body <> '' ORDER BY seq LIMIT 2",
                thread_id,
                seq,
                seqs,
            )
        }
    await _forget(conn, "seq = ANY ($1::bigint[])", [*seqs, *after])
    return sorted(after)


async def index_again(conn: Any, thread_id: str, seqs: list[int]) -> None:
    resource_id = await conn.fetchval("SELECT resource_id FROM threads WHERE id = $1", thread_id)
    for seq in seqs:  # one at a time: each finds its own two previous messages
        body = await conn.fetchval("SELECT body FROM messages WHERE seq = $1", seq)
        await index_messages(conn, thread_id, resource_id, [(seq, body)])


# -- messages ---------------------------------------------------------------------------------

# Each term's lexemes (a term the stemmer splits counts as its words), with how many of the
# resource's messages hold each, and the resource's message count and total length.
LOOKUP = f"""
SELECT l.lexeme, coalesce(st.ndoc, 0) AS n, s.n_docs, s.total_len
FROM (SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('{CONFIG}', t.term))) AS lexeme
      FROM unnest($2::text[]) AS t(term)) l
JOIN search_stats s ON s.resource_id = $1
LEFT JOIN search_terms st ON st.resource_id = $1 AND st.lexeme = l.lexeme
"""

# Scores the messages of resource $1 (thread $7, when given) matching $2 and not $8 (when given),
# by the lexemes $4 with idf $5 and average length $6; the best $3. Each lexeme's count is
# FTS5's: its occurrences in the message, plus 0.5 per one in the message before, 0.4 before
# that, read from `tf` (computed once, at insert: unnesting every candidate's tsvector per
# query cost 10 times more).
RANK = f"""
WITH q AS MATERIALIZED (
    SELECT t.lexeme, t.idf FROM unnest($4::text[], $5::float8[]) AS t(lexeme, idf)
), unwanted AS MATERIALIZED (
    SELECT $8::tsquery AS tq
), cand AS (
    SELECT f.seq, f.doclen, f.tf FROM messages_fts f, unwanted
    WHERE f.resource_id = $1 AND f.tsv @@ $2::tsquery AND ($7::text IS NULL OR f.thread_id = $7)
      AND (unwanted.tq IS NULL OR NOT f.tsv @@ unwanted.tq)
), tf AS (
    SELECT c.seq, c.doclen, q.idf, (c.tf ->> q.lexeme)::float8 AS f
    FROM cand c CROSS JOIN q WHERE c.tf ? q.lexeme
)
SELECT tf.seq, sum(tf.idf * tf.f * {K1 + 1} / (tf.f + {K1} * ({1 - B} + {B} * tf.doclen / $6::float8))) AS score
FROM tf GROUP BY tf.seq ORDER BY score DESC, tf.seq LIMIT $3
"""


def _idf(n_docs: int, n: int) -> float:
    return max(math.log((n_docs - n + 0.5) / (n + 0.5)), 1e-6)


def _any(lexemes: list[str]) -> str:
    """A tsquery matching any of the lexemes, taken as they are (no stemming again)."""
    return " | ".join("'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" for lexeme in lexemes)


async def search(
    conn: Any, resource_id: str, match: str, *, thread_id: str | None = None, limit: int = 20
) -> list[Hit]:
    """BM25-ranked message seqs of a resource (or one of its threads) for `match`.

    FTS5 returns every match, those with only common words last (their idf is a
    floor of 1e-6). So do we, in two steps that keep the common case cheap: the
    messages holding a word of use, scored on every word; then, only if fewer
    than `limit` were found, the messages holding common words alone."""
    words = terms(match)
    if not words:
        return []
    rows = await conn.fetch(LOOKUP, resource_id, words)
    if not rows or not rows[0]["n_docs"]:
        return []
    n_docs, avgdl = rows[0]["n_docs"], rows[0]["total_len"] / rows[0]["n_docs"] or 1.0
    idf = {r["lexeme"]: _idf(n_docs, r["n"]) for r in rows if r["n"] > 0}
    if not idf:
        return []
    useful = [lexeme for lexeme, value in idf.items() if value > 1e-6]
    common = [lexeme for lexeme, value in idf.items() if value <= 1e-6]
    hits = await conn.fetch(
        RANK, resource_id, _any(useful or common), limit, list(idf), list(idf.values()), avgdl, thread_id, None
    )
    if useful and common and len(hits) < limit:
        hits += await conn.fetch(
            RANK,
            resource_id,
            _any(common),
            limit - len(hits),
            common,
            [1e-6] * len(common),
            avgdl,
            thread_id,
            _any(useful),
        )
    return [Hit(r[0], float(r[1])) for r in hits]


# The document frequency of each exact form the engine asks about, read from its stemmed lexeme's count
# (a form the stemmer drops, a stop word, counts as absent), with the resource's totals.
FORM_DF = f"""
SELECT t.form, coalesce(max(st.ndoc), 0) AS n
FROM unnest($2::text[]) AS t(form)
LEFT JOIN LATERAL unnest(tsvector_to_array(to_tsvector('{CONFIG}', t.form))) AS l(lexeme) ON true
LEFT JOIN search_terms st ON st.resource_id = $1 AND st.lexeme = l.lexeme
GROUP BY t.form
"""

# The matches and the two messages with text before and after each in its thread, ordered by seq.
AROUND = """
WITH hits(seq, score) AS (SELECT * FROM unnest($1::bigint[], $2::float8[])),
placed AS (SELECT m.seq, m.thread_id FROM hits JOIN messages m ON m.seq = hits.seq WHERE m.resource_id = $3),
fetched AS (
    SELECT seq FROM placed
    UNION SELECT x.seq FROM placed p CROSS JOIN LATERAL (SELECT seq FROM messages WHERE thread_id = p.thread_id
        AND seq < p.seq AND body <> '' ORDER BY seq DESC LIMIT 2) x
    UNION SELECT x.seq FROM placed p CROSS JOIN LATERAL (SELECT seq FROM messages WHERE thread_id = p.thread_id
        AND seq > p.seq AND body <> '' ORDER BY seq LIMIT 2) x
)
SELECT m.seq, coalesce(h.score, 0)::float8, m.thread_id, m.role, m.created_at, m.body, m.metadata
FROM fetched f JOIN messages m ON m.seq = f.seq LEFT JOIN hits h ON h.seq = m.seq ORDER BY m.seq
"""


async def find(
    conn: Any, resource_id: str, plan: SearchPlan, *, thread_id: str | None = None, limit: int = 50
) -> tuple[list[TextHit], TermStats]:
    """The engine's search (om_mcp.store.search): candidates by this store's BM25 over the forms the plan
    asks about, each with the messages around it, and the statistics its ranking needs. Dates the plan names
    add no candidates here (SQLite's index can bisect by them; a GIN index cannot)."""
    forms = plan.forms()
    totals = await conn.fetchrow("SELECT n_docs, total_len FROM search_stats WHERE resource_id = $1", resource_id)
    if not forms or totals is None or not totals["n_docs"]:
        return [], TermStats(0, 0.0, {})
    df = {r["form"]: r["n"] for r in await conn.fetch(FORM_DF, resource_id, forms) if r["n"]}
    # total_len counts each message with the two before it (its tsv's B and C weights): a third is its own
    stats = TermStats(totals["n_docs"], totals["total_len"] / totals["n_docs"] / 3, df)
    present = [f for f in forms if f in df]
    if not present:
        return [], stats
    hits = await search(
        conn,
        resource_id,
        " OR ".join('"' + f.replace('"', '""') + '"' for f in present),
        thread_id=thread_id,
        limit=limit,
    )
    if not hits:
        return [], stats
    rows = await conn.fetch(AROUND, [h.seq for h in hits], [h.score for h in hits], resource_id)
    return [TextHit(*tuple(r)) for r in rows], stats


# -- observation groups ------------------------------------------------------------------------


# BM25 over the active groups (and the retired pile, generation -1) of resource $1 (of thread $4,
# when given) for the words $2; the best $3. Groups are few per resource: their count, length and
# document frequencies are computed over the resource's active groups at query time.
GROUPS = f"""
WITH q AS MATERIALIZED (
    SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('{CONFIG}', t.term))) AS lexeme
    FROM unnest($2::text[]) AS t(term)
), active AS (
    SELECT g.id, g.doclen, g.tsv FROM om_groups g
    JOIN om_records r ON r.key = g.record_key AND (r.generation = g.generation OR g.generation = -1)
    WHERE r.resource_id = $1 AND ($4::text IS NULL OR g.thread_id = $4 OR r.thread_id = $4)
), totals AS (
    SELECT count(*)::float8 AS n_docs, greatest(avg(doclen), 1)::float8 AS avgdl FROM active
), tf AS (
    SELECT a.id, a.doclen, u.lexeme, cardinality(u.positions)::float8 AS f
    FROM active a CROSS JOIN LATERAL unnest(a.tsv) AS u JOIN q ON q.lexeme = u.lexeme
), df AS (
    SELECT lexeme, count(*)::float8 AS n FROM tf GROUP BY lexeme
), scored AS (
    SELECT tf.id, sum(greatest(ln((totals.n_docs - df.n + 0.5) / (df.n + 0.5)), 1e-6)
        * tf.f * {K1 + 1} / (tf.f + {K1} * ({1 - B} + {B} * tf.doclen / totals.avgdl))) AS score
    FROM tf JOIN df USING (lexeme) CROSS JOIN totals GROUP BY tf.id
)
SELECT {GROUP_COLUMNS}, s.score FROM scored s JOIN om_groups g ON g.id = s.id
ORDER BY s.score DESC, g.id LIMIT $3
"""


async def search_groups(
    conn: Any, resource_id: str, match: str, *, thread_id: str | None = None, limit: int = 20
) -> list[GroupHit]:
    """BM25 over the active observation groups of a resource and its retired pile."""
    words = terms(match)
    if not words:
        return []
    rows = await conn.fetch(GROUPS, resource_id, words, limit, thread_id)
    return [GroupHit(group(tuple(r)[:-1]), resource_id, float(r[-1])) for r in rows]
