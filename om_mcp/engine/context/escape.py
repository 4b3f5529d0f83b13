"""The one neutralising step for text we did not write, before a model or the agent reads it.

Observation text comes from a model that read the conversation; a message, a working
memory note, a thread title or a project's folder name comes from anyone. Each could
carry `</observations><current-task>...` and end one of our blocks early, writing
instructions of its own into the agent's context or the Observer's prompt. So every
such text passes `neutralise` on its way into a prompt or a context: each of our
section tags, anywhere, and any tag that starts a line (the sections a model's answer
is read by count only there, an extractor's tag included) get a look-alike `‹` for
their `<`, which no parser reads as a tag and a reader still understands.

`defuse` is the narrow form for a fence around text we composed ourselves (our own
`<thread>` sections inside): only the fence's own tag is neutralised there.
"""

from __future__ import annotations

import re

from om_mcp.privacy import scrub

SECTION_TAGS = (
    "observations",
    "current-task",
    "suggested-response",
    "thread-title",
    "working-memory",
    "working_memory",
    "schema",
    "other-conversations",
    "other-conversation",
    "system-reminder",
    "thread",
    "extracted",
    "conversation",
    "previous-observations",
    "memory-log",
    "edits",
    "user-memory",
    "archive",
)
LOOK_ALIKE = "‹"
_LINE_START_TAG = re.compile(r"^([ \t]*)<(?=/?[A-Za-z!?])", re.MULTILINE)
_PATTERNS: dict[tuple[str, ...], re.Pattern[str]] = {}


def _tags(names: tuple[str, ...]) -> re.Pattern[str]:
    if names not in _PATTERNS:
        _PATTERNS[names] = re.compile(r"<(/?)\s*(" + "|".join(re.escape(t) for t in names) + r")\b", re.IGNORECASE)
    return _PATTERNS[names]


def neutralise(text: str, extra_tags: tuple[str, ...] = ()) -> str:
    """`text` with our section tags (and `extra_tags`, e.g. an extractor's) and every
    line-initial tag made inert."""
    text = _tags((*SECTION_TAGS, *extra_tags)).sub(lambda m: f"{LOOK_ALIKE}{m.group(1)}{m.group(2)}", text)
    return _LINE_START_TAG.sub(rf"\1{LOOK_ALIKE}", text)


def defuse(text: str, tag: str) -> str:
    """Only `tag` made inert: for a fence around text whose parts were neutralised already."""
    return _tags((tag,)).sub(lambda m: f"{LOOK_ALIKE}{m.group(1)}{m.group(2)}", text)


EXCERPT_CHARS = 120
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """A short, quoted, one-line excerpt of text someone else wrote (a model's answer),
    fit to show in a status or a log: secrets out (the built-in rules), control characters
    out, our tags neutralised."""
    flat = " ".join(_CONTROL.sub(" ", scrub(None, text)[0]).split())  # before it is cut: a cut secret still leaks
    if len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return f"“{neutralise(flat)}”" if flat else "nothing"
