"""Rendering raw messages for the agent: low detail (every part, clipped) and
high detail (one part whole, paged by character offset).

Clipping works in tokens, approximated as characters / CHARS_PER_TOKEN so a
cut never needs the tokenizer; only the final budget check counts exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from om_mcp.store import Message

CHARS_PER_TOKEN = 4
LOW_DETAIL_TOKENS = {"text": 100, "user-text": 200, "reasoning": 60, "tool-call": 20, "tool-result": 30}
OTHER_PART_TOKENS = 30
HIGH_DETAIL_CHUNK_TOKENS = 2000


@dataclass
class RenderedMessage:
    id: str
    thread_id: str
    role: str
    created_at: str
    parts: list[str]
    part_types: list[str] = field(default_factory=list)

    def header(self) -> str:
        return f"**{self.role} ({_utc_label(self.created_at)})** [{self.id}]:"

    def text(self, indent_lines: bool = True) -> str:
        # Continuation lines are indented too, so no message text can pass for a header
        # (not when one part is read whole: there the exact text matters).
        parts = (p.replace("\n", "\n    ") if indent_lines else p for p in self.parts)
        return "\n".join([self.header(), *("  " + p for p in parts)])


def _utc_label(created_at: str) -> str:
    dt = datetime.fromisoformat(created_at).astimezone(UTC)
    return dt.strftime("%Y-%m-%d %H:%M:%SZ")


def part_body(part: dict[str, Any]) -> str:
    """The full readable content of a part."""
    kind = part.get("type")
    if kind in ("text", "reasoning"):
        return part.get("text", "")
    if kind == "tool-call":
        return f"{part['tool_name']}({_json(part.get('args'))})"
    if kind == "tool-result":
        label = "error" if part.get("is_error") else "result"
        return f"{part['tool_name']} {label}: {_json(part.get('result'))}"
    if kind in ("image", "file"):
        where = part.get("url") or ("inline data" if part.get("data") else "no content")
        return f"{kind} {part.get('name') or ''} ({part.get('mime_type')}, {where})".replace("  ", " ")
    return json.dumps(part, ensure_ascii=False)


def part_matches(part: dict[str, Any], part_type: str | None, tool_name: str | None) -> bool:
    if part_type and part.get("type") != part_type:
        return False
    if tool_name and (part.get("type") not in ("tool-call", "tool-result") or part.get("tool_name") != tool_name):
        return False
    return True


def clip(text: str, tokens: int) -> tuple[str, bool]:
    limit = tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text, False
    return text[:limit].rstrip() + " …", True


def render_low(message: Message, part_type: str | None = None, tool_name: str | None = None) -> RenderedMessage:
    """Every (matching) part, each clipped to a small budget with a hint to read it whole."""
    lines, kinds = [], []
    for index, part in enumerate(message.parts):
        if not part_matches(part, part_type, tool_name):
            continue
        kind = part.get("type", "")
        if kind == "tool-call":
            body = f"[tool call: {part['tool_name']}] {_json(part.get('args'))}"
        elif kind == "tool-result":
            body = f"[tool result: {part['tool_name']}] {_json(part.get('result'))}"
        elif kind in ("image", "file"):
            body = f"[{kind}: {part.get('name') or part.get('mime_type')}]"
        else:
            body = part_body(part)
        budget_key = "user-text" if (kind == "text" and message.role == "user") else kind
        body, cut = clip(body, LOW_DETAIL_TOKENS.get(budget_key, OTHER_PART_TOKENS))
        if cut:
            body += f' [recall cursor="{message.id}" part_index={index} detail="high" for the rest]'
        lines.append(f"[p{index}] {body}")
        kinds.append(kind)
    return RenderedMessage(message.id, message.thread_id, message.role, message.created_at, lines, kinds)


@dataclass
class PartSlice:
    rendered: RenderedMessage
    part_index: int
    part_count: int
    char_offset: int
    next_char_offset: int | None


def render_part(
    message: Message,
    part_index: int,
    char_offset: int = 0,
    chunk_tokens: int = HIGH_DETAIL_CHUNK_TOKENS,
    count: Callable[[str], int] | None = None,
) -> PartSlice:
    """One part at full detail, from a character offset, at most one chunk of tokens long
    (measured with `count` when given: CJK text has far fewer characters per token)."""
    body = part_body(message.parts[part_index])
    limit = chunk_tokens * CHARS_PER_TOKEN
    piece = body[char_offset : char_offset + limit]
    if count is not None:
        piece = shrink(piece, chunk_tokens, count).removesuffix(" …") if count(piece) > chunk_tokens else piece
    end = char_offset + len(piece)
    next_offset = end if end < len(body) else None
    line = f"[p{part_index}] {piece}"
    if char_offset:
        line = f"[p{part_index} from character {char_offset}] {piece}"
    rendered = RenderedMessage(
        message.id,
        message.thread_id,
        message.role,
        message.created_at,
        [line],
        [message.parts[part_index].get("type", "")],
    )
    return PartSlice(rendered, part_index, len(message.parts), char_offset, next_offset)


def fit_to_budget(blocks: list[str], budget_tokens: int, count: Callable[[str], int]) -> tuple[list[str], bool, int]:
    """Keep whole blocks while they fit; returns (kept, truncated, tokens_cut). A first
    block bigger than the whole budget is cut to fit rather than hidden."""
    kept, used, cut = [], 0, 0
    for block in blocks:
        tokens = count(block)
        if used + tokens <= budget_tokens and cut == 0:
            kept.append(block)
            used += tokens
        else:
            cut += tokens
    if not kept and blocks:
        kept = [shrink(blocks[0], budget_tokens, count)]
    return kept, cut > 0, cut


def shrink(text: str, budget_tokens: int, count: Callable[[str], int]) -> str:
    """The longest prefix of `text` (marked as cut) that counts at most `budget_tokens`."""
    if count(text) <= budget_tokens:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count(text[:middle] + " …") <= budget_tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low].rstrip() + " …"


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
