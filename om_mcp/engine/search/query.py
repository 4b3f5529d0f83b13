"""How a user's question becomes search terms.

- Words are folded like the index folds them (lower case, no diacritics) and
  every form is quoted in the MATCH expression, so FTS5 syntax in user input
  (quotes, `*`, `-`, NEAR, AND/OR/NOT, parentheses, column filters) is text.
- Stop words are dropped. The index holds exact words (no stemmer), and each
  query word brings its inflections (use -> uses, used, using; went -> go) at
  a lower weight, so the exact word ranks first and a short stem can never
  match an unrelated word (use no longer finds "us").
- Related terms (expand.py) join at a lower weight still.
- Date phrases ("in May 2023", "on 8 May", "last June") are not words: they
  become intervals that boost messages written then.
"""

from __future__ import annotations

import calendar
import math
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from om_mcp.engine.search.expand import irregular_forms, related

INFLECTION_WEIGHT = 0.8  # another form of the query word, relative to the word itself
RELATED_WEIGHT = 0.4  # a related term (times its own closeness from expand.py)
MAX_WORDS = 32
MIN_LEMMA = 3  # shorter stems are not expanded: "us" is not a form of "use"
MATCH_BUDGET = 3_000  # rows the candidate query may score; rarer forms go first (keeps large stores fast)

WORD = re.compile(r"[^\W_]+", re.UNICODE)  # unicode61: letters and digits; "_" separates

STOP_WORDS = frozenset(
    """i me my myself we us our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him
    his himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom
    this that that'll these those am is are was were be been being have has had having do does did doing a an the
    and but if or because as until while of at by for with about against between into through during before after
    above below to from up down in out on off over under again further then once here there when where why how all
    any both each few more most other some such no nor not only own same so than too very s t can will just don
    don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn
    hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn
    shouldn't wasn wasn't weren weren't won won't wouldn wouldn't""".split()
)


def fold(text: str) -> str:
    """Lower case without diacritics, as the index's tokenizer stores words."""
    text = text.lower()
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


# ASCII text, the common case, is split without the regex: every byte but a letter or a digit separates
# words, as `WORD` splits it (and unicode61 indexes it); twice as fast over a search's candidates.
_SEPARATORS = bytes(c if chr(c).isalnum() else 32 for c in range(256))


def words(text: str) -> list[str]:
    text = text.lower()
    if text.isascii():
        return text.encode().translate(_SEPARATORS).decode().split()
    return WORD.findall(fold(text))


# -- inflections ---------------------------------------------------------------------------

_VOWELS = frozenset("aeiou")


def _doubles(lemma: str) -> bool:
    """One-syllable consonant-vowel-consonant words double their last letter (stop -> stopped)."""
    return (
        len(lemma) >= 3
        and len(re.findall(r"[aeiouy]+", lemma)) == 1
        and lemma[-1] not in "aeiouwxy"
        and lemma[-2] in _VOWELS
        and lemma[-3] not in _VOWELS
    )


def inflections(lemma: str) -> set[str]:
    """The regular -s / -ed / -ing forms of a base word."""
    if lemma.endswith("y") and len(lemma) > 2 and lemma[-2] not in _VOWELS:
        return {lemma, lemma[:-1] + "ies", lemma[:-1] + "ied", lemma + "ing"}
    if lemma.endswith(("s", "x", "z", "ch", "sh")):
        return {lemma, lemma + "es", lemma + "ed", lemma + "ing"}
    if lemma.endswith("e"):
        return {lemma, lemma + "s", lemma + "d", lemma[:-1] + "ing"}
    if _doubles(lemma):
        return {lemma, lemma + "s", lemma + lemma[-1] + "ed", lemma + lemma[-1] + "ing"}
    return {lemma, lemma + "s", lemma + "ed", lemma + "ing"}


