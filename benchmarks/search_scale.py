"""Search latency and storage at scale, on synthetic messages.

    python benchmarks/search_scale.py [--sizes 10000,100000,1000000] [--queries 300] [--dir DIR]

For each size it builds one database with the store's `messages` table and
the search index (om_mcp.store.sqlite.fts), plus, for comparison, a plain
FTS5 table over the same text (porter stemmer, bm25). Every query runs both
ways in turn, and the medians are printed:
- plain: `SELECT rowid FROM plain WHERE plain MATCH <terms OR-ed> ORDER BY bm25(plain) LIMIT 20`
  (stop words removed), the baseline the search must stay within 1.5x of;
- search: om_mcp.engine.search.search(), the whole path (parse, term
  statistics, candidates with their context in one statement, re-rank), top 20
  of the largest resource.
Bytes per message count the `messages` table, its indexes and the search
index (not the comparison table), against the UTF-8 bytes of the bodies.

Messages: ~214 bytes of Zipf-distributed words (the LoCoMo vocabulary when its
file is present, else a built-in one, plus a synthetic long tail), 100 per
thread, 90% in one resource and the rest spread over 9. Ids are realistic:
"msg_" + 32 hex digits, UUID thread ids, ISO timestamps. The queries are
LoCoMo's questions when the file is there, else sampled words.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import os
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search_lab import search  # noqa: E402

from om_mcp.engine.search.query import STOP_WORDS  # noqa: E402
from om_mcp.store.sqlite import fts  # noqa: E402

MESSAGES = """
CREATE TABLE messages (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, thread_id TEXT NOT NULL, resource_id TEXT NOT NULL,
  role TEXT NOT NULL, body TEXT NOT NULL, parts TEXT, created_at TEXT NOT NULL, metadata TEXT,
  tokens INTEGER NOT NULL, UNIQUE (thread_id, id));
