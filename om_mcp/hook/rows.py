"""Host messages -> store rows, by the engine's intake rules, without pydantic.

`engine.intake.prepare` validates what an MCP client sends; the hook's
messages come from our own converters, so the validation is already done by
construction. What must be the same is what gets stored: parts normalised as
`MessageIn.parts()` does, the searchable body (`engine.text.index_text`), the
token counts (`engine.tokens.TokenCounter`), the privacy redaction (`om_mcp.privacy`)
and the time in ISO form. The tests check each row against `prepare` on the real
transcripts.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from om_mcp.engine.text import index_text
from om_mcp.engine.tokens import TokenCounter
from om_mcp.hosts.common import TrimRule, trim_value
from om_mcp.privacy import Redactor, redactor_for
from om_mcp.store.rows import NewMessage

_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Fields a part may carry (engine/messages.py); anything else a converter added is dropped.
_PART_FIELDS = {
    "text": ("type", "text"),
    "reasoning": ("type", "text"),
    "tool-call": ("type", "tool_name", "args", "tool_call_id"),
    "tool-result": ("type", "tool_name", "result", "tool_call_id", "is_error"),
    "image": ("type", "mime_type", "name", "data", "url", "width", "height"),
    "file": ("type", "mime_type", "name", "data", "url", "width", "height"),
}


def to_rows(
    messages: list[dict[str, Any]], counter: TokenCounter, max_chars: int, redactor: Redactor | None = None
) -> list[NewMessage]:
    """Rows ready for `store.sqlite.messages.append`; a message over `max_chars` is trimmed, not dropped.
    Secrets are redacted first (the default rules unless `redactor` is given); a failing
    `before_observation` hook raises `om_mcp.privacy.HookFailed`."""
    now = datetime.now(UTC)
    redactor = redactor or redactor_for(None)
    rows = []
    for message in messages:
        clean = redactor.message(
            message["role"], _clean(normalise_parts(message["content"])), _clean(dict(message.get("metadata") or {}))
        )
        parts, metadata = clean.parts, clean.metadata
        if len(json.dumps(parts, ensure_ascii=False)) > max_chars:
            cuts: list[dict[str, Any]] = []
            parts = trim_value(parts, TrimRule(head=max_chars // 2, tail=max_chars // 8), "content", cuts)
            metadata["trimmed"] = [*metadata.get("trimmed", []), *cuts]
        created = _time(message.get("created_at"))
        role = message["role"]
        tokens, cache = counter.count_message({"role": role, "parts": parts})
        rows.append(
            NewMessage(
                id=message["id"],
                role=role,
                parts=parts,
                created_at=(created or now).isoformat(),
                metadata=metadata,
                body=index_text(parts, metadata),
                tokens=tokens,
                part_tokens=cache["parts"],
                observable=role != "system",
                created_at_given=created is not None,
                redactions=dict(clean.counts),
            )
        )
    return rows


def normalise_parts(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parts as `MessageIn.parts()` stores them: no None fields, `is_error` only when true."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out = []
    for part in content:
        kind = part.get("type")
        fields = _PART_FIELDS.get(kind, tuple(part)) if isinstance(kind, str) else tuple(part)
        clean = {k: part[k] for k in fields if part.get(k) is not None}
        if clean.get("type") == "text":
            clean.setdefault("text", "")
        if clean.get("type") == "tool-result" and not clean.get("is_error"):
            clean.pop("is_error", None)
        out.append(clean)
    return out


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _clean(value: Any) -> Any:
    """Lone surrogates (possible in JSON, impossible in UTF-8) become U+FFFD instead of failing the insert."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value
