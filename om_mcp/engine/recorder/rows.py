"""Host messages -> store rows, by the engine's intake (`engine.intake.message_row`), without pydantic.

`engine.intake.prepare` validates what an MCP client sends; the recorder's
messages come from our own readers (`hosts/`), so the validation is already done by
construction (`intake.normalise_parts`). The recorder is lenient where an MCP call is
strict, because a hook never fails its host: a message over the size limit is
trimmed, lone surrogates are replaced, a bad time becomes the time of the record.
Secrets are redacted as on every way in, by the gate's scan (`store/gate.py`). The tests check each row
against `prepare` on the real transcripts.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from om_mcp.engine.intake import message_row, normalise_parts
from om_mcp.engine.tokens import TokenCounter
from om_mcp.store import Gate, NewMessage, gate_for
from om_mcp.trim import TrimRule, trim_value

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def to_rows(
    messages: list[dict[str, Any]], counter: TokenCounter, max_chars: int, gate: Gate | None = None
) -> list[NewMessage]:
    """Rows ready for the append pipeline (`engine/append.py`); a message over `max_chars` is trimmed, not dropped.
    Secrets are redacted first, by the gate's scan (the default rules unless `gate` is given); a failing
    `before_observation` hook raises `om_mcp.privacy.HookFailed`."""
    now = datetime.now(UTC)
    gate = gate or gate_for(None)
    rows = []
    for message in messages:
        clean, receipt = gate.message(
            message["role"], _clean(normalise_parts(message["content"])), _clean(dict(message.get("metadata") or {}))
        )
        parts, metadata = clean.parts, clean.metadata
        if len(json.dumps(parts, ensure_ascii=False)) > max_chars:
            cuts: list[dict[str, Any]] = []
            parts = trim_value(parts, TrimRule(head=max_chars // 2, tail=max_chars // 8), "content", cuts)
            metadata["trimmed"] = [*metadata.get("trimmed", []), *cuts]
        created = _time(message.get("created_at"))
        rows.append(
            message_row(
                counter,
                message["id"],
                message["role"],
                parts,
                metadata,
                created,
                now,
                id_given=True,
                redactions=clean.counts,
                receipt=receipt,
            )
        )
    return rows


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
