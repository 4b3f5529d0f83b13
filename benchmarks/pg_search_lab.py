"""Full-text search on PostgreSQL against SQLite FTS5, on LoCoMo, in one run.

    pip install asyncpg
    python benchmarks/pg_search_lab.py [--data .../locomo_dev.json] [--scale 100000] [--timed 200]

Loads every LoCoMo turn as a message (one resource per conversation, one
thread per session; body = "Speaker: text [shares caption]", prev1/prev2 =
the two bodies before it in the thread, as om_mcp/store/store.py indexes
them) into SQLite FTS5 and into a throwaway PostgreSQL (the test server), asks
every question with evidence, scoped to its conversation, and prints evidence
recall@5/10/20 for each ranking, raw and after the engine's own re-ranking
(om_mcp.engine.search.rerank over the 400 best candidates, as retrieval.py
does). Queries are built by om_mcp.engine.search.parse_query: stop words and
date phrases out, remaining words OR-ed.

Rankings (SQL in pg_fts_rankings.py; tsv = setweight A/B/C of body/prev1/prev2, GIN-indexed):
  sqlite-plain      FTS5 bm25 over the message alone (the data README's baseline)
  sqlite-weighted   FTS5 bm25(1.0, 0.5, 0.4) over body, prev1, prev2 (the store today)
  pg-ts_rank        ts_rank('{0,0.4,0.5,1}', tsv, q); /log: normalization 1; _cd: ts_rank_cd
  pg-bm25-unnest    FTS5's bm25 exactly, per-column counts from unnest(tsvector) (slow)
  pg-bm25-rank      bm25 with each term's weighted count read by a one-term ts_rank, df
                    counted over the resource's matches
  pg-bm25-stats     the same with df, N and average length from per-resource counters, and
                    terms in over half the messages (floor idf) left out of the match
  pg-bm25-simple    pg-bm25-rank on the 'simple' configuration (no stemming, no stop words)

With --scale N it then builds N messages (LoCoMo turns repeated, as one
resource and as many resources of one conversation each) and prints the
median / p95 query time of each ranking, with GIN(tsv) and with a
GIN(resource_id, tsv) index (btree_gin), and the cost of an append that
keeps the counters pg-bm25-stats reads.
Data: LoCoMo (Maharana et al., ACL 2024), CC BY-NC 4.0, evaluation use only.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pg_fts_rankings as pg  # noqa: E402
from locomo_retrieval import CATEGORIES, load  # noqa: E402

from om_mcp.engine.search import CANDIDATES, Candidate, Query, parse_query, rerank  # noqa: E402
from om_mcp.testing.postgres_server import PostgresServer  # noqa: E402

KS = (5, 10, 20)
_TOKEN = re.compile(r"\w+", re.UNICODE)


@dataclass
class Doc:
    seq: int
    id: str
    thread_id: str
    resource_id: str
    created_at: datetime
    body: str
    prev1: str
    prev2: str

    @property
    def doclen(self) -> int:
        # FTS5 bm25's document length: every token of every column.
        return sum(len(_TOKEN.findall(t)) for t in (self.body, self.prev1, self.prev2))


def build_docs(conversations: list[dict], copies: int = 1, resource_per_copy: bool = False) -> list[Doc]:
    docs: list[Doc] = []
    for copy in range(copies):
        for conv in conversations:
            resource = f"{conv['id']}~{copy}" if resource_per_copy else conv["id"] if copies == 1 else "big"
            for thread_id, messages in conv["threads"]:
                prev = ("", "")
                for m in messages:
                    docs.append(Doc(len(docs) + 1, m["id"], f"{thread_id}~{copy}", resource,
                                    datetime.fromisoformat(m["created_at"]), m["content"], *prev))
                    prev = (m["content"], prev[0])
    return docs


# -- SQLite ------------------------------------------------------------------------------------


def sqlite_load(docs: list[Doc]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE docs (seq INTEGER PRIMARY KEY, resource_id TEXT)")
    db.execute("CREATE INDEX docs_by_resource ON docs(resource_id, seq)")
    tok = "tokenize = 'porter unicode61 remove_diacritics 2'"
    db.execute(f"CREATE VIRTUAL TABLE plain USING fts5(body, {tok})")
    db.execute(f"CREATE VIRTUAL TABLE weighted USING fts5(body, prev1, prev2, {tok})")
    db.executemany("INSERT INTO docs VALUES (?, ?)", [(d.seq, d.resource_id) for d in docs])
    db.executemany("INSERT INTO plain (rowid, body) VALUES (?, ?)", [(d.seq, d.body) for d in docs])
    db.executemany("INSERT INTO weighted (rowid, body, prev1, prev2) VALUES (?, ?, ?, ?)",
                   [(d.seq, d.body, d.prev1, d.prev2) for d in docs])
    db.commit()
    return db


def sqlite_search(db: sqlite3.Connection, table: str, resource: str, query: Query) -> list[tuple[int, float]]:
    if not query.match:
        return []
    rank = "bm25(weighted, 1.0, 0.5, 0.4)" if table == "weighted" else "bm25(plain)"
    rows = db.execute(
        f"SELECT {table}.rowid, {rank} AS r FROM {table} JOIN docs d ON d.seq = {table}.rowid"
        f" WHERE {table} MATCH ? AND d.resource_id = ? ORDER BY r LIMIT ?",
        (query.match, resource, CANDIDATES),
    ).fetchall()
    return [(seq, -score) for seq, score in rows]


# -- PostgreSQL ----------------------------------------------------------------------------------


def pg_rows(docs: list[Doc]) -> list[tuple]:
    return [(d.seq, d.id, d.thread_id, d.resource_id, d.created_at, d.body, d.prev1, d.prev2, d.doclen)
            for d in docs]


# -- evaluation ----------------------------------------------------------------------------------


def reranked(hits: list[tuple[int, float]], docs: dict[int, Doc], query: Query) -> list[int]:
    candidates = [Candidate(key=seq, score=score, thread_id=docs[seq].thread_id,
                            created_at=docs[seq].created_at, text=docs[seq].body) for seq, score in hits]
    return [c.key for c, _ in rerank(candidates, query)]


class Scores:
    def __init__(self):
        self.values: dict[tuple[str, str, int], list[float]] = defaultdict(list)

    def add(self, method: str, category: str, ranked_ids: list[str], evidence: list[str]) -> None:
        for k in KS:
            hit = len(set(ranked_ids[:k]) & set(evidence)) / len(evidence)
            self.values[(method, "all", k)].append(hit)
            self.values[(method, category, k)].append(hit)

    def mean(self, method: str, category: str, k: int) -> float:
        return 100 * statistics.mean(self.values[(method, category, k)])

    def count(self, method: str, category: str) -> int:
        return len(self.values[(method, category, KS[0])])


async def evaluate(conn, conversations: list[dict], now: datetime) -> Scores:
    docs = build_docs(conversations)
    by_seq = {d.seq: d for d in docs}
    lite = sqlite_load(docs)
    load_s = await pg.load(conn, "docs", pg_rows(docs), ("english", "simple"), composite=False)
    print(f"{len(docs)} messages; PostgreSQL load + GIN build {load_s:.2f} s")
    rankings = pg.rankings("docs")
    scores = Scores()
    for conv in conversations:
        for qa in conv["questions"]:
            query = parse_query(qa["question"], now)
            category = CATEGORIES.get(qa["category"], str(qa["category"]))
            runs = {name: sqlite_search(lite, name.split("-")[1], conv["id"], query)
                    for name in ("sqlite-plain", "sqlite-weighted")}
            for name, search in rankings.items():
                runs[name] = await search(conn, conv["id"], query)
            for name, hits in runs.items():
                scores.add(name, category, [by_seq[s].id for s, _ in hits], qa["evidence"])
                scores.add(name + " +rerank", category,
                           [by_seq[s].id for s in reranked(hits, by_seq, query)], qa["evidence"])
    return scores


def report(scores: Scores, focus: tuple[str, ...]) -> None:
    methods = list(dict.fromkeys(m for m, _, _ in scores.values))
    print(f"\nLoCoMo evidence recall@k, all categories (n={scores.count(methods[0], 'all')})")
    print(f"{'ranking':<28}" + "".join(f"{'R@' + str(k):>8}" for k in KS))
    for m in sorted(methods, key=lambda m: ("+rerank" in m, methods.index(m))):
        print(f"{m:<28}" + "".join(f"{scores.mean(m, 'all', k):>8.1f}" for k in KS))
    print("\nper category, R@5 / R@10 / R@20")
    print(f"{'category':<13}{'n':>5}" + "".join(f"{m:>24}" for m in focus))
    for category in ["all", *CATEGORIES.values()]:
        n = scores.count(focus[0], category)
        if n:
            cells = "".join(f"{' / '.join(f'{scores.mean(m, category, k):.1f}' for k in KS):>24}" for m in focus)
            print(f"{category:<13}{n:>5}{cells}")


# -- latency at scale ----------------------------------------------------------------------------------


def _ms(times: list[float]) -> str:
    ms = sorted(1000 * t for t in times)
    return f"{statistics.median(ms):>8.1f}{ms[int(0.95 * (len(ms) - 1))]:>8.1f}"


async def latency(conn, conversations: list[dict], scale: int, timed: int, now: datetime) -> None:
    per_copy = sum(len(m) for c in conversations for _, m in c["threads"])
    copies = max(1, round(scale / per_copy))
    questions = [(c["id"], parse_query(q["question"], now)) for c in conversations for q in c["questions"]][:timed]
    print(f"\nquery time at {copies * per_copy} messages, {len(questions)} questions, 400 candidates (ms)")
    print(f"{'layout, index (load + index build)':<48}{'ranking':<18}{'median':>8}{'p95':>8}")
    for layout, per_resource in (("1 resource", False), (f"{copies * len(conversations)} resources", True)):
        docs = build_docs(conversations, copies, resource_per_copy=per_resource)
        lite = sqlite_load(docs)
        for composite in (False, True):
            index = "GIN(resource_id, tsv)" if composite else "GIN(tsv)"
            load_s = await pg.load(conn, "big", pg_rows(docs), ("english",), composite)
            label = f"{layout}, {index} ({load_s:.0f} s)"
            for name, search in pg.rankings("big", simple=False).items():
                if name in ("pg-ts_rank/log", "pg-ts_rank_cd"):
                    continue
                times = []
                for conv_id, query in questions:
                    t0 = time.perf_counter()
                    await search(conn, f"{conv_id}~0" if per_resource else "big", query)
                    times.append(time.perf_counter() - t0)
                print(f"{label:<48}{name:<18}{_ms(times)}")
        times = []
        for conv_id, query in questions:
            t0 = time.perf_counter()
            sqlite_search(lite, "weighted", f"{conv_id}~0" if per_resource else "big", query)
            times.append(time.perf_counter() - t0)
        print(f"{layout + ', SQLite FTS5 (in process)':<48}{'sqlite-weighted':<18}{_ms(times)}")
    # The price of the counters pg-bm25-stats reads: one-message append transactions.
    extra = [(d.seq + 10_000_000, *r[1:]) for d, r in zip(docs[:300], pg_rows(docs[:300]))]
    plain = await pg.append_cost(conn, "big", extra[:150], counters=False)
    counted = await pg.append_cost(conn, "big", extra[150:], counters=True)
    print(f"\nappend one message (own transaction, ms): {_ms(plain)} without counters;"
          f" {_ms(counted)} with df/length counters")


async def run(args) -> None:
    import asyncpg

    conversations = load(Path(args.data))
    now = datetime.now(timezone.utc)
    with PostgresServer(settings={"max_parallel_workers_per_gather": "0"}) as server:
        print(f"PostgreSQL {server.install.version} ({server.install.source})")
        if not server.has_extension("btree_gin"):
            raise SystemExit("btree_gin is not available on this server")
        conn = await asyncpg.connect(server.url)
        await conn.execute("CREATE EXTENSION btree_gin")
        await conn.execute("SET client_min_messages = warning")  # stop-word-only queries NOTICE
        scores = await evaluate(conn, conversations, now)
        report(scores, ("sqlite-weighted", "pg-bm25-stats", "sqlite-weighted +rerank", "pg-bm25-stats +rerank"))
        if args.scale:
            await latency(conn, conversations, args.scale, args.timed, now)
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"))
    parser.add_argument("--scale", type=int, default=0, help="also time queries at this many messages")
    parser.add_argument("--timed", type=int, default=200, help="questions timed per ranking at --scale")
    anyio.run(run, parser.parse_args())


if __name__ == "__main__":
    main()
