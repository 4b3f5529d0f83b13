"""Composing what the agent sees: memory blocks first, then the raw messages
that fit the budget.

The blocks are ordered for prompt caching: the preamble and the oldest
observation groups change least, so they come first and stay byte-stable
between calls.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone

from om_mcp.engine import prompts
from om_mcp.engine.context_text import prepare_observations_for_context
from om_mcp.engine.formatting import format_history
from om_mcp.store import Message
from om_mcp.store.om import Group, Record

OTHER_THREAD_PART_CHARS = 500


def thread_label(thread_id: str, obscure: bool) -> str:
    """What the models see for a thread id: the id, or a short stable hash of it."""
    if not obscure:
        return thread_id
    return hashlib.blake2s(thread_id.encode(), digest_size=4).hexdigest()


def render_groups(groups: list[Group], *, ranges: bool, scope: str, obscure: bool) -> str:
    """The active log as text, one block per group."""
    blocks = []
    for group in groups:
        text = group.text.strip()
        if scope == "resource" and group.thread_id and group.kind == "observation":
            text = f'<thread id="{thread_label(group.thread_id, obscure)}">\n{text}\n</thread>'
        if ranges:
            text = f"## Group `{group.id}`\n_range: `{group.range}`_\n\n{text}"
        blocks.append(text)
    return "\n\n".join(blocks)


@dataclass
class Blocks:
    preamble: str
    observations: str
    hints: str
    extracted: str
    working_memory: str
    other_threads: str
    continuation: str

    def system_text(self) -> str:
        return "\n\n".join(
            b for b in (
                self.preamble, self.other_threads, self.observations, self.hints, self.extracted,
                self.working_memory, self.continuation,
            ) if b
        )


def build_blocks(
    record: Record | None,
    groups: list[Group],
    *,
    working_memory: str,
    retrieval: object | None,
    scope: str,
    obscure: bool,
    other_threads: dict[str, list[Message]] | None = None,
    now: datetime | None = None,
) -> Blocks:
    now = now or datetime.now(timezone.utc)
    observations = ""
    preamble = ""
    if groups:
        text = render_groups(groups, ranges=retrieval is not None, scope=scope, obscure=obscure)
        observations = f"<observations>\n{prepare_observations_for_context(text, now)}\n</observations>"
    if groups or (retrieval is not None and scope == "resource"):
        preamble = prompts.CONTEXT_PREAMBLE
        if retrieval is not None:
            instructions = (
                prompts.RECALL_INSTRUCTIONS if getattr(retrieval, "scope", "resource") == "resource"
                else prompts.RECALL_INSTRUCTIONS_THREAD_SCOPE
            )
            extra = getattr(retrieval, "instructions", None)
            preamble += "\n\n" + instructions + (f"\n\n{extra}" if extra else "")
    hints = ""
    if record is not None:
        parts = []
        if record.current_task:
            parts.append(f"<current-task>\n{record.current_task}\n</current-task>")
        if record.suggested_response:
            parts.append(f"<suggested-response>\n{record.suggested_response}\n</suggested-response>")
        hints = "\n".join(parts)
    extracted = ""
    if record is not None and record.extracted:
        extracted = "\n".join(
            f"<{slug}>\n{value if isinstance(value, str) else _json(value)}\n</{slug}>"
            for slug, value in sorted(record.extracted.items())
        )
    others = ""
    if other_threads:
        sections = []
        for thread_id, messages in other_threads.items():
            body = format_history([_clip(m) for m in messages])
            sections.append(f'<other-conversation id="{thread_label(thread_id, obscure)}">\n{body}\n</other-conversation>')
        others = prompts.OTHER_CONVERSATIONS_INTRO + "\n<other-conversations>\n" + "\n".join(sections) + "\n</other-conversations>"
    continuation = f"<system-reminder>\n{prompts.CONTINUATION_HINT}\n</system-reminder>" if groups else ""
    return Blocks(preamble, observations, hints, extracted, working_memory, others, continuation)


def fit_groups(groups: list[Group], budget: int) -> tuple[list[Group], int]:
    """The newest groups that fit `budget` tokens; returns (kept, dropped count)."""
    kept, used = [], 0
    for group in reversed(groups):
        if used + group.tokens > budget and kept:
            break
        kept.append(group)
        used += group.tokens
    kept.reverse()
    return kept, len(groups) - len(kept)


def _clip(message: Message) -> dict:
    data = message.as_dict()
    parts = []
    for part in data["parts"]:
        if part.get("type") in ("text", "reasoning") and len(part.get("text", "")) > OTHER_THREAD_PART_CHARS:
            part = {**part, "text": part["text"][:OTHER_THREAD_PART_CHARS] + " …"}
        parts.append(part)
    data["parts"] = parts
    return data


def _json(value: object) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)
