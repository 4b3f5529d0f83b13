"""Trimming long text: a tool's output, a message over the size limit. A long string keeps its
start and its end around a marker saying how much was left out, and each cut is recorded
(`metadata.trimmed`), so what was stored says what it lost. Shared by the hosts' readers and
the recorder's intake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TRIM_MARKER = "\n[... {omitted} characters omitted by om-mcp ...]\n"


@dataclass(frozen=True)
class TrimRule:
    """Keep the first `head` and last `tail` characters of a long tool output.

    Applied to tool results and to string arguments of tool calls (a Write
    tool's file content); a person's or the model's own text is never trimmed.
    The default keeps 2,000 characters: the start of a listing or log (what
    was asked for) and its end (the error, the summary line).
    """

    head: int = 1500
    tail: int = 500

    def __post_init__(self) -> None:
        if self.head < 0 or self.tail < 0:
            raise ValueError("TrimRule head and tail must be >= 0")

    @property
    def keep(self) -> int:
        return self.head + self.tail


def trim_rule(chars: int) -> TrimRule:
    """The rule that keeps `chars` characters of a long tool output: three quarters from its start, the rest
    from its end."""
    head = chars * 3 // 4
    return TrimRule(head=head, tail=chars - head)


def trim_text(text: str, rule: TrimRule) -> tuple[str, dict[str, int] | None]:
    """(text, None) when it fits, else (trimmed text, {"original_chars", "kept_chars"}).

    A text only slightly over the limit is kept whole: cutting it would save
    less than the marker costs.
    """
    if len(text) <= rule.keep + len(TRIM_MARKER) + 8:
        return text, None
    omitted = len(text) - rule.keep
    tail = text[len(text) - rule.tail :] if rule.tail else ""
    trimmed = text[: rule.head] + TRIM_MARKER.format(omitted=f"{omitted:,}") + tail
    return trimmed, {"original_chars": len(text), "kept_chars": rule.keep}


def trim_value(value: Any, rule: TrimRule, path: str, record: list[dict[str, Any]]) -> Any:
    """`value` with every long string inside it trimmed; each cut is appended to
    `record` as {"field": path, "original_chars", "kept_chars"}."""
    if isinstance(value, str):
        text, info = trim_text(value, rule)
        if info is not None:
            record.append({"field": path, **info})
        return text
    if isinstance(value, dict):
        return {k: trim_value(v, rule, f"{path}.{k}", record) for k, v in value.items()}
    if isinstance(value, list):
        return [trim_value(v, rule, f"{path}[{i}]", record) for i, v in enumerate(value)]
    return value
