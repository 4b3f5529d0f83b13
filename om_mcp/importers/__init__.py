"""Bring conversation history in, and move a whole memory between databases.

- `claude_export.iter_conversations(path)` / `chatgpt_export.iter_conversations(path)`:
  a provider's data export (its `conversations.json`, or the `.zip`) as
  `ImportedThread`s, streamed; `iter_export(path)` picks the provider itself.
- `jsonl_format`: om-mcp's own versioned JSONL export of a memory.
- `openai_messages`: a JSONL of `{role, content}` chat messages (`om-mcp ingest --format openai-messages`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from om_mcp.importers._stream import ExportError, Unreadable, iter_array, open_export
from om_mcp.importers.openai_messages import ImportFormatError, parse_openai_messages, read_openai_messages
from om_mcp.importers.thread import ImportedThread, Progress, Refused

DETECT_ELEMENTS = 10  # conversations looked at to tell the exports apart

__all__ = [
    "ExportError",
    "ImportFormatError",
    "ImportedThread",
    "Refused",
    "detect_source",
    "iter_export",
    "parse_openai_messages",
    "read_openai_messages",
]


def detect_source(path: str | Path) -> str:
    """'claude' or 'chatgpt', from the first conversations' keys; ExportError otherwise."""
    with open_export(path) as export:
        seen = 0
        for seen, element in enumerate(iter_array(export.text, where=str(path), key="conversations"), 1):
            keys = (
                set(element.fields)
                if isinstance(element, Unreadable)
                else set(element)
                if isinstance(element, dict)
                else set()
            )
            if keys & {"chat_messages", "uuid"}:
                return "claude"
            if keys & {"mapping", "conversation_id", "title"}:
                return "chatgpt"
            if seen == DETECT_ELEMENTS:
                break
        if not seen:
            raise ExportError(f"{path}: the export holds no conversations")
    raise ExportError(
        f"{path}: not a Claude export (conversations with 'chat_messages'), a ChatGPT export "
        "(conversations with 'mapping') nor an om-mcp export"
    )


def iter_export(
    path: str | Path, source: str | None = None, *, max_chars: int | None = None, progress: Progress | None = None
) -> Iterator[ImportedThread | Refused]:
    """The conversations of a Claude or ChatGPT export (a `Refused` for each one that cannot
    be read); `source` skips the detection, `max_chars` is the most JSON text one may take."""
    from om_mcp.importers import chatgpt_export, claude_export

    source = source or detect_source(path)
    modules = {"claude": claude_export, "chatgpt": chatgpt_export}
    if source not in modules:
        raise ExportError(f"source: expected 'claude' or 'chatgpt', got {source!r}")
    options: dict = {"progress": progress} | ({"max_chars": max_chars} if max_chars else {})
    return modules[source].iter_conversations(path, **options)
