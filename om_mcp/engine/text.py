"""The searchable text of a message: what full-text search indexes and recall shows.

Pure functions of plain part dicts, with no pydantic, so the host hook can build
message rows exactly as `append_messages` does without loading the engine.
"""

from __future__ import annotations

import json
from typing import Any


def part_text(part: dict[str, Any]) -> str:
    """The searchable, human-readable text of one part."""
    kind = part.get("type")
    if kind in ("text", "reasoning"):
        return part.get("text", "")
    if kind == "tool-call":
        return f"{part['tool_name']} {_json(part.get('args'))}"
    if kind == "tool-result":
        return f"{part['tool_name']} {_json(part.get('result'))}"
    if kind in ("image", "file"):
        return " ".join(x for x in (part.get("name"), part.get("mime_type")) if x)
    return ""


def message_text(parts: list[dict[str, Any]]) -> str:
    return "\n".join(t for t in (part_text(p) for p in parts) if t)


def index_text(parts: list[dict[str, Any]], metadata: dict[str, Any] | None) -> str:
    """The searchable text of a message; a named speaker is kept as a prefix."""
    text = message_text(parts)
    speaker = (metadata or {}).get("speaker") or (metadata or {}).get("name")
    return f"{speaker}: {text}" if isinstance(speaker, str) and speaker and not text.startswith(f"{speaker}:") else text


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