CREATE INDEX messages_by_thread ON messages(thread_id, seq);
"""
PLAIN = "CREATE VIRTUAL TABLE plain USING fts5(body, tokenize = 'porter unicode61 remove_diacritics 2')"
BASIC = """the and to I a you it that of in is my for was so with have it's me we on be but this
just it's that's what like really about all your they are at do can it get had been I'm great one some time love
much how our out know think when more going new good too day feel things also make want there work family kids
friends trip week year home life fun amazing happy"""
THREAD = 100
WORD = re.compile(r"[^\W_]+")


def _locomo() -> Path | None:
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared/data/locomo/locomo_dev.json"
        if candidate.exists():
            return candidate
    return None


def corpus(seed: int = 7) -> tuple[list[str], list[str]]:
    """(vocabulary by frequency, queries)."""
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    queries: list[str] = []
    data = _locomo()
    if data:
        for sample in json.loads(data.read_text()):
            for key, turns in sample["conversation"].items():
                if key.startswith("session_") and isinstance(turns, list):
                    for turn in turns:
                        for word in re.findall(r"[A-Za-z']+", turn["text"]):
                            counts[word] = counts.get(word, 0) + 1
            queries += [qa["question"] for qa in sample["qa"]]
    else:
        for i, word in enumerate(BASIC.split()):
            counts[word] = 1000 - i
    vocab = sorted(counts, key=lambda w: -counts[w])
    syllables = "ka lo mi ter an vo re sit bel gra on pu zen dor fi mar ex nu ra tio".split()
    tail: set[str] = set()
    while len(tail) < 60_000:
        tail.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    vocab += sorted(tail)
    if not queries:
        queries = [" ".join(rng.choice(vocab[50:3000]) for _ in range(4)) for _ in range(300)]
    return vocab, queries


SHORT_IDS = False  # --short-ids: "m<n>" / "t<n>" instead of "msg_<32 hex>" / UUIDs


def messages(n: int, vocab: list[str], seed: int = 11):
    rng = random.Random(seed)
    cum = list(itertools.accumulate(1 / (i + 1) ** 1.05 for i in range(len(vocab))))
    top = cum[-1]
    resources = ["user-0"] + [f"user-{i}" for i in range(1, 10)]
    thread = resource = None
    for i in range(n):
        if i % THREAD == 0:
            thread = f"t{i // THREAD}" if SHORT_IDS else str(uuid.UUID(int=rng.getrandbits(128)))
            resource = resources[0] if rng.random() < 0.9 else rng.choice(resources[1:])
        size = max(3, int(rng.gauss(36, 18)))
        body = " ".join(vocab[bisect.bisect(cum, rng.random() * top)] for _ in range(size))
        stamp = f"2025-{1 + i * 12 // n:02d}-{1 + i % 28:02d}T12:{i % 60:02d}:00.{i % 999999:06d}+00:00"
        message_id = f"m{i}" if SHORT_IDS else f"msg_{rng.getrandbits(128):032x}"
        yield message_id, thread, resource, "user" if i % 2 else "assistant", body, stamp, len(body) // 4


def build(path: Path, n: int, vocab: list[str]) -> float:
    if path.exists():
        path.unlink()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(MESSAGES)
    for statement in fts.SCHEMA:
        conn.execute(statement)
    conn.execute(PLAIN)
    started = time.perf_counter()
    batch = []
    for row in messages(n, vocab):
        batch.append(row)
        if len(batch) == 5000:
            _insert(conn, batch)
            batch = []
    if batch:
        _insert(conn, batch)
    took = time.perf_counter() - started
    conn.execute("INSERT INTO plain (plain) VALUES ('optimize')")
    conn.execute(f"INSERT INTO {fts.TABLE} ({fts.TABLE}) VALUES ('optimize')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
    conn.close()
    return took


def _insert(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    conn.execute("BEGIN")
    first = None
    for row in rows:
        seq = conn.execute(
            "INSERT INTO messages (id, thread_id, resource_id, role, body, created_at, tokens) VALUES (?,?,?,?,?,?,?)",
            row,
        ).lastrowid
        first = first or seq
    seqs = list(range(first, seq + 1))
    fts.index_messages(conn, seqs)
    conn.executemany(
        "INSERT INTO plain (rowid, body) SELECT seq, body FROM messages WHERE seq = ?", [(s,) for s in seqs]
    )
    conn.execute("COMMIT")


def sizes(conn: sqlite3.Connection) -> dict[str, int]:
    rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    out = {"messages": 0, "search index": 0, "other": 0}
    for name, size in rows:
        if name.startswith("plain"):
            continue
        if name.startswith(fts.TABLE):
            out["search index"] += size
        elif name.startswith(("messages", "sqlite_autoindex_messages")):
            out["messages"] += size
        else:
            out["other"] += size
    return out


def measure(path: Path, queries: list[str]) -> dict:
    conn = sqlite3.connect(path)
    n = conn.execute("SELECT MAX(seq) FROM messages").fetchone()[0]
    text = conn.execute("SELECT SUM(LENGTH(CAST(body AS BLOB))) FROM messages").fetchone()[0]
    plain_times, search_times = [], []
    for i, question in enumerate(queries * 2):  # the first pass warms the cache and is not counted
        terms = [w for w in dict.fromkeys(WORD.findall(question.lower())) if w not in STOP_WORDS]
        if not terms:
            continue
        match = " OR ".join(f'"{t}"' for t in terms)
        # Both runs are called below, in this same iteration: no late binding (B023).
        runs = [
            (
                "plain",
                lambda: conn.execute(
                    "SELECT rowid FROM plain WHERE plain MATCH ? ORDER BY bm25(plain) LIMIT 20",
                    (match,),  # noqa: B023
                ).fetchall(),
            ),
            ("search", lambda: search(conn, "user-0", question, limit=20)),  # noqa: B023
        ]
        if i % 2:
            runs.reverse()
        for name, run in runs:
            t0 = time.perf_counter()
            run()
            if i >= len(queries):
                (plain_times if name == "plain" else search_times).append(time.perf_counter() - t0)
    parts = sizes(conn)
    conn.close()
    return {
        "n": n,
        "text": text,
        "plain": statistics.median(plain_times) * 1000,
        "search": statistics.median(search_times) * 1000,
        "search_p95": sorted(search_times)[int(0.95 * (len(search_times) - 1))] * 1000,
        **parts,
    }


def purge_cost(path: Path) -> tuple[float, float]:
    """Seconds to forget one thread and to purge (optimize) after it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA secure_delete = ON")
    thread = conn.execute("SELECT thread_id FROM messages ORDER BY seq DESC LIMIT 1").fetchone()[0]
    conn.execute("BEGIN")
    t0 = time.perf_counter()
    fts.forget_thread(conn, thread)
    conn.execute("DELETE FROM messages WHERE thread_id = ?", (thread,))
    forget = time.perf_counter() - t0
    t0 = time.perf_counter()
    fts.purge(conn)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    purge = time.perf_counter() - t0
    conn.close()
    return forget, purge


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--dir", default=str(Path(tempfile.gettempdir()) / "om-search-scale"))
    parser.add_argument("--keep", action="store_true", help="reuse databases built by an earlier run")
    parser.add_argument("--purge", action="store_true", help="also time forget_thread + purge (changes the database)")
    parser.add_argument("--short-ids", action="store_true", help='short ids ("m1", "t1") to see what ids cost')
    args = parser.parse_args()
    global SHORT_IDS
    SHORT_IDS = args.short_ids
    vocab, queries = corpus()
    queries = random.Random(3).sample(queries, min(args.queries, len(queries)))
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    print(
        f"{'messages':>9} {'plain ms':>9} {'search ms':>10} {'ratio':>6} {'p95 ms':>7} {'B/msg':>7} {'x text':>7}"
        f" {'messages B':>11} {'index B':>8} {'build s':>8}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        path = folder / f"scale-{size}{'-short' if SHORT_IDS else ''}.db"
        took = float("nan")
        if not (args.keep and path.exists()):
            took = build(path, size, vocab)
        r = measure(path, queries)
        total = r["messages"] + r["search index"] + r["other"]
        print(
            f"{r['n']:>9} {r['plain']:>9.2f} {r['search']:>10.2f} {r['search'] / r['plain']:>6.2f}"
            f" {r['search_p95']:>7.2f} {total / r['n']:>7.1f} {total / r['text']:>7.2f}"
            f" {r['messages'] / r['n']:>11.1f} {r['search index'] / r['n']:>8.1f} {took:>8.1f}",
            flush=True,
        )
        if args.purge:
            forget, purge = purge_cost(path)
            print(f"{'':>9} forget_thread {forget * 1000:.1f} ms, purge (optimize + checkpoint) {purge:.2f} s")
        if not args.keep:
            os.remove(path)


if __name__ == "__main__":
    main()