def lemmas(word: str) -> set[str]:
    """Base words the word can be a regular form of (itself included); a
    candidate counts only if inflecting it gives the word back."""
    found = {word}
    n = len(word)
    if n > 3 and word.endswith("ies"):
        found.add(word[:-3] + "y")
    elif n > 3 and word.endswith("es"):
        found.add(word[:-2])
    if n > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        found.add(word[:-1])
    for suffix in ("ed", "ing"):
        if n >= len(suffix) + 2 and word.endswith(suffix):
            base = word[: -len(suffix)]
            found.update((base, base + "e"))
            if len(base) > 2 and base[-1] == base[-2]:
                found.add(base[:-1])
            if suffix == "ed" and base.endswith("i"):
                found.add(base[:-1] + "y")
    return {w for w in found if w == word or (len(w) >= MIN_LEMMA and word in inflections(w))}


def forms_of(word: str) -> set[str]:
    """The word and its other forms (regular and irregular)."""
    out = {word} | irregular_forms(word)
    for lemma in lemmas(word) - {word} or {word}:
        if len(lemma) >= MIN_LEMMA:
            out |= inflections(lemma) | irregular_forms(lemma)
    return {f for f in out if f == word or f not in STOP_WORDS}


# -- dates in queries ------------------------------------------------------------------------

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MON = (
    r"(january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"
)
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
DATE_SLACK_DAYS = 1


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
            assert self.end is not None  # a range always has an end
            return self.start - slack <= when <= self.end + slack
        if self.kind == "day":
            return when.month == self.start.month and abs(when.day - self.start.day) <= slack_days
        return when.month == self.start.month


def _month_range(year: int, month: int) -> DateSpan:
    last = calendar.monthrange(year, month)[1]
    return DateSpan(datetime(year, month, 1), datetime(year, month, last, 23, 59, 59), "range")


def _span(form: str, groups: tuple[str, ...], now: datetime | None) -> DateSpan | None:
    if form in ("day-month-year", "month-day-year"):
        if form == "day-month-year":
            day, month, year = groups[0], groups[1], groups[2]
        else:
            month, day, year = groups[0], groups[1], groups[2]
        start = datetime(int(year), _MONTHS[month.lower()], int(day))
        return DateSpan(start, start + timedelta(days=1), "range")
    if form == "month-year":
        return _month_range(int(groups[1]), _MONTHS[groups[0].lower()])
    if form in ("day-month", "month-day"):
        day, month = (groups[0], groups[1]) if form == "day-month" else (groups[1], groups[0])
        return DateSpan(datetime(2000, _MONTHS[month.lower()], int(day)), None, "day")
    if form == "year":
        whole = int(groups[0])
        return DateSpan(datetime(whole, 1, 1), datetime(whole, 12, 31, 23, 59, 59), "range")
    named = _MONTHS[groups[0].lower()]
    if form == "last-month" and now is not None:
        return _month_range(now.year if named < now.month else now.year - 1, named)
    return DateSpan(datetime(2000, named, 1), None, "month")


def find_dates(query: str, now: datetime | None = None) -> tuple[list[DateSpan], str]:
    """The dates a query names, and the query with those phrases blanked out."""
    spans: list[DateSpan] = []
    taken = [False] * len(query)
    for form, pattern in _DATE_FORMS:
        for match in pattern.finditer(query):
            if any(taken[match.start() : match.end()]):
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


# -- the query ---------------------------------------------------------------------------------


class Term(str):
    """One query word (the string itself) and the index words that count for it, with their weights."""

    forms: dict[str, float]

    def __new__(cls, word: str, forms: dict[str, float]) -> Term:
        term = super().__new__(cls, word)
        term.forms = forms
        return term

    @property
    def word(self) -> str:
        return str(self)


