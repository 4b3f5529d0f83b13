"""Recall, search mode: the best matches across the user's threads, as an index.

Each hit is one line: its id, role and a short window of its text around the words that found it, under a
line naming its thread and day (written again only when they change). That is enough to tell which hits
answer the question; the agent then reads those whole, with the messages around them, by id
(`recall cursor=<id> page=0`). detail="high" gives longer windows instead, for an agent that reads the
results without following them up. Measured on LoCoMo with `benchmarks/search_lab.py --tokens`: tokens per
result beside evidence recall (10 index lines: about a third of the 20 long lines they replace, the same
recall@10).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from om_mcp.engine.recall.query import RecallOut, RecallQuery
from om_mcp.engine.recall.render import fit_to_budget
from om_mcp.engine.results import SearchResult
from om_mcp.engine.search import Retrieval, parse_query

SNIPPET_CHARS = {"low": 60, "high": 160}
FOOTER = "\nRead one whole, with the messages around it: recall cursor=<id> page=0 limit=5."


def snippet(text: str, terms: Sequence[str], width: int = SNIPPET_CHARS["high"]) -> str:
    """A window of the text around the first query word found, on one line."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    lowered = flat.lower()
    hits = [m.start() for t in terms for m in [re.search(rf"\b{re.escape(t)}", lowered)] if m]
    start = max(0, min(hits) - width // 4) if hits else 0
    piece = flat[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(flat) else "")


def line(result: SearchResult, terms: Sequence[str], width: int = SNIPPET_CHARS["high"]) -> str:
    """One hit: `- [id] role: text` (its thread and day are on the header line above it)."""
    if result.source == "observation":
        when = result.created_at[:10] + (f", range {result.range}" if result.range else "")
        if result.retired:  # no longer in the log: the agent must not take it for the current fact
            retired = f"retired ({result.retired} by generation {result.retired_by}), id {result.id}, "
            return f"- observation ({retired}{when}): {snippet(result.snippet, terms, width)}"
        return f"- observation ({when}): {snippet(result.snippet, terms, width)}"
    return f"- [{result.message_id}] {result.role}: {snippet(result.snippet, terms, width)}"


def header(result: SearchResult) -> str:
    return f"thread {result.thread_id}, {result.created_at[:10]}:"


def blocks(results: Sequence[SearchResult], terms: Sequence[str], width: int) -> list[str]:
    """The hits best first, each under the header of its thread and day, which is written again only when it
    changes from the hit before (ids and thread ids are long: a line repeating them would cost most of it)."""
    out, place = [], None
    for result in results:
        text = line(result, terms, width)
        if result.source == "observation":
            out.append(text)
            place = None
            continue
        if (result.thread_id, result.created_at[:10]) != place:
            text = f"{header(result)}\n{text}"
            place = (result.thread_id, result.created_at[:10])
        out.append(text)
    return out


def render(
    results: Sequence[SearchResult], terms: Sequence[str], detail: str, budget: int, count: Callable[[str], int]
) -> RecallOut:
    """The search result as the agent reads it, within `budget` tokens."""
    kept, truncated, _ = fit_to_budget(blocks(results, terms, SNIPPET_CHARS[detail]), budget - count(FOOTER), count)
    if not kept:
        return RecallOut(mode="search", text='No matches. Try other distinctive words, or mode="threads".')
    return RecallOut(mode="search", text="\n".join(kept) + FOOTER, count=len(kept), truncated=truncated)


async def search(
    retrieval: Retrieval, q: RecallQuery, resource_id: str, budget: int, count: Callable[[str], int]
) -> RecallOut:
    query = q.query or ""
    terms = parse_query(query).terms
    if not terms:
        return RecallOut(mode="search", text="The query has no searchable words: use a few distinctive words.")
    results = await retrieval.search(
        resource_id, query, thread_id=q.thread_id if q.scope == "thread" else None, limit=q.size
    )
    return render(results, terms, q.detail, budget, count)
