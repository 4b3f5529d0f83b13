"""Observation lines and their ids: how one line of the log is named, removed or replaced.

A group has an id (16 hex characters, `Group.id`). A line of a group is named by the
group's id, a dot and the first 6 hex characters of the SHA-256 of the line's text
with its whitespace collapsed: `3f9a0c1d2e4b5a6c.7e21ab`; `om-mcp show` prints the 6 hex
under the group's id, and every command and tool takes that short form too when it names one
line (the engine looks it up, and refuses an ambiguous one naming the full ids). The id depends only on the
line's own words, so it is the same in every render (`om-mcp show`, the observations
resource, the status page) and stays valid when other lines are forgotten; changing
the line (an edit) gives it a new id. Two identical lines in one group share an id,
and forgetting it removes both.

Lines that only structure the log have no id: `Date:` headers, `<thread>` tags and
blank lines. A line's sub-bullets (the indented lines under it) belong to it: they go
when it is forgotten. A Date header left with nothing under it goes too.

A line corrected by the user ends in `[user-stated]`: the Reflector is told to keep such
lines as they are, and a reflection that drops one gets it back (`keep_user_stated`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from om_mcp.store.scrub import fold

USER_STATED = "[user-stated]"
GROUP_ID = re.compile(r"^[0-9a-f]{16}$")
LINE_ID = re.compile(r"^([0-9a-f]{16})\.([0-9a-f]{6})$")
SHORT_LINE_ID = re.compile(r"^[0-9a-f]{6}$")
_STRUCTURAL = re.compile(r"^\s*(?:date:\s|</?thread\b)", re.I)
# The start of an observation line: indent, bullet, priority marker, (HH:MM) time.
_PREFIX = re.compile(
    r"^(?P<indent>\s*)(?P<bullet>[*-]\s+)?(?P<marker>(?:🔴|🟡|🟢|✅)\s*)?(?P<time>\(\d{1,2}:\d{2}\)\s*)?"
)


@dataclass(frozen=True)
class Line:
    index: int
    text: str
    hash: str | None  # None for structural lines

    def id(self, group_id: str) -> str:
        return f"{group_id}.{self.hash}"


def line_hash(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:6]


def is_structural(text: str) -> bool:
    return not text.strip() or bool(_STRUCTURAL.match(text))


def lines(text: str) -> list[Line]:
    return [Line(i, t, None if is_structural(t) else line_hash(t)) for i, t in enumerate(text.splitlines())]


def addressable(group_id: str, text: str) -> list[tuple[str, str]]:
    """(line id, line text) of each line that has an id, in order."""
    return [(line.id(group_id), line.text) for line in lines(text) if line.hash is not None]


def observation_lines(group_id: str, text: str) -> list[tuple[str | None, str]]:
    """(line id or None, line text) of every line of a group, as the views show them."""
    return [(line.id(group_id) if line.hash is not None else None, line.text) for line in lines(text)]


def parse_id(value: str) -> tuple[str, str | None] | None:
    """(group id, line hash or None) of an observation id, or None when it is no form of one. A short
    line id (the 6 hex `om-mcp show` prints under its group) gives an empty group id: the caller
    looks the line up."""
    value = value.strip().lower()
    if GROUP_ID.match(value):
        return value, None
    if SHORT_LINE_ID.match(value):
        return "", value
    found = LINE_ID.match(value)
    return (found.group(1), found.group(2)) if found else None


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def remove(text: str, doomed: Callable[[Line], bool]) -> tuple[str, int]:
    """The text without the lines `doomed` picks (with their sub-bullets), and how many it picked.
    Date headers and thread sections left empty go too."""
    found = lines(text)
    keep = [True] * len(found)
    removed = 0
    i = 0
    while i < len(found):
        line = found[i]
        if line.hash is not None and keep[i] and doomed(line):
            removed += 1
            keep[i] = False
            depth = _indent(line.text)
            j = i + 1
            while j < len(found) and found[j].hash is not None and _indent(found[j].text) > depth:
                keep[j] = False
                j += 1
            i = j
            continue
        i += 1
    if not removed:
        return text, 0
    kept = [line.text for line, k in zip(found, keep) if k]
    return tidy(kept), removed


def tidy(kept: list[str]) -> str:
    """The lines left of a group, as its text: Date headers and thread sections left empty go."""
    return "\n".join(_drop_empty_headers(kept)).strip("\n")


def _drop_empty_headers(kept: list[str]) -> list[str]:
    """Date headers with no line before the next header (or the end), and empty <thread> sections."""
    out: list[str] = []
    for text in kept:
        stripped = text.strip().lower()
        if stripped.startswith("</thread"):
            while out and (is_header(out[-1]) or not out[-1].strip()):
                out.pop()
            if out and out[-1].strip().lower().startswith("<thread"):
                out.pop()
                continue
        elif is_header(text):
            while out and is_header(out[-1]):
                out.pop()
        out.append(text)
    while out and (is_header(out[-1]) or not out[-1].strip()):
        out.pop()
    return out


def is_header(text: str) -> bool:
    return text.strip().lower().startswith("date:")


def remove_hashes(text: str, hashes: Iterable[str]) -> tuple[str, int]:
    wanted = set(hashes)
    return remove(text, lambda line: line.hash in wanted)


def remove_containing(text: str, phrase: str) -> tuple[str, int]:
    """Lines that contain `phrase` (ignoring case and Unicode normalisation: `fold`), with their
    sub-bullets; a structural line holding it (a thread tag, say) is blanked instead, so no copy of
    the phrase is left."""
    needle = fold(phrase)
    out, removed = remove(text, lambda line: needle in fold(line.text))
    if needle in fold(out):
        kept = [t for t in out.splitlines() if needle not in fold(t)]
        removed += len(out.splitlines()) - len(kept)
        out = "\n".join(kept)
    return out, removed


def corrected(old: str, new: str) -> str:
    """The line that replaces `old` when the user says `new`: the old line's indent, bullet,
    priority marker and time unless `new` brings its own, and the user-stated mark."""
    new = " ".join(new.split())
    if new.endswith(USER_STATED):
        new = new[: -len(USER_STATED)].rstrip()
    prefix = _PREFIX.match(old)
    given = _PREFIX.match(new)
    assert prefix is not None and given is not None  # every group is optional
    indent, bullet, marker = prefix.group("indent"), prefix.group("bullet") or "* ", prefix.group("marker") or ""
    if given.group("bullet"):
        line = indent + new
    elif given.group("marker"):
        line = indent + bullet + new
    elif given.group("time"):
        line = indent + bullet + marker + new
    else:
        line = prefix.group(0) + new
    return f"{line} {USER_STATED}"


def replace(text: str, line_hash_: str, new_line: str) -> tuple[str, int]:
    """The text with every line of that hash replaced by `new_line` (its sub-bullets kept)."""
    found = lines(text)
    count = 0
    out = []
    for line in found:
        if line.hash == line_hash_:
            out.append(new_line)
            count += 1
        else:
            out.append(line.text)
    return ("\n".join(out), count) if count else (text, 0)


def is_user_stated(text: str) -> bool:
    return text.rstrip().endswith(USER_STATED)


def user_stated(text: str) -> list[str]:
    return [line.text for line in lines(text) if line.hash is not None and is_user_stated(line.text)]


def strip_prefix(text: str) -> str:
    """A line's words without its indent, bullet, priority marker and time."""
    found = _PREFIX.match(text)
    return text[found.end() :] if found else text


# What each priority marker means, in words: a view that cannot count on an emoji font shows these.
PRIORITIES = {"🔴": "high", "🟡": "medium", "🟢": "low", "✅": "done"}


@dataclass(frozen=True)
class LineParts:
    """One line of the log taken apart for a view: its indent, priority, time and words."""

    indent: int  # characters before the bullet: a sub-bullet's depth
    priority: str | None  # a PRIORITIES word, when the line has a marker
    time: str | None  # "HH:MM", when the line has one
    body: str  # the words after them; an edit given only these keeps the rest (`corrected`)


def line_parts(text: str) -> LineParts:
    found = _PREFIX.match(text)
    assert found is not None  # every group is optional
    marker = (found.group("marker") or "").strip()
    time = (found.group("time") or "").strip().strip("()")
    return LineParts(len(found.group("indent")), PRIORITIES.get(marker), time or None, text[found.end() :])
