"""What a reflection retires: every line of the log it covered that is not in the new log.

Nothing a reflection drops is lost. Each line of the covered groups that the new log does
not carry word for word goes onto the retired pile (store/retired.py) as a group of its own:
its Date line, the line with its sub-bullets, its group's range and thread, the reason and
the hash of the line that took its place. Recall's search finds it there, marked retired,
and `om-mcp restore --line` brings it back.

The reason is known when the Reflector answered with edits (dropped, merged, superseded:
engine/observation/edits.py). A rewrite says nothing of the kind, so a line that shares most
of its words (two at least) with a line of the new log counts as merged into it, and the rest
as dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from om_mcp.engine.observation import lines
from om_mcp.store import Group, NewGroup

MERGED_SHARE = 0.5  # of a line's words found in one line of the new log: merged into it
MERGED_WORDS = 2  # and at least this many of them (one shared word says little)
_WORD = re.compile(r"[^\W_]{3,}")
_TIME = re.compile(r"^\d+$")

Reason = tuple[str, str | None]  # (why, hash of the line that took its place)


@dataclass(frozen=True)
class Entry:
    """A line of the log with its sub-bullets, under its Date line."""

    date: str | None
    text: str  # the line and its sub-bullets
    head: str  # the line alone
    hash: str


def norm(text: str) -> str:
    return " ".join(text.split())


def entries(text: str) -> list[Entry]:
    """The top-level lines of a group's text (each with its sub-bullets), and its sub-bullets
    on their own, each under the Date line above it."""
    found = lines.lines(text)
    out: list[Entry] = []
    date: str | None = None
    for i, line in enumerate(found):
        if line.hash is None:
            if lines.is_header(line.text):
                date = line.text.strip()
            continue
        depth = _indent(line.text)
        block = [line.text]
        for below in found[i + 1 :]:
            if below.hash is None or _indent(below.text) <= depth:
                break
            block.append(below.text)
        out.append(Entry(date, "\n".join(block), line.text, line.hash))
    return out


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if not _TIME.match(w)}


def retired_lines(
    covered: Iterable[Group],
    new_texts: Iterable[str],
    count: Callable[[str], int],
    reasons: dict[str, Reason] | None = None,
) -> list[NewGroup]:
    """The lines of `covered` that the new log (`new_texts`) does not hold, as groups of the
    retired pile. `reasons`: why each went (by its text, whitespace collapsed), from edits;
    a line without one is merged (into the line of the new log sharing most of its words) or dropped."""
    kept = {norm(t) for text in new_texts for t in text.splitlines() if t.strip()}
    candidates: list[tuple[set[str], str]] | None = None
    out: list[NewGroup] = []
    for group in covered:
        gone: set[str] = set()  # lines retired with their parent line
        for entry in entries(group.text):
            head = norm(entry.head)
            if head in kept or head in gone:
                continue
            for sub in entry.text.splitlines()[1:]:
                gone.add(norm(sub))
            why = (reasons or {}).get(head)
            if why is None:
                if candidates is None:
                    candidates = [(words(t), t) for t in kept]
                why = _guess(entry.head, candidates)
            text = f"{entry.date}\n{_dedent(entry.text)}" if entry.date else _dedent(entry.text)
            out.append(
                NewGroup(
                    text=text,
                    tokens=count(text),
                    first_seq=group.first_seq,
                    last_seq=group.last_seq,
                    first_message_id=group.first_message_id,
                    last_message_id=group.last_message_id,
                    thread_id=group.thread_id,
                    kind=group.kind,
                    observed_at=group.observed_at,
                    retired_reason=why[0],
                    replaced_by=why[1],
                )
            )
    return out


def _guess(line: str, candidates: list[tuple[set[str], str]]) -> Reason:
    mine = words(line)
    if not mine:
        return "dropped", None
    best, share = None, 0.0
    for theirs, text in candidates:
        common = len(mine & theirs)
        if common >= MERGED_WORDS and common / len(mine) > share:
            best, share = text, common / len(mine)
    if best is not None and share >= MERGED_SHARE:
        return "merged", lines.line_hash(best)
    return "dropped", None


def _dedent(text: str) -> str:
    """A sub-bullet retired on its own starts its line; the lines under it keep their depth below it."""
    rows = text.splitlines()
    cut = _indent(rows[0]) if rows else 0
    if not cut:
        return text
    return "\n".join(row[cut:] if row[:cut].isspace() else row.lstrip() for row in rows)
