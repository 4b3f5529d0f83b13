"""Lexical search: what a message puts in the index, how any user string becomes
a safe FTS5 query, and the re-ranking that turns BM25 hits into memory hits.

Every query word is quoted, so FTS5 syntax in user input (quotes, `*`, `-`,
NEAR, AND/OR/NOT, parentheses, column filters) is plain text. Date phrases in
the query ("in May 2023", "on 8 May", "last June") are not matched as words:
they become intervals that boost messages written then.

Ranking, measured on LoCoMo (see benchmarks/locomo_retrieval.py):
- each message is indexed with the two messages before it in its thread, at
  lower weight, so an answer is found by the words of the question it answers;
- a thread whose messages match well lifts all its messages a little (memory
  questions are usually about one conversation);
- a message written inside a date the query names, or by a person the query
  names, gets a multiplicative boost.
"""

from __future__ import annotations

import calendar
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from om_mcp.engine.messages import message_text

COLUMN_WEIGHTS = (1.0, 0.5, 0.4)  # the message, the one before it, the one before that
CANDIDATES = 400  # BM25 hits re-ranked per query
THREAD_BLEND = 0.15  # share of the best score given according to the thread's strength
THREAD_TOP = 3  # a thread's strength: the sum of its 3 best message scores
DATE_BOOST = 0.5
DATE_SLACK_DAYS = 1
AUTHOR_BOOST = 0.1
MAX_TERMS = 32

_WORD = re.compile(r"\w+", re.UNICODE)
_AUTHOR = re.compile(r"^\s*([^\W\d_][\w .'\-]{0,40}?):\s")

STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him
    his himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom
    this that that'll these those am is are was were be been being have has had having do does did doing a an the
    and but if or because as until while of at by for with about against between into through during before after
    above below to from up down in out on off over under again further then once here there when where why how all
    any both each few more most other some such no nor not only own same so than too very s t can will just don
    don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn
    hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn
    shouldn't wasn wasn't weren weren't won won't wouldn wouldn't""".split()
)


def index_text(parts: list[dict], metadata: dict | None = None) -> str:
    """The searchable text of a message; a named speaker is kept as a prefix."""
    text = message_text(parts)
    speaker = (metadata or {}).get("speaker") or (metadata or {}).get("name")
    return f"{speaker}: {text}" if speaker and not text.startswith(f"{speaker}:") else text


# -- dates in queries -------------------------------------------------------------------

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MON = r"(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_DATE_FORMS = [
    ("day-month-year", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MON}\.?,?\s*{_YEAR}\b", re.I)),
    ("month-day-year", re.compile(rf"\b{_MON}\.?\s+{_DAY},?\s*{_YEAR}\b", re.I)),
    ("month-year", re.compile(rf"\b{_MON}\.?,?\s+(?:of\s+)?{_YEAR}\b", re.I)),
    ("day-month", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MON}\b", re.I)),
    ("month-day", re.compile(rf"\b{_MON}\s+{_DAY}\b", re.I)),
    ("year", re.compile(rf"\b{_YEAR}\b", re.I)),
    ("last-month", re.compile(rf"\blast\s+{_MON}\b", re.I)),
    ("month", re.compile(rf"\b(?:in|during|of|early|late|mid)\s+{_MON}\b", re.I)),
]


@dataclass(frozen=True)
class DateSpan:
    """A time the query names: an absolute range, or a day/month of any year."""

    start: datetime
    end: datetime | None
    kind: str  # range | day | month

    def contains(self, when: datetime, slack_days: int = DATE_SLACK_DAYS) -> bool:
        when = when.replace(tzinfo=None)
        slack = timedelta(days=slack_days)
        if self.kind == "range":
            return self.start - slack <= when <= self.end + slack
        if self.kind == "day":
            return when.month == self.start.month and abs(when.day - self.start.day) <= slack_days
        return when.month == self.start.month


def _month_range(year: int, month: int) -> DateSpan:
    last = calendar.monthrange(year, month)[1]
    return DateSpan(datetime(year, month, 1), datetime(year, month, last, 23, 59, 59), "range")


