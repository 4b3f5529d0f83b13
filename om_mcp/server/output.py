"""Results as the model reads them: compact JSON with nulls and empty values left out."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

# A message as the JSON the client reads, and its tokens, by (thread, id, stored count).
_SHOWN: dict[tuple[str, str, int], tuple[str, int]] = {}
SIZES_KEPT = 8192
_UTC: dict[str, str] = {}  # a stored time as shown: the same window is shown every turn
_ESCAPED = re.compile(r'["\\\x00-\x1f]')  # what JSON writes as an escape


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
    shown = _UTC.get(stamp)
    if shown is None:
        shown = datetime.fromisoformat(stamp).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if len(_UTC) >= SIZES_KEPT:
            _UTC.clear()
        _UTC[stamp] = shown
    return shown


def _empty(value: Any) -> bool:
    # 0 and False are information; only nothing is left out.
    return value is None or (isinstance(value, (str, list, dict)) and not value)


def shown(message: Any, count: Callable[[str], int]) -> tuple[str, int]:
    """A message (the store's row) as the client reads it, compact JSON, and at least the tokens
    that costs; each message is rendered and sized once (a long window is shown every turn).

    A plain text message is sized from its stored count (its role and overhead taken off),
    plus its envelope (id, role, time) and a token or two for each JSON escape and for the
    text's edges, where a quote may split a word differently: never encoded again. Any other
    message (several parts, tool calls, files) is counted as it is shown."""
    key = (message.thread_id, message.id, message.tokens)
    found = _SHOWN.get(key)
    if found is None:
        view = message_view(message)
        text = compact(view)
        content = view["content"]
        if isinstance(content, str) and message.tokens:
            envelope = json.dumps({**view, "content": ""}, ensure_ascii=False, separators=(",", ":"))
            body = max(0, message.tokens - count(message.role) - 4)
            size = count(envelope) + body + 2 * len(_ESCAPED.findall(content)) + 2
        else:
            size = count(text)
        if len(_SHOWN) >= SIZES_KEPT:
            _SHOWN.clear()
        found = _SHOWN[key] = (text, size)
    return found
