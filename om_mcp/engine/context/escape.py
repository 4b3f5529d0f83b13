"""Model-written text must not forge our own sections.

Observation text comes from a model that read the conversation; a model that
copies `</observations><current-task>...` from it could otherwise end our block
early and write instructions of its own into the agent's context. Every tag we
use to frame the agent's context is neutralised inside text we did not write.
"""

from __future__ import annotations

import re

SECTION_TAGS = (
    "observations",
    "current-task",
    "suggested-response",
    "working-memory",
    "working_memory",
    "schema",
    "other-conversations",
    "other-conversation",
    "system-reminder",
    "thread",
    "extracted",
)
_TAG = re.compile(r"<(/?)\s*(" + "|".join(re.escape(t) for t in SECTION_TAGS) + r")\b", re.IGNORECASE)


def neutralise(text: str, extra_tags: tuple[str, ...] = ()) -> str:
    """Replace the `<` of our section tags (and `extra_tags`) with a look-alike that no parser reads as a tag."""
    pattern = (
        _TAG
        if not extra_tags
        else re.compile(
            r"<(/?)\s*(" + "|".join(re.escape(t) for t in (*SECTION_TAGS, *extra_tags)) + r")\b", re.IGNORECASE
        )
    )
    return pattern.sub(lambda m: f"‹{m.group(1)}{m.group(2)}", text)


EXCERPT_CHARS = 120
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """A short, quoted, one-line excerpt of text someone else wrote (a model's answer),
    fit to show in a status or a log: control characters out, our tags neutralised."""
    flat = " ".join(_CONTROL.sub(" ", text).split())
    if len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return f"“{neutralise(flat)}”" if flat else "nothing"
