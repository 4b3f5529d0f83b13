"""Results as the model reads them: compact JSON with nulls, empties and defaults left out."""

from __future__ import annotations

import json
from typing import Any


def compact(value: Any) -> str:
    return json.dumps(_prune(value), ensure_ascii=False, separators=(",", ":"), default=str)


def _prune(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if v not in (None, "", [], {}, False)}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def message_view(message: Any) -> dict[str, Any]:
    """A message in few tokens: one text part is just its text."""
    parts = message.parts
    content: Any = parts[0]["text"] if len(parts) == 1 and parts[0].get("type") == "text" else parts
    return {"id": message.id, "role": message.role, "at": message.created_at[:19], "content": content}
