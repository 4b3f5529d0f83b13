"""Message search: a question becomes weighted words (query.py, expand.py), the
index finds candidates (om_mcp.store.sqlite.fts), and they are ranked
(rank.py), optionally blended with vector similarity (hybrid.py).

`search` runs the whole lexical path on one connection; the store calls it on
its database thread inside a read transaction:

    ranked = search(conn, resource_id, "what database do I use", limit=20)
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

from om_mcp.engine.search.expand import related
from om_mcp.engine.search.hybrid import blend
from om_mcp.engine.search.query import DateSpan, Query, Term, find_dates, fold, parse_query, words
from om_mcp.engine.search.rank import Ranked, author_of, rank
from om_mcp.store.sqlite import fts

FTS_HITS = 50  # index matches fetched and re-ranked per query (with the context around each)


def search(
    conn: sqlite3.Connection, resource_id: str, text: str, *, thread_id: str | None = None, limit: int = 20,
    now: datetime | None = None, query: Query | None = None,
) -> list[Ranked]:
    """The best `limit` messages of a resource (or one thread) for a question; [] when it has no searchable words."""
    query = query or parse_query(text, now)
    if not query.terms:
        return []
    stats = fts.term_stats(conn, query.forms())
    # A date the query names: its messages compete on all the words, not only the rare ones.
    windows = [w for w in (fts.seq_window(conn, resource_id, d.start.isoformat(), d.end.isoformat())
                           for d in query.dates if d.kind == "range") if w]
    hits = fts.search(
        conn, resource_id, query.weighted_match(stats.df, stats.rows), thread_id=thread_id,
        limit=max(FTS_HITS, limit), windows=windows,
        window_match=query.weighted_match(stats.df, stats.rows, budget=fts.WINDOW_ROWS) if windows else (),
    )
    return rank(hits, query, stats)[:limit]


def index_text(parts: list[dict], metadata: dict | None = None) -> str:
    """The searchable text of a message (messages.body); a named speaker is kept as a "Name: " prefix."""
    from om_mcp.engine.messages import message_text

    text = message_text(parts)
    speaker = (metadata or {}).get("speaker") or (metadata or {}).get("name")
    return f"{speaker}: {text}" if speaker and not text.startswith(f"{speaker}:") else text


__all__ = [
    "FTS_HITS", "DateSpan", "Query", "Ranked", "Term", "author_of", "blend", "find_dates", "fold", "index_text",
    "parse_query", "rank", "related", "search", "words",
]

# The old engine (memory.py, retrieval.py) still imports the old module's names
# from here until the integration replaces it; legacy.py is the old search.py, unchanged.
from om_mcp.engine.search import legacy as _legacy  # noqa: E402

CANDIDATES = _legacy.CANDIDATES
COLUMN_WEIGHTS = _legacy.COLUMN_WEIGHTS
Candidate = _legacy.Candidate
rerank = _legacy.rerank
