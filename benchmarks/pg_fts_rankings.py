"""The PostgreSQL full-text rankings compared by pg_search_lab.py: schema, loading, SQL.

A message row carries body, prev1, prev2 (the two bodies before it in its
thread) and doclen (its token count over the three, as FTS5's bm25 counts it),
and a stored generated tsvector per text-search configuration:

    setweight(to_tsvector(cfg, body), 'A') || setweight(to_tsvector(cfg, prev1), 'B')
        || setweight(to_tsvector(cfg, prev2), 'C')

with a GIN index. Per resource, `<table>_stats` keeps the message count and
total length and `<table>_terms` how many messages hold each lexeme (the store
would keep both in the append transaction; here they are computed after loading).
"""

from __future__ import annotations

import math
import time
from typing import Awaitable, Callable

from om_mcp.engine.search import CANDIDATES, Query

WEIGHTS = "{0.0, 0.4, 0.5, 1.0}"  # ts_rank's order is D, C, B, A: A body 1.0, B prev1 0.5, C prev2 0.4
K1, B = 1.2, 0.75  # FTS5's bm25 constants
TS_RANK_ONE = 1.64493406685  # ts_rank divides one term's score by pi^2/6

Hits = list[tuple[int, float]]  # (seq, score), best first


def tsv(config: str) -> str:
    return (f"setweight(to_tsvector('{config}', body), 'A') || setweight(to_tsvector('{config}', prev1), 'B')"
            f" || setweight(to_tsvector('{config}', prev2), 'C')")


def schema(table: str, configs: tuple[str, ...]) -> str:
    columns = "".join(f", tsv_{c} tsvector GENERATED ALWAYS AS ({tsv(c)}) STORED" for c in configs)
    return f"""
    DROP TABLE IF EXISTS {table}, {table}_stats, {table}_terms;
    CREATE TABLE {table} (seq bigint PRIMARY KEY, id text NOT NULL, thread_id text NOT NULL,
        resource_id text NOT NULL, created_at timestamptz NOT NULL, body text NOT NULL, prev1 text NOT NULL,
        prev2 text NOT NULL, doclen int NOT NULL{columns});
    CREATE TABLE {table}_stats (resource_id text PRIMARY KEY, n_docs bigint NOT NULL, total_len bigint NOT NULL);
    CREATE TABLE {table}_terms (resource_id text NOT NULL, lexeme text NOT NULL, ndoc bigint NOT NULL,
        PRIMARY KEY (resource_id, lexeme));
    """


async def load(conn, table: str, rows: list[tuple], configs: tuple[str, ...], composite: bool) -> float:
    """rows: (seq, id, thread_id, resource_id, created_at, body, prev1, prev2, doclen). Returns seconds."""
    await conn.execute(schema(table, configs))
    t0 = time.perf_counter()
    await conn.copy_records_to_table(
        table, records=rows,
        columns=["seq", "id", "thread_id", "resource_id", "created_at", "body", "prev1", "prev2", "doclen"],
    )
    for c in configs:
        # GIN(resource_id, tsv) needs btree_gin; it narrows the term lists to one resource inside the index.
        key = f"resource_id, tsv_{c}" if composite else f"tsv_{c}"
        await conn.execute(f"CREATE INDEX {table}_{c} ON {table} USING gin ({key})")
    await conn.execute(f"CREATE INDEX {table}_by_resource ON {table} (resource_id, seq)")
    await conn.execute(f"INSERT INTO {table}_stats SELECT resource_id, count(*), sum(doclen) FROM {table} GROUP BY 1")
    await conn.execute(
        f"INSERT INTO {table}_terms SELECT resource_id, lexeme, count(*)"
        f" FROM {table}, unnest(tsvector_to_array(tsv_{configs[0]})) lexeme GROUP BY 1, 2"
    )
    await conn.execute(f"ANALYZE {table}")
    return time.perf_counter() - t0


def tsquery_text(terms: list[str]) -> str:
    # Terms are \w+ runs, so they hold no quote; quoting keeps words like "or" literal.
    return " | ".join(f"'{t}'" for t in terms)


# -- the rankings -------------------------------------------------------------------------------


