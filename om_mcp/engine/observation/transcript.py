"""Stored messages rendered as a plain transcript for the Observer.

Layout, one entry per part:

    Date: Dec 4, 2025
    User (14:30): Can you find me a flight to Lisbon?
    Assistant (14:31): Let me look.
    Tool call search_flights: {"to": "LIS"}
    Tool result search_flights: [{"flight": "TP1351", "price": 129}]
    Assistant: Found one for 129 EUR.

A time label is shown only when it differs from the last one shown, which keeps the
transcript short while every line still has a known time. Continuation lines of a
multi-line part are indented, so text inside a message can never start a line of
its own and pass itself off as a new speaker or a Date line; and each entry passes
the one neutralising step (`om_mcp/neutral.py`: our tags anywhere, any tag that would
begin a line), so a message cannot close our <thread> or <conversation> section, nor
hand a copying Observer a line that opens one of the sections its output is read by
(<current-task>, <observations>, an extractor's tag).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from om_mcp.neutral import neutralise

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

ROLE_LABELS = {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool"}

TEMPORAL_GAP_KIND = "temporal-gap"
CONTINUATION_INDENT = "  "


def date_header(day: datetime) -> str:
    """ "Date: Dec 4, 2025" (fixed English month names, whatever the locale)."""
    return f"Date: {MONTHS[day.month - 1]} {day.day}, {day.year}"


def estimate_tokens(text: str) -> int:
    """Rough count used when no counter is given: about four characters a token."""
    return (len(text) + 3) // 4


def _to_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str) and value:
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    # Naive times are stored as UTC elsewhere in the engine; read them the same way.
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _resolve_tz(tz: tzinfo | str | None) -> tzinfo | None:
    if tz is None or isinstance(tz, tzinfo):
        return tz
    return ZoneInfo(tz)


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def truncate_to_tokens(text: str, max_tokens: int | None, count_text: Callable[[str], int] | None = None) -> str:
    """Cut `text` to about `max_tokens`, saying how much was left out."""
    if max_tokens is None or max_tokens <= 0:
        return text
    count = count_text or estimate_tokens
    total = count(text)
    if total <= max_tokens:
        return text
    # Start from the proportional cut, then shrink until it fits; counts are not
    # linear in characters, so a couple of passes may be needed.
    keep = int(len(text) * max_tokens / total)
    for _ in range(8):
        if keep <= 0 or count(text[:keep]) <= max_tokens:
            break
        keep = int(keep * 0.9)
    return f"{text[:keep]} … [truncated: showing about {max_tokens} of {total} tokens]"


def _attachment(part: Mapping[str, Any], number: int) -> str:
    mime = part.get("mime_type") or ""
    name = part.get("name") or ""
    if part.get("type") == "image":
        return f"[Image #{number}: {name}]" if name else f"[Image #{number}: {mime}]"
    if name:
        return f"[File #{number}: {name} ({mime})]" if mime else f"[File #{number}: {name}]"
    return f"[File #{number}: {mime}]"


def _entries(
    message: Mapping[str, Any], budget: int | None, count_text: Callable[[str], int] | None, counter: list[int]
) -> list[tuple[str, str]]:
    """(label, content) pairs for one message's parts, in order."""
    role_label = ROLE_LABELS.get(message.get("role", ""), str(message.get("role", "")).title())
    out: list[tuple[str, str]] = []
    for part in message.get("parts") or []:
        kind = part.get("type")
        if kind == "text":
            if part.get("text", "").strip():
                out.append((role_label, part["text"]))
        elif kind == "reasoning":
            if part.get("text", "").strip():
                out.append(("Reasoning", part["text"]))
        elif kind == "tool-call":
            args = truncate_to_tokens(_json(part.get("args")), budget, count_text)
            out.append((f"Tool call {part.get('tool_name', '?')}", args))
        elif kind == "tool-result":
            result = truncate_to_tokens(_json(part.get("result")), budget, count_text)
            label = "Tool error" if part.get("is_error") else "Tool result"
            out.append((f"{label} {part.get('tool_name', '?')}", result))
        elif kind in ("image", "file"):
            counter[0] += 1
            out.append((role_label, _attachment(part, counter[0])))
    return out


def _indent_continuation(text: str) -> str:
    lines = neutralise(text.strip("\n")).split("\n")
    return "\n".join([lines[0], *(CONTINUATION_INDENT + line if line else line for line in lines[1:])])


def _message_text(message: Mapping[str, Any]) -> str:
    return "\n".join(p.get("text", "") for p in message.get("parts") or [] if p.get("type") == "text")


def format_history(
    messages: Sequence[Mapping[str, Any]],
    tz: tzinfo | str | None = None,
    max_tool_result_tokens: int | None = 5000,
    count_text: Callable[[str], int] | None = None,
) -> str:
    """Render stored messages as the Observer's transcript.

    Times are shown in each message's own stored time zone (the one its created_at
    carries), or converted to `tz` when given. Tool call args and tool results are
    cut to `max_tool_result_tokens` (counted with `count_text`, default a character
    estimate). A temporal-gap marker message (metadata om_kind "temporal-gap") is
    shown as its bare text.
    """
    zone = _resolve_tz(tz)
    lines: list[str] = []
    last_day = None
    last_time: str | None = None
    attachments = [0]  # numbered across the whole transcript, so "#2" is unambiguous

    for message in messages:
        when = _to_datetime(message.get("created_at"))
        if when is not None and zone is not None:
            when = when.astimezone(zone)
        if when is not None and when.date() != last_day:
            if lines:
                lines.append("")
            lines.append(date_header(when))
            last_day = when.date()
            last_time = None  # a new day starts with its time shown

        metadata = message.get("metadata") or {}
        if metadata.get("om_kind") == TEMPORAL_GAP_KIND:
            text = _message_text(message).strip()
            if text:
                lines.append(_indent_continuation(text))
            continue

        time_label = when.strftime("%H:%M") if when is not None else None
        for label, content in _entries(message, max_tool_result_tokens, count_text, attachments):
            if time_label and time_label != last_time:
                head = f"{label} ({time_label}):"
                last_time = time_label
            else:
                head = f"{label}:"
            lines.append(_indent_continuation(f"{head} {content}"))

    return "\n".join(lines)


def format_thread_sections(
    threads: Mapping[str, Sequence[Mapping[str, Any]]],
    tz: tzinfo | str | None = None,
    max_tool_result_tokens: int | None = 5000,
    count_text: Callable[[str], int] | None = None,
) -> str:
    """Several threads' transcripts, each in a <thread id="label"> section."""
    sections = []
    for label, messages in threads.items():
        body = format_history(messages, tz, max_tool_result_tokens, count_text)
        safe = str(label).replace('"', "'").replace("<", "").replace(">", "")
        sections.append(f'<thread id="{safe}">\n{body}\n</thread>')
    return "\n\n".join(sections)


def thread_label(thread_id: str, obscure: bool) -> str:
    """What the models see for a thread id: the id, or a short stable hash of it."""
    if not obscure:
        return thread_id
    return hashlib.blake2s(thread_id.encode(), digest_size=4).hexdigest()
