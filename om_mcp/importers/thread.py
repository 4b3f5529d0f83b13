"""What every importer yields: one conversation as a thread with its messages.

`messages` are plain dicts that validate as the `append_messages` input model
(`om_mcp.engine.messages.MessageIn`): id, role, content (a list of parts),
created_at (ISO-8601 with a time zone) and metadata. Ids come from the export,
so importing the same export twice finds the same thread and message ids and
adds nothing (the store dedups by (thread_id, id)).
"""

from __future__ import annotations

import mimetypes
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

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
