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

from om_mcp.importers._stream import ExportError, iter_array, open_export
from om_mcp.importers.openai_messages import ImportFormatError, parse_openai_messages, read_openai_messages
from om_mcp.importers.thread import ImportedThread

__all__ = [
    "ExportError",
    "ImportFormatError",
    "ImportedThread",
    "detect_source",
    "iter_export",
    "parse_openai_messages",
    "read_openai_messages",
]


def detect_source(path: str | Path) -> str:
    """'claude' or 'chatgpt', from the first conversation's keys; ExportError otherwise."""
    with open_export(path) as text:
        for first in iter_array(text, where=str(path), key="conversations"):
            if isinstance(first, dict) and "chat_messages" in first:
                return "claude"
            if isinstance(first, dict) and "mapping" in first:
                return "chatgpt"
            break
        else:
            raise ExportError(f"{path}: the export holds no conversations")
    raise ExportError(
        f"{path}: not a Claude export (conversations with 'chat_messages') nor a ChatGPT export "
        "(conversations with 'mapping')"
    )


def iter_export(path: str | Path, source: str | None = None) -> Iterator[ImportedThread]:
    """The conversations of a Claude or ChatGPT export; `source` skips the detection."""
    from om_mcp.importers import chatgpt_export, claude_export

    source = source or detect_source(path)
    modules = {"claude": claude_export, "chatgpt": chatgpt_export}
    if source not in modules:
        raise ExportError(f"source: expected 'claude' or 'chatgpt', got {source!r}")
    return modules[source].iter_conversations(path)
