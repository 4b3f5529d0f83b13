"""Recall, search mode: the best matches across the user's threads, as compact lines."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from om_mcp.engine.recall.query import RecallOut, RecallQuery
from om_mcp.engine.recall.render import fit_to_budget
from om_mcp.engine.results import SearchResult
from om_mcp.engine.search import Retrieval, parse_query

SNIPPET_CHARS = 160


def snippet(text: str, terms: Sequence[str], width: int = SNIPPET_CHARS) -> str:
    """A window of the text around the first query word found, on one line."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    lowered = flat.lower()
    hits = [m.start() for t in terms for m in [re.search(rf"\b{re.escape(t)}", lowered)] if m]
    start = max(0, min(hits) - width // 4) if hits else 0
    piece = flat[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(flat) else "")


def line(result: SearchResult, terms: Sequence[str]) -> str:
    when = result.created_at[:10]
    if result.source == "observation":
        return f"- observation ({when}, range {result.range}): {snippet(result.snippet, terms)}"
    return f"- [{result.message_id}] {result.role}, {when}, thread {result.thread_id}: {snippet(result.snippet, terms)}"


async def search(
    retrieval: Retrieval, q: RecallQuery, resource_id: str, budget: int, count: Callable[[str], int]
) -> RecallOut:
    query = q.query or ""
    terms = parse_query(query).terms
    if not terms:
        return RecallOut(mode="search", text="The query has no searchable words: use a few distinctive words.")
    results = await retrieval.search(
        resource_id, query, thread_id=q.thread_id if q.scope == "thread" else None, limit=q.limit
    )
    lines = [line(r, terms) for r in results]
    footer = "\nRead around a match: recall cursor=<id> (add target_thread_id=<thread> for another thread)."
    kept, truncated, _ = fit_to_budget(lines, budget - count(footer), count)
    if not kept:
        return RecallOut(mode="search", text='No matches. Try other distinctive words, or mode="threads".')
    return RecallOut(mode="search", text="\n".join(kept) + footer, count=len(kept), truncated=truncated)
