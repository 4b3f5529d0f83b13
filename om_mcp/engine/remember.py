"""Remember exactly this: a line the user states goes into the log word for word, with no model.

Three ways in, one kind of line:
- a `<remember>...</remember>` span in a user message, whichever way it came (the tools,
  a host's hook, `om-mcp ingest`, an import): every append calls `spans_of` in its own
  transaction with the messages it stored, and writes the lines it words there, so an
  acknowledged message has its line (and a re-sent one adds none);
- `om-mcp remember TEXT [--thread T | --resource R | --user]`;
- the `update_thread` tool's `remember` argument.

The line is high priority and user-stated, the notion `om-mcp edit` already has
(`lines.USER_STATED`): every reflection keeps it word for word. The message keeps what
the user wrote, span and all (recall finds it as it was said); the Observer reads the span
as a short note that it is already in memory, so the same fact is not recorded twice.

Only a user's own messages count: an assistant reply, a tool result or a file it read may
carry text someone else wrote, and "user-stated" must mean the user said it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from om_mcp.engine.errors import InputError
from om_mcp.store import Message, Remembered

# The log's wording (`observation.lines`, `observation.transcript`: zoneinfo and the prompts' text) is
# imported where a span is found, not here: every append passes through `remembered_in`, the host hook's
# too (one process a prompt), and almost no message has a span.

MAX_CHARS = 2000  # as for a correction (`om-mcp edit`): a line of the log, not a document
SPAN = re.compile(r"<remember>(.*?)</remember>", re.IGNORECASE | re.DOTALL)
# What the Observer reads in place of a span: the line is in its previous observations already.
FOR_OBSERVER = "[asked to remember this; already in memory, word for word]"


def said(text: str) -> str:
    """The words of one remembered line: whitespace collapsed, at most MAX_CHARS."""
    from om_mcp.engine.observation.lines import USER_STATED

    flat = " ".join(text.split())
    if flat.endswith(USER_STATED):
        flat = flat[: -len(USER_STATED)].rstrip()
    return flat if len(flat) <= MAX_CHARS else flat[: MAX_CHARS - 1].rstrip() + "…"


def spans(text: str) -> list[str]:
    """The remembered words of each `<remember>` span of a text (empty spans left out)."""
    return [words for found in SPAN.finditer(text) if (words := said(found.group(1)))]


def group_text(words: str, when: datetime) -> str:
    """The log text of one remembered line: its Date line, then the line, high priority and user-stated."""
    from om_mcp.engine.observation.lines import USER_STATED
    from om_mcp.engine.observation.transcript import date_header

    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return f"{date_header(when)}\n* 🔴 ({when:%H:%M}) {words} {USER_STATED}"


def spans_of(count: Callable[[str], int]) -> Callable[[Sequence[Message]], list[Remembered]]:
    """What an append calls, inside its transaction, with the messages it stored (re-sends are not
    among them): the lines their `<remember>` spans ask for, worded for the log."""

    def lines(stored: Sequence[Message]) -> list[Remembered]:
        return remembered_in(stored, count)

    return lines


def remembered_in(rows: Sequence[Message], count: Callable[[str], int]) -> list[Remembered]:
    """The lines the user's messages ask to be remembered, worded for the log."""
    out = []
    for row in rows:
        if row.role != "user":
            continue
        when = datetime.fromisoformat(row.created_at)
        for part in row.parts:
            if part.get("type") == "text":
                for words in spans(part.get("text", "")):
                    text = group_text(words, when)
                    out.append(Remembered(row.id, text, count(text)))
    return out


def for_observer(text: str) -> str:
    """A user message's text as the Observer reads it: each span a short note."""
    return SPAN.sub(FOR_OBSERVER, text)


def check(text: object, field: str = "text") -> str:
    """The words of a line given to remember (the command, the tool): one non-empty string."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{field} must be a non-empty string", field=field)
    if len(text) > MAX_CHARS:
        raise InputError(f"{field} is {len(text)} characters; the limit is {MAX_CHARS}", field=field)
    return said(text)