def _ts_rank(table: str, config: str, function: str, normalization: int):
    sql = (f"SELECT seq, {function}('{WEIGHTS}', tsv_{config}, q, {normalization}) AS score"
           f" FROM {table}, to_tsquery('{config}', $2) q"
           f" WHERE resource_id = $1 AND tsv_{config} @@ q ORDER BY score DESC LIMIT $3")

    async def search(conn, resource: str, query: Query) -> Hits:
        return await _fetch(conn, sql, resource, tsquery_text(query.terms), CANDIDATES)

    return search


def _bm25_unnest(table: str, config: str):
    """FTS5's bm25 exactly: per-column counts from unnest(tsvector) weights, df over the matches."""
    sql = f"""
    WITH q AS MATERIALIZED (
        -- once per query: a generic plan would otherwise stem the terms again for every row
        SELECT tsvector_to_array(to_tsvector('{config}', $4)) AS lexemes
    ), cand AS (
        SELECT seq, doclen, tsv_{config} AS tsv FROM {table}
        WHERE resource_id = $1 AND tsv_{config} @@ to_tsquery('{config}', $2)
    ), tf AS (
        SELECT c.seq, c.doclen, u.lexeme,
               coalesce(cardinality(array_positions(u.weights, 'A')), 0)
               + 0.5::float8 * coalesce(cardinality(array_positions(u.weights, 'B')), 0)
               + 0.4::float8 * coalesce(cardinality(array_positions(u.weights, 'C')), 0) AS f
        FROM cand c CROSS JOIN q CROSS JOIN LATERAL unnest(c.tsv) u
        WHERE u.lexeme = ANY (q.lexemes)
    ), df AS (
        SELECT lexeme, count(*)::float8 AS n FROM tf GROUP BY lexeme
    )
    SELECT tf.seq, sum(
        greatest(ln((s.n_docs - df.n + 0.5) / (df.n + 0.5)), 1e-6)
        * tf.f * {K1 + 1} / (tf.f + {K1} * ({1 - B} + {B} * tf.doclen * s.n_docs / s.total_len::float8))
    ) AS score
    FROM tf JOIN df USING (lexeme) JOIN {table}_stats s ON s.resource_id = $1
    GROUP BY tf.seq ORDER BY score DESC LIMIT $3
    """

    async def search(conn, resource: str, query: Query) -> Hits:
        return await _fetch(conn, sql, resource, tsquery_text(query.terms), CANDIDATES, " ".join(query.terms))

    return search


def _bm25_rank_sql(table: str, config: str, df_from_matches: bool) -> str:
    """bm25 with each term's weighted count read by ts_rank (C) instead of unnest: the
    ts_rank of a one-term query x pi^2/6 is the column weight of one occurrence, and
    saturates for more. Terms come as $4 text[]; with df_from_matches their document
    frequency is counted over the matches, else idf comes as $5 float8[] and the
    average length as $6."""
    if df_from_matches:
        terms = f"SELECT t.term, plainto_tsquery('{config}', t.term) AS tq FROM unnest($4::text[]) t(term)"
        idf = "greatest(ln((s.n_docs - df.n + 0.5) / (df.n + 0.5)), 1e-6)"
        norm = "tf.doclen * s.n_docs / s.total_len::float8"
        tail = (f"FROM tf JOIN (SELECT term, count(*)::float8 AS n FROM tf GROUP BY term) df USING (term)"
                f" JOIN {table}_stats s ON s.resource_id = $1")
    else:
        terms = (f"SELECT t.term, t.idf, plainto_tsquery('{config}', t.term) AS tq"
                 f" FROM unnest($4::text[], $5::float8[]) t(term, idf)")
        idf, norm, tail = "tf.idf", "tf.doclen / $6::float8", "FROM tf"
    return f"""
    WITH q AS MATERIALIZED ({terms}), cand AS (
        SELECT seq, doclen, tsv_{config} AS tsv FROM {table}
        WHERE resource_id = $1 AND tsv_{config} @@ to_tsquery('{config}', $2)
    ), tf AS (
        SELECT c.seq, c.doclen, q.*, ts_rank('{WEIGHTS}', c.tsv, q.tq)::float8 * {TS_RANK_ONE} AS f
        FROM cand c CROSS JOIN q WHERE q.tq <> ''::tsquery AND c.tsv @@ q.tq
    )
    SELECT tf.seq, sum({idf} * tf.f * {K1 + 1} / (tf.f + {K1} * ({1 - B} + {B} * {norm}))) AS score
    {tail}
    GROUP BY tf.seq ORDER BY score DESC LIMIT $3
    """


