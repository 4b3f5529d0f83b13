"""Ranking the messages the index found: the lexical score of a message and
the signals that lift it. Measured on LoCoMo (benchmarks/search_lab.py).

- Each message is scored with the two messages before it in its thread as
  weaker fields of one document (BM25F): a reply is found by the words of the
  question it answers. The two messages after each match are scored too.
- A query word counts once per message however many of its forms match, by
  its best form: the exact word outranks an inflection, which outranks a
  related term.
- A thread whose messages match well lifts all its messages a little, and
  more when its messages together cover more of the query's words (memory
  questions are usually about one conversation).
- A message written inside a date the query names, or by a person the query
  names, or shaped like the answer ("when" -> it mentions a time), gets a
  multiplicative boost; a message that is itself a question a small penalty.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from om_mcp.engine.search.query import Query, answer_shaped, idf, words
from om_mcp.store.search import TermStats, TextHit

FIELD_WEIGHTS = (1.0, 0.5, 0.4)  # the message, the one before it, the one before that
K1 = 1.2
B = 0.75
THREAD_BLEND = 0.15  # share of the best score given according to the thread's strength
THREAD_TOP = 3  # a thread's strength: the sum of its 3 best message scores
COVERAGE_BOOST = 1.0  # x (1 + this x the share of the query's weight the thread's matches cover)
DATE_BOOST = 0.5
AUTHOR_BOOST = 0.1
QUESTION_PENALTY = 0.1  # a message that only asks (ends with "?") rarely holds the answer it mirrors
SHAPE_BOOST = 0.2  # a message shaped like the wanted answer: a time for "when", a number for "how many"

_AUTHOR = re.compile(r"^\s*([^\W\d_][\w .'\-]{0,40}?):\s")


@dataclass(frozen=True)
class Ranked:
    hit: TextHit
    score: float


def author_of(hit: TextHit) -> str | None:
    """The named speaker: the metadata's, else the body's "Name: " prefix."""
    if hit.metadata:
        try:
            meta = json.loads(hit.metadata)
        except ValueError:
            meta = None
        if isinstance(meta, dict) and isinstance(meta.get("speaker") or meta.get("name"), str):
            return meta.get("speaker") or meta.get("name")
    match = _AUTHOR.match(hit.body or "")
    return match.group(1) if match else None


class _Doc:
    __slots__ = ("hit", "length", "counts")

    def __init__(self, hit: TextHit, forms: dict):
        tokens = words(hit.body or "")
        self.hit = hit
        self.length = len(tokens)
        counts: dict[str, int] = {}
        for token in tokens:
            if token in forms:
                counts[token] = counts.get(token, 0) + 1
        self.counts = counts


def _candidates(docs: list[_Doc]) -> list[tuple[_Doc, list[_Doc]]]:
    """Each match and the two messages after it, with the (up to) two messages
    before each (the fetched rows of a thread are consecutive around a match),
    and the two messages before a match, scored alone."""
    by_thread: dict[str, list[_Doc]] = defaultdict(list)
    for doc in docs:  # hits arrive ordered by seq
        by_thread[doc.hit.thread_id].append(doc)
    out = []
    for rows in by_thread.values():
        for i, doc in enumerate(rows):
            near_match = any(rows[j].hit.score > 0 for j in range(max(0, i - 2), i))
            if doc.hit.score > 0 or near_match:
                out.append((doc, rows[max(0, i - 2) : i][::-1]))
            elif any(rows[j].hit.score > 0 for j in range(i + 1, min(len(rows), i + 3))):
                out.append((doc, []))  # fetched as a match's context: its own words only (what precedes it is unknown)
    return out


def lexical(hits: list[TextHit], query: Query, stats: TermStats) -> list[tuple[TextHit, float, set[int]]]:
    """(hit, BM25F score, indexes of the query terms its own words match) for each candidate."""
    if not hits or not query.terms:
        return []
    rows = max(stats.rows, 1)
    # form -> [(term index, form weight, weight x IDF)]; forms absent from the index never count
    counted: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    for index, term in enumerate(query.terms):
        for form, weight in term.forms.items():
            if form in stats.df:
                counted[form].append((index, weight, weight * idf(stats.df[form], rows)))
    avg = max(stats.avg_words, 1.0) * len(FIELD_WEIGHTS)
    docs = [_Doc(h, counted) for h in hits]
    scored = []
    n_terms = len(query.terms)
    for doc, before in _candidates(docs):
        tf = [0.0] * n_terms
        best = [0.0] * n_terms
        own = set()
        length = doc.length
        for field_weight, field in zip(FIELD_WEIGHTS, [doc, *before]):
            if field is not doc:
                length += field.length
            for form, count in field.counts.items():
                for index, weight, weighted_idf in counted[form]:
                    tf[index] += field_weight * weight * count
                    if weighted_idf > best[index]:
                        best[index] = weighted_idf
                    if field is doc:
                        own.add(index)
        norm = K1 * (1 - B + B * length / avg)
        score = sum(b * t * (K1 + 1) / (t + norm) for t, b in zip(tf, best) if t)
        if score > 0:
            scored.append((doc.hit, score, own))
    return scored


def rank(hits: list[TextHit], query: Query, stats: TermStats) -> list[Ranked]:
    """Best first: BM25F, plus a share for a strong thread, times the thread's
    coverage of the query, the date and the author boosts."""
    scored = lexical(hits, query, stats)
    if not scored:
        return []
    rows = max(stats.rows, 1)
    term_weight = [
        max((w * idf(stats.df[f], rows) for f, w in t.forms.items() if f in stats.df), default=0.0) for t in query.terms
    ]
    total_weight = sum(term_weight) or 1.0
    by_thread: dict[str, list[float]] = defaultdict(list)
    covered: dict[str, set[int]] = defaultdict(set)
    for hit, score, own in scored:
        by_thread[hit.thread_id].append(score)
        covered[hit.thread_id] |= own
    strength = {t: sum(sorted(s, reverse=True)[:THREAD_TOP]) for t, s in by_thread.items()}
    strongest = max(strength.values()) or 1.0
    best = max(score for _, score, _ in scored)
    names = set(query.words)
    ranked = []
    for hit, score, _ in scored:
        score += THREAD_BLEND * best * strength[hit.thread_id] / strongest
        coverage = sum(term_weight[i] for i in covered[hit.thread_id]) / total_weight
        score *= 1 + COVERAGE_BOOST * coverage
        if query.dates and any(d.contains(_when(hit.created_at)) for d in query.dates):
            score *= 1 + DATE_BOOST
        if query.asks and SHAPE_BOOST and answer_shaped(query.asks, hit.body or ""):
            score *= 1 + SHAPE_BOOST
        if QUESTION_PENALTY and hit.body.rstrip().endswith("?"):
            score *= 1 - QUESTION_PENALTY
        author = author_of(hit)
        if author and names.intersection(words(author)):
            score *= 1 + AUTHOR_BOOST
        ranked.append(Ranked(hit, score))
    # Ties are broken by what a message is, not where it sits in this file: a moved memory ranks alike.
    ranked.sort(key=lambda r: (r.hit.created_at, r.hit.thread_id, r.hit.body), reverse=True)  # newer first
    ranked.sort(key=lambda r: -r.score)
    return ranked


def _when(created_at: str) -> datetime:
    try:
        return datetime.fromisoformat(created_at)
    except ValueError:
        return datetime.min