def _span(form: str, groups: tuple[str, ...], now: datetime | None) -> DateSpan | None:
    if form in ("day-month-year", "month-day-year"):
        day, month, year = (groups[0], groups[1], groups[2]) if form == "day-month-year" else (groups[1], groups[0], groups[2])
        start = datetime(int(year), _MONTHS[month.lower()], int(day))
        return DateSpan(start, start + timedelta(days=1), "range")
    if form == "month-year":
        return _month_range(int(groups[1]), _MONTHS[groups[0].lower()])
    if form in ("day-month", "month-day"):
        day, month = (groups[0], groups[1]) if form == "day-month" else (groups[1], groups[0])
        return DateSpan(datetime(2000, _MONTHS[month.lower()], int(day)), None, "day")
    if form == "year":
        year = int(groups[0])
        return DateSpan(datetime(year, 1, 1), datetime(year, 12, 31, 23, 59, 59), "range")
    month = _MONTHS[groups[0].lower()]
    if form == "last-month" and now is not None:
        return _month_range(now.year if month < now.month else now.year - 1, month)
    return DateSpan(datetime(2000, month, 1), None, "month")


def find_dates(query: str, now: datetime | None = None) -> tuple[list[DateSpan], str]:
    """The dates a query names, and the query with those phrases blanked out."""
    spans: list[DateSpan] = []
    taken = [False] * len(query)
    for form, pattern in _DATE_FORMS:
        for match in pattern.finditer(query):
            if any(taken[match.start():match.end()]):
                continue
            try:
                span = _span(form, match.groups(), now)
            except (ValueError, KeyError):
                continue
            if span is None:
                continue
            spans.append(span)
            for i in range(match.start(), match.end()):
                taken[i] = True
    rest = "".join(" " if t else c for c, t in zip(query, taken))
    return spans, rest


# -- the query ---------------------------------------------------------------------------


@dataclass
class Query:
    terms: list[str]
    dates: list[DateSpan]

    @property
    def match(self) -> str:
        """An FTS5 MATCH expression OR-ing the quoted terms ('' when there are none)."""
        return " OR ".join('"' + t.replace('"', '""') + '"' for t in self.terms)


def parse_query(text: str, now: datetime | None = None) -> Query:
    dates, rest = find_dates(text or "", now)
    terms: list[str] = []
    for word in _WORD.findall(rest.lower()):
        if word in STOP_WORDS or not word.strip("_") or word in terms:
            continue
        terms.append(word)
        if len(terms) >= MAX_TERMS:
            break
    return Query(terms, dates)


# -- re-ranking ----------------------------------------------------------------------------


@dataclass
class Candidate:
    key: object
    score: float  # -bm25: larger is better
    thread_id: str
    created_at: datetime | None
    text: str
    author: str | None = None


def author_of(candidate: Candidate) -> str | None:
    if candidate.author:
        return candidate.author
    match = _AUTHOR.match(candidate.text or "")
    return match.group(1) if match else None


def rerank(candidates: list[Candidate], query: Query) -> list[tuple[Candidate, float]]:
    """Best first: BM25, plus a share for a strong thread, times date and author boosts."""
    if not candidates:
        return []
    by_thread: dict[str, list[float]] = defaultdict(list)
    for c in candidates:
        by_thread[c.thread_id].append(c.score)
    strength = {t: sum(sorted(scores, reverse=True)[:THREAD_TOP]) for t, scores in by_thread.items()}
    strongest = max(strength.values()) or 1.0
    best = max(c.score for c in candidates)
    terms = set(query.terms)
    ranked = []
    for c in candidates:
        score = c.score + THREAD_BLEND * best * strength[c.thread_id] / strongest
        if query.dates and c.created_at is not None and any(d.contains(c.created_at) for d in query.dates):
            score *= 1 + DATE_BOOST
        author = author_of(c)
        if author and terms.intersection(_WORD.findall(author.lower())):
            score *= 1 + AUTHOR_BOOST
        ranked.append((c, score))
    ranked.sort(key=lambda pair: -pair[1])
    return ranked