# What kind of answer the question wants, and how a message that could hold it looks.
_ASKS = {
    "time": re.compile(r"^\W*(when|what (year|month|day|date|time)|which (year|month|day)|how long ago)\b", re.I),
    "count": re.compile(r"^\W*how (many|much|often)\b", re.I),
}
ANSWER_SHAPES = {
    "time": re.compile(
        r"\b(yesterday|today|tonight|tomorrow|ago|last|next|this (week|month|year|weekend)|weekend|since|until"
        r"|(mon|tues|wednes|thurs|fri|satur|sun)day|january|february|march|april|may|june|july|august|september"
        r"|october|november|december|\d{4}|\d{1,2}(st|nd|rd|th)|morning|evening|night|week|month|year)\b",
        re.I,
    ),
    "count": re.compile(
        r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|once|twice|several|few|many|dozen)\b", re.I
    ),
}


# The same shapes for ASCII text lowered first: matching without re.IGNORECASE is four times faster
# (a search tries a shape on each of its candidates), and for ASCII text it finds the same.
_ASCII_SHAPES = {kind: re.compile(shape.pattern) for kind, shape in ANSWER_SHAPES.items()}


def answer_shaped(kind: str, text: str) -> bool:
    """Does `text` look like the answer a question of kind `kind` ("time", "count") wants?"""
    if text.isascii():
        return _ASCII_SHAPES[kind].search(text.lower()) is not None
    return ANSWER_SHAPES[kind].search(text) is not None


@dataclass
class Query:
    terms: list[Term]
    dates: list[DateSpan] = field(default_factory=list)
    asks: str | None = None  # "time" or "count": the answer's shape (ANSWER_SHAPES)

    @property
    def words(self) -> list[str]:
        return [t.word for t in self.terms]

    def forms(self) -> list[str]:
        """Every index word the query may match, each once."""
        return list(dict.fromkeys(f for t in self.terms for f in t.forms))

    def date_ranges(self) -> list[tuple[str, str]]:
        """The absolute time ranges the query names, as [start, end) ISO times."""
        return [(d.start.isoformat(), d.end.isoformat()) for d in self.dates if d.kind == "range" and d.end]

    @property
    def match(self) -> str:
        """Every form, OR-ed: one MATCH expression for the whole query."""
        return _or(self.forms())

    def weighted_match(self, df: dict[str, int], rows: int, budget: int = MATCH_BUDGET) -> list[tuple[str, float]]:
        """One (MATCH expression, weight) per query word, for the candidate query.

        Forms absent from the index are left out, and the rarest forms are
        taken until `budget` rows would be read: a very common word then only
        re-ranks the candidates the rarer words found. A word's weight is the
        IDF of its rarest present form.
        """
        present = sorted((f for f in self.forms() if df.get(f)), key=lambda f: df[f])
        kept: set[str] = set()
        total = 0
        for form in present:
            if kept and total + df[form] > budget:
                break
            kept.add(form)
            total += df[form]
        out = []
        for term in self.terms:
            forms = [f for f in term.forms if f in kept]
            if forms:
                weight = max(term.forms[f] * idf(df[f], rows) for f in forms)
                out.append((_or(forms), round(weight, 4)))
        return out


def idf(df: int, rows: int) -> float:
    return math.log(1 + (max(rows, df) - df + 0.5) / (df + 0.5))


def _or(forms: list[str]) -> str:
    return " OR ".join('"' + f.replace('"', '""') + '"' for f in forms)


def parse_query(text: str, now: datetime | None = None, *, expand: bool = True) -> Query:
    dates, rest = find_dates(text or "", now)
    seen: list[str] = []
    for word in words(rest):
        if word not in STOP_WORDS and word not in seen:
            seen.append(word)
        if len(seen) >= MAX_WORDS:
            break
    terms = []
    for word in seen:
        forms = {word: 1.0}
        for form in sorted(forms_of(word)):
            forms.setdefault(form, INFLECTION_WEIGHT)
        if expand:
            for other, closeness in related(word, lemmas(word)).items():
                # the related word and its plural: kinds and members are mostly nouns
                for form in sorted(f for f in inflections(other) if f == other or f.endswith("s")):
                    forms.setdefault(form, RELATED_WEIGHT * closeness)
        terms.append(Term(word, forms))
    asks = next((kind for kind, pattern in _ASKS.items() if pattern.search(text or "")), None)
    return Query(terms, dates, asks)
