"""Observation text made ready for the acting agent.

Two steps, both pure functions of the text (and of `now`):
1. compact: drop the 🟡/🟢 markers (only 🔴 and ✅ change how the agent should
   weigh a line), drop bracketed labels, collapse blank lines and runs of spaces;
2. relative times: the agent reasons badly about absolute dates, so each Date
   line gets "(5 days ago)", long pauses between days get a "[3 weeks later]" line,
   and resolved dates in a line ("(meaning 2026-05-12)") get their distance from
   now, plus a warning when a plan's date has already passed.
The stored log is never changed; this is done on every read.
"""

from __future__ import annotations

import re
from datetime import date, datetime

# --------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------

_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ]
    )
    for name in names
}
_WEEKDAY = r"(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)[a-z]*\.?,?\s+"
_ISO = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$")
_MONTH_FIRST = re.compile(r"^([a-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})$")
_DAY_FIRST = re.compile(r"^(\d{1,2})(?:st|nd|rd|th)?\s+([a-z]+)\.?,?\s+(\d{4})$")


def parse_date(text: str) -> date | None:
    """A calendar date from "May 15, 2023", "Monday, May 15 2023", "15 May 2023" or
    "2023-05-15"; None for anything else."""
    s = re.sub(rf"^{_WEEKDAY}", "", text.strip().lower())
    y = m = d = None
    if match := _ISO.match(s):
        y, m, d = (int(g) for g in match.groups())
    elif match := _MONTH_FIRST.match(s):
        m, d, y = _MONTHS.get(match.group(1)), int(match.group(2)), int(match.group(3))
    elif match := _DAY_FIRST.match(s):
        d, m, y = int(match.group(1)), _MONTHS.get(match.group(2)), int(match.group(3))
    if y is None or m is None or d is None:
        return None
    try:
        return date(y, m, d)
    except (TypeError, ValueError):
        return None


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}" + ("" if n == 1 else "s")


def _months_between(earlier: date, later: date) -> int:
    months = (later.year - earlier.year) * 12 + later.month - earlier.month
    if later.day < earlier.day:
        months -= 1
    return months


def _span(earlier: date, later: date) -> str:
    """How far apart two dates are, in the largest unit that fits: "3 days", "2 weeks"."""
    days = (later - earlier).days
    if days < 7:
        return _plural(days, "day")
    months = _months_between(earlier, later)
    if months < 1:
        return _plural(days // 7, "week")
    if months < 12:
        return _plural(months, "month")
    return _plural(months // 12, "year")


def relative_phrase(then: date, now: date) -> str:
    """ "today", "yesterday", "5 days ago", "3 weeks ago", "in 2 months", ..."""
    if isinstance(then, datetime):
        then = then.date()
    if isinstance(now, datetime):
        now = now.date()
    days = (now - then).days
    if days == 0:
        return "today"
    if days == 1:
        return "yesterday"
    if days == -1:
        return "tomorrow"
    if days > 0:
        return f"{_span(then, now)} ago"
    return f"in {_span(now, then)}"


def gap_phrase(earlier: date, later: date) -> str:
    """The gap line between two Date headers: "[3 weeks later]"."""
    return f"[{_span(earlier, later)} later]"


# --------------------------------------------------------------------------------------
# Compaction
# --------------------------------------------------------------------------------------

_DROPPED_MARKERS = re.compile(r"[🟡🟢]\ufe0f? ?")
# A label is a short bracketed tag such as "[Group 3]" or "[Tool]". Not a label: a
# Markdown link ("[docs](https://...)"), a reference "[1]: ...", anything with
# punctuation inside (placeholders like "[Image #1: x.png]" carry a colon), the
# parser's "[truncated]" note, and anything starting with a digit (gap lines such
# as "[3 weeks later]", "[12 items collapsed]").
_LABEL = re.compile(r"\[(?!truncated\])[A-Za-z][A-Za-z0-9 _#-]{0,40}\](?![(:\[])")
_INNER_SPACES = re.compile(r"(?<=\S)[ \t]{2,}")
_BLANK_RUNS = re.compile(r"\n{3,}")


def compact_observations(text: str) -> str:
    """Fewer tokens, same facts: see the module docstring."""
    out = []
    for line in text.replace("\r\n", "\n").split("\n"):
        line = _DROPPED_MARKERS.sub("", line)
        line = _LABEL.sub("", line)
        line = _INNER_SPACES.sub(" ", line).rstrip()
        out.append(line)
    return _BLANK_RUNS.sub("\n\n", "\n".join(out)).strip("\n")


# --------------------------------------------------------------------------------------
# Relative times
# --------------------------------------------------------------------------------------

_DATE_HEADER = re.compile(r"^([ \t]*Date:[ \t]*)(.+?)[ \t]*$", re.IGNORECASE)
_ANNOTATION = re.compile(r"\((meaning|estimated)\s+([^()]+?)\)", re.IGNORECASE)
# Words that mark a line as a plan rather than a report; a plan whose date has
# passed most likely happened, and the agent should know that.
_FUTURE_INTENT = re.compile(
    r"\b(will|won't|shall|going to|gonna|plans? to|planning|planned|intends? to|intending to|"
    r"scheduled|expects? to|expecting to|hopes? to|wants? to|about to|aims? to|set to|"
    r"upcoming|booked|due to)\b",
    re.IGNORECASE,
)
# A thread section starts its own timeline; no gap line across sections.
_SECTION_EDGE = re.compile(r"^[ \t]*</?thread\b", re.IGNORECASE)


def _annotate(line: str, today: date) -> str:
    def repl(m: re.Match[str]) -> str:
        when = parse_date(m.group(2))
        if when is None:
            return m.group(0)  # vague or already annotated: leave as written
        note = relative_phrase(when, today)
        if when < today and _FUTURE_INTENT.search(line):
            note += ", likely already happened"
        return f"({m.group(1)} {m.group(2).strip()} - {note})"

    return _ANNOTATION.sub(repl, line)


def add_relative_times(text: str, now: datetime | date) -> str:
    """Relative times on Date lines and resolved dates, and gap lines between days."""
    today = now.date() if isinstance(now, datetime) else now
    out: list[str] = []
    previous: date | None = None
    for line in text.split("\n"):
        if _SECTION_EDGE.match(line):
            previous = None
            out.append(line)
            continue
        header = _DATE_HEADER.match(line)
        if header:
            when = parse_date(header.group(2))
            if when is not None:
                if previous is not None and (when - previous).days > 1:
                    out.append(gap_phrase(previous, when))
                previous = when
                out.append(f"{header.group(1)}{header.group(2)} ({relative_phrase(when, today)})")
                continue
        out.append(_annotate(line, today))
    return "\n".join(out)


def prepare_observations_for_context(text: str, now: datetime | date) -> str:
    """Compact the log, then add relative times (see the module docstring)."""
    if not text or not text.strip():
        return ""
    return add_relative_times(compact_observations(text), now)
