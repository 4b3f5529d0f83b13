"""Results as the model reads them: compact JSON with nulls and empty values left out."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any


def compact(value: Any) -> str:
    return json.dumps(_prune(value), ensure_ascii=False, separators=(",", ":"), default=str)


def _prune(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if not _empty(v)}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def message_view(message: Any) -> dict[str, Any]:
    """A message in few tokens: one text part is just its text; the time in UTC."""
    parts = message.parts
    content: Any = parts[0]["text"] if len(parts) == 1 and parts[0].get("type") == "text" else parts
    return {"id": message.id, "role": message.role, "at": utc(message.created_at), "content": content}


def utc(stamp: str) -> str:
    return datetime.fromisoformat(stamp).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _empty(value: Any) -> bool:
    # 0 and False are information; only nothing is left out.
    return value is None or (isinstance(value, (str, list, dict)) and not value)
