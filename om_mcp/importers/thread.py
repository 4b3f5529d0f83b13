"""What every importer yields: one conversation as a thread with its messages.

`messages` are plain dicts that validate as the `append_messages` input model
(`om_mcp.messages.MessageIn`): id, role, content (a list of parts),
created_at (ISO-8601 with a time zone) and metadata. Ids come from the export,
so importing the same export twice finds the same thread and message ids and
adds nothing (the store dedups by (thread_id, id)).
"""

from __future__ import annotations

import json
import mimetypes
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from om_mcp.importers._stream import MAX_ELEMENT_CHARS, Unreadable, iter_array, open_export

# An attachment's extracted text is kept as a text part up to this many
# characters: enough for notes and code files, while a 300-page PDF does not
# flood the Observer. The cut is marked in the text and counted in metadata.
ATTACHMENT_TEXT_LIMIT = 20_000


@dataclass
class ImportedThread:
    id: str
    title: str | None
    created_at: str | None
    updated_at: str | None
    messages: list[dict[str, Any]]
    metadata: dict[str, Any] = field(default_factory=dict)
    # What was deliberately left out, by reason (also copied into metadata["import"]).
    skipped: Counter = field(default_factory=Counter)


@dataclass
class Refused:
    """A conversation that cannot be imported, named as far as the export allows."""

    index: int
    id: str | None  # the thread id it would have had
    title: str | None
    reason: str


Convert = Callable[[dict[str, Any], int], ImportedThread]
Progress = Callable[[int], None]  # bytes of the export file read so far


def conversations(
    path: str | Path,
    convert: Convert,
    name: Callable[[dict[str, Any], int], tuple[str | None, str | None]],
    source: str,
    *,
    max_chars: int = MAX_ELEMENT_CHARS,
    progress: Progress | None = None,
) -> Iterator[ImportedThread | Refused]:
    """Each conversation of an export, converted; one that is too big, not valid JSON, not
    shaped as `source` writes them, or not an object is a `Refused`, and the rest go on.
    `name(raw, index)` gives a conversation's (thread id, title), from its top-level fields."""
    with open_export(path) as export:
        for index, raw in enumerate(iter_array(export.text, where=str(path), key="conversations", max_chars=max_chars)):
            if progress is not None:
                progress(export.position())
            if isinstance(raw, Unreadable):
                yield Refused(index, *name(raw.fields, index), raw.reason)
            elif not isinstance(raw, dict):
                yield Refused(index, None, None, f"a JSON {type(raw).__name__}, not an object")
            else:
                try:
                    yield convert(raw, index)
                except (AttributeError, TypeError, ValueError, KeyError, IndexError, RecursionError) as error:
                    what = f"{type(error).__name__}: {error}"[:200]
                    yield Refused(index, *_name(name, raw, index), f"not shaped like a {source} conversation ({what})")


def _name(
    name: Callable[[dict[str, Any], int], tuple[str | None, str | None]], raw: dict, index: int
) -> tuple[str | None, str | None]:
    try:
        ident, title = name(raw, index)
    except (AttributeError, TypeError, ValueError):
        return None, None
    return ident, title if isinstance(title, str) else None


def iso_from_text(value: Any) -> str | None:
    """An ISO string from the export, normalised (naive = UTC); None if unusable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.isoformat()


def iso_from_epoch(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(value, tz=UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def guess_mime(name: str | None, default: str = "application/octet-stream") -> str:
    if name:
        guessed, _ = mimetypes.guess_type(name, strict=False)
        if guessed:
            return guessed
    return default


def attachment_text(name: str | None, mime: str | None, text: str, limit: int) -> tuple[str, bool]:
    """A text part's text for an attachment's extracted content, cut at `limit`."""
    cut = len(text) > limit
    body = text[:limit]
    if cut:
        body += f"\n[... {len(text) - limit} more characters of this attachment were not imported]"
    label = ", ".join(x for x in (mime,) if x)
    head = f"[attachment {name or 'unnamed'}{f' ({label})' if label else ''}]"
    return f"{head}\n{body}", cut


def finish(thread: ImportedThread, source: str, source_id: str) -> ImportedThread:
    """Record where the thread came from and what was left out, in its metadata."""
    thread.metadata["import"] = {
        "source": source,
        "conversation_id": source_id,
        "messages": len(thread.messages),
        **({"skipped": dict(sorted(thread.skipped.items()))} if thread.skipped else {}),
    }
    return thread


MAX_ID_CHARS = 200
MAX_TITLE_CHARS = 500
TRIM_NOTE = "\n[... {count:,} more characters were not imported: the message was over the size limit]"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def fit(thread: ImportedThread, max_message_chars: int) -> int:
    """Make the conversation importable as a whole: a message over `max_message_chars`
    (its parts as JSON) has its longest texts cut, with a note; a message id seen before in
    the conversation gets a `~2`, `~3` suffix (the same on every run); a title becomes one
    line of at most MAX_TITLE_CHARS. Returns how many messages were cut (also counted in
    `skipped["message_cut"]`); one that cannot be cut to size is left out ("too_big")."""
    if thread.title is not None:
        thread.title = " ".join(_CONTROL.sub(" ", str(thread.title)).split())[:MAX_TITLE_CHARS] or None
    seen: Counter[str] = Counter()
    kept, cut = [], 0
    for message in thread.messages:
        ident = str(message.get("id") or "")[:MAX_ID_CHARS]
        if ident:
            seen[ident] += 1
            if seen[ident] > 1:
                suffix = f"~{seen[ident]}"
                ident = ident[: MAX_ID_CHARS - len(suffix)] + suffix
            message["id"] = ident
        trimmed = _trim(message["content"], max_message_chars)
        if trimmed is None:
            thread.skipped["too_big"] += 1
            continue
        if trimmed:
            cut += 1
        kept.append(message)
    thread.messages = kept
    if cut:
        thread.skipped["message_cut"] += cut
    return cut


def _trim(parts: list[dict[str, Any]], limit: int) -> bool | None:
    """Cut the longest strings of `parts` until their JSON fits `limit`: True if cut, None if impossible."""
    size = _size(parts)
    if size <= limit:
        return False
    for _ in range(len(parts) * 3 + 3):
        fields = [(part, key) for part in parts for key in ("text", "result", "args") if part.get(key)]
        if not fields:
            return None
        part, key = max(fields, key=lambda f: _size(f[0][f[1]]))
        value = part[key] if isinstance(part[key], str) else json.dumps(part[key], ensure_ascii=False)
        keep = max(0, len(value) - (size - limit) - len(TRIM_NOTE) - 16)
        part[key] = value[:keep] + TRIM_NOTE.format(count=len(value) - keep)
        size = _size(parts)
        if size <= limit:
            return True
    return None


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False))