def _bm25_rank(table: str, config: str):
    sql = _bm25_rank_sql(table, config, df_from_matches=True)

    async def search(conn, resource: str, query: Query) -> Hits:
        return await _fetch(conn, sql, resource, tsquery_text(query.terms), CANDIDATES, query.terms)

    return search


def _bm25_stats(table: str, config: str):
    """The same score with df, N and length from the per-resource counters (one cheap
    round trip first). A term in more than half the resource's messages has bm25's
    floor idf: it would rank nothing, so it also selects nothing, unless it is all
    the query has."""
    lookup = f"""
    SELECT t.term, coalesce(max(st.ndoc), 0) AS n, s.n_docs, s.total_len
    FROM unnest($2::text[]) t(term) JOIN {table}_stats s ON s.resource_id = $1
    LEFT JOIN {table}_terms st ON st.resource_id = $1
         AND st.lexeme = ANY (tsvector_to_array(to_tsvector('{config}', t.term)))
    GROUP BY t.term, s.n_docs, s.total_len
    """
    sql = _bm25_rank_sql(table, config, df_from_matches=False)

    async def search(conn, resource: str, query: Query) -> Hits:
        rows = await conn.fetch(lookup, resource, query.terms)
        if not rows:
            return []
        n_docs, avgdl = rows[0]["n_docs"], rows[0]["total_len"] / rows[0]["n_docs"]
        present = [(r["term"], r["n"]) for r in rows if r["n"] > 0]
        useful = [(t, n) for t, n in present if n <= n_docs / 2] or present
        if not useful:
            return []
        idf = [max(math.log((n_docs - n + 0.5) / (n + 0.5)), 1e-6) for _, n in useful]
        terms = [t for t, _ in useful]
        return await _fetch(conn, sql, resource, tsquery_text(terms), CANDIDATES, terms, idf, avgdl)

    return search


async def _fetch(conn, sql: str, resource: str, *args) -> Hits:
    if not args[0]:
        return []
    return [(r[0], float(r[1])) for r in await conn.fetch(sql, resource, *args)]


def rankings(table: str, simple: bool = True) -> dict[str, Callable[..., Awaitable[Hits]]]:
    found = {
        "pg-ts_rank": _ts_rank(table, "english", "ts_rank", 0),
        "pg-ts_rank/log": _ts_rank(table, "english", "ts_rank", 1),
        "pg-ts_rank_cd": _ts_rank(table, "english", "ts_rank_cd", 0),
        "pg-bm25-unnest": _bm25_unnest(table, "english"),
        "pg-bm25-rank": _bm25_rank(table, "english"),
        "pg-bm25-stats": _bm25_stats(table, "english"),
    }
    if simple:
        found["pg-bm25-simple"] = _bm25_rank(table, "simple")
    return found


async def append_cost(conn, table: str, rows: list[tuple], counters: bool) -> list[float]:
    """Seconds per one-message append transaction, with or without keeping the counters."""
    times = []
    for row in rows:
        t0 = time.perf_counter()
        async with conn.transaction():
            if counters:
                await conn.execute(f"""
                    WITH new AS (
                        INSERT INTO {table} (seq, id, thread_id, resource_id, created_at, body, prev1, prev2, doclen)
                        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING resource_id, tsv_english
                    ), terms AS (
                        -- sorted, so two appenders lock shared lexemes in one order (no deadlock)
                        INSERT INTO {table}_terms (resource_id, lexeme, ndoc)
                        SELECT new.resource_id, lexeme, 1 FROM new, unnest(tsvector_to_array(new.tsv_english)) lexeme
                        ORDER BY lexeme
                        ON CONFLICT (resource_id, lexeme) DO UPDATE SET ndoc = {table}_terms.ndoc + 1
                    )
                    UPDATE {table}_stats SET n_docs = n_docs + 1, total_len = total_len + $9
                    WHERE resource_id = $4""", *row)
            else:
                await conn.execute(
                    f"INSERT INTO {table} (seq, id, thread_id, resource_id, created_at, body, prev1, prev2, doclen)"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)", *row)
        times.append(time.perf_counter() - t0)
    return times
