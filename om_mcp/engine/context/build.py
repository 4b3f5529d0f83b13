"""Composing what the agent sees: memory blocks first, then the raw messages that fit.

The blocks are ordered for prompt caching: the preamble and the oldest
observation groups change least, so they come first and stay byte-stable
between calls. Every block earns its place: an empty thread gets only its
working memory, and the preamble and recall guidance come with observations.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from om_mcp.config import Config
from om_mcp.engine.context.observations import prepare_observations_for_context
from om_mcp.engine.errors import NotFound
from om_mcp.engine.observation.lines import is_user_stated, observation_lines
from om_mcp.engine.observation.transcript import format_history, thread_label
from om_mcp.engine.prompts import agent as prompts
from om_mcp.neutral import block, fence, neutralise
from om_mcp.store import Group, Hints, Message, Record, Store

OTHER_THREAD_PART_CHARS = 500
# Tokens of the other threads' block around their messages: the intro once, a frame per thread;
# a clipped part is at most about this many tokens.
OTHER_CONVERSATIONS_FRAME, OTHER_CONVERSATION_FRAME, CLIPPED_PART_TOKENS = 60, 16, 160
OBSERVATION_SHARE = 0.7  # of the budget left after the fixed blocks, at most this much for the log


def render_groups(groups: list[Group], *, ranges: bool, scope: str, obscure: bool) -> str:
    """The active log as text, one block per group (model-written text neutralised)."""
    blocks = []
    for group in groups:
        if scope == "resource" and group.thread_id:
            text = block("thread", group.text.strip(), f' id="{thread_label(group.thread_id, obscure)}"')
        else:
            text = neutralise(group.text.strip())
        if ranges:
            # a line remembered outside any conversation (om-mcp remember --resource) has no range
            where = f"\n_range: `{group.range}`_" if group.range else ""
            text = f"## Group `{group.id}`{where}\n\n{text}"
        blocks.append(text)
    return "\n\n".join(blocks)


@dataclass
class Blocks:
    preamble: str = ""
    user_memory: str = ""  # the person layer (engine/user_layer.py)
    other_threads: str = ""
    archive: str = ""  # the archive's catalog (engine/observation/archive.py)
    observations: str = ""
    hints: str = ""
    extracted: str = ""
    working_memory: str = ""
    continuation: str = ""

    def system_text(self) -> str:
        return "\n\n".join(
            b
            for b in (
                self.preamble,
                self.user_memory,
                self.other_threads,
                self.archive,
                self.observations,
                self.hints,
                self.extracted,
                self.working_memory,
                self.continuation,
            )
            if b
        )


def fit_groups(groups: list[Group], budget: int) -> tuple[list[Group], int]:
    """The newest groups that fit `budget` tokens; returns (kept, dropped count)."""
    kept: list[Group] = []
    used = 0
    for group in reversed(groups):
        if used + group.tokens > budget and kept:
            break
        kept.append(group)
        used += group.tokens
    kept.reverse()
    return kept, len(groups) - len(kept)


def compose(
    config: Config,
    groups: list[Group],
    hints: Hints,
    extracted: dict[str, Any],
    working_memory: str,
    other_threads: dict[str, list[Message]],
    budget: int,
    count: Callable[[str], int],
    now: datetime | None = None,
    *,
    user_memory: str = "",
    archive_catalog: str = "",
) -> tuple[Blocks, int]:
    """The blocks within `budget` tokens, and how many older groups were left out. `user_memory`:
    the person layer's block; `archive_catalog`: the archive's (both within budgets of their own)."""
    om = config.observational_memory
    retrieval = om.retrieval_config
    obscure = om.obscure_thread_ids if om.obscure_thread_ids is not None else om.scope == "resource"
    blocks = Blocks(working_memory=working_memory, user_memory=user_memory, archive=archive_catalog)
    blocks.hints = "\n".join(
        block(tag, text)
        for tag, text in (("current-task", hints.current_task), ("suggested-response", hints.suggested_response))
        if text
    )
    if extracted:
        blocks.extracted = "\n".join(
            block(slug, _text(value), extractor=True) for slug, value in sorted(extracted.items())
        )
    shown = other_messages(other_threads, om.other_threads.tokens, om.other_threads.max_age_seconds(), now)
    if shown:
        sections = [
            block("other-conversation", format_history([_clip(m) for m in msgs]), f' id="{thread_label(t, obscure)}"')
            for t, msgs in shown.items()
        ]
        blocks.other_threads = "\n".join(
            [prompts.OTHER_CONVERSATIONS_INTRO, fence("other-conversations", "\n".join(sections))]
        )
    if not groups:
        return blocks, 0
    blocks.preamble = prompts.CONTEXT_PREAMBLE.format(holds=prompts.CONTEXT_HOLDS[om.scope])
    if retrieval is not None:
        guidance = (
            prompts.RECALL_INSTRUCTIONS if retrieval.scope == "resource" else prompts.RECALL_INSTRUCTIONS_THREAD_SCOPE
        )
        blocks.preamble += "\n\n" + guidance + (f"\n\n{retrieval.instructions}" if retrieval.instructions else "")
    blocks.continuation = fence("system-reminder", prompts.CONTINUATION_HINT)
    fixed = count(blocks.system_text())
    kept, dropped = fit_groups(groups, max(int((budget - fixed) * OBSERVATION_SHARE), 0))
    text = render_groups(kept, ranges=retrieval is not None, scope=om.scope, obscure=obscure)
    text = prepare_observations_for_context(text, now or datetime.now(UTC))
    if dropped:
        text = f"[{dropped} older observation groups omitted to fit max_tokens; raise max_tokens to see them]\n{text}"
    blocks.observations = fence("observations", text)
    return blocks, dropped


def other_messages(
    others: dict[str, list[Message]], tokens: int, max_age: float | None, now: datetime | None = None
) -> dict[str, list[Message]]:
    """What the context shows raw of the other threads (resource scope): never imported history
    nor a message older than `max_age` seconds (those reach this thread as observations, and recall
    finds them), and of the rest the most recent first, within `tokens` by their stored counts
    (clipped as shown, each thread's frame counted too). Threads most recent first, their messages in order."""
    if tokens <= 0:
        return {}
    oldest = (now or datetime.now(UTC)).timestamp() - max_age if max_age is not None else None
    candidates = [
        m
        for messages in others.values()
        for m in messages
        if not m.metadata.get("imported_from") and (oldest is None or _timestamp(m.created_at) >= oldest)
    ]
    used = OTHER_CONVERSATIONS_FRAME
    kept: dict[str, list[Message]] = {}
    for message in sorted(candidates, key=lambda m: m.seq, reverse=True):
        cost = min(message.tokens, CLIPPED_PART_TOKENS * max(1, len(message.parts)))
        cost += 0 if message.thread_id in kept else OTHER_CONVERSATION_FRAME
        if used + cost > tokens:
            break
        used += cost
        kept.setdefault(message.thread_id, []).append(message)
    return {thread: list(reversed(messages)) for thread, messages in kept.items()}


def _timestamp(stamp: str) -> float:
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return 0.0  # unreadable: as good as old
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def fit_messages(window: list[Message], budget: int) -> tuple[list[Message], int]:
    """The newest messages of the window whose stored counts fit (at least one); (kept, left out)."""
    used, start = 0, len(window)
    for index in range(len(window) - 1, -1, -1):
        if start < len(window) and used + window[index].tokens > budget:
            break
        used += window[index].tokens
        start = index
    return window[start:], start


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _clip(message: Message) -> dict[str, Any]:
    data = message.as_dict()
    parts = []
    for part in data["parts"]:
        if part.get("type") in ("text", "reasoning") and len(part.get("text", "")) > OTHER_THREAD_PART_CHARS:
            part = {**part, "text": part["text"][:OTHER_THREAD_PART_CHARS] + " …"}
        parts.append(part)
    data["parts"] = parts
    return data


RETIRED_SHOWN = 100  # the most recently retired groups a view lists


def line_views(group: Group, superseded: dict[str, list[str]] | None = None) -> list[dict[str, Any]]:
    """A group's lines with their ids (engine/observation/lines.py), for forgetting, correcting or
    restoring one; Date headers and thread tags have none. A line the user stated says so, and a
    line that superseded others names them."""
    out = []
    for line_id, text in observation_lines(group.id, group.text):
        item: dict[str, Any] = {"id": line_id, "text": text}
        if line_id is not None and is_user_stated(text):
            item["user_stated"] = True
        if line_id is not None and (older := (superseded or {}).get(line_id.rpartition(".")[2])):
            item["supersedes"] = older
        out.append(item)
    return out


def retired_view(group: Group) -> dict[str, Any]:
    return {
        "id": group.id,
        "reason": group.retired_reason,
        "retired_by": group.retired_by,
        "replaced_by": group.replaced_by,
        "range": group.range,
        "thread_id": group.thread_id,
        "lines": line_views(group),
    }


def log_view(groups: list[Group], om: Any, superseded: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Groups of a log as the resources and `show` present them: the text with ranges, each line with its id."""
    obscure = om.obscure_thread_ids if om.obscure_thread_ids is not None else om.scope == "resource"
    return {
        "text": render_groups(groups, ranges=True, scope=om.scope, obscure=obscure),
        "tokens": sum(g.tokens for g in groups),
        "groups": [
            {
                "id": g.id,
                "kind": g.kind,
                "range": g.range,
                "thread_id": g.thread_id,
                "tokens": g.tokens,
                "lines": line_views(g, superseded),
            }
            for g in groups
        ],
    }


async def observation_log(store: Store, record: Record, om: Any, *, history: bool = False) -> dict[str, Any]:
    """A record's active log (or every generation), with ranges, as the resources and `show` present it;
    the active log comes with the most recently retired lines and archived days (`retired`)."""

    def view(groups: list, superseded: dict[str, list[str]] | None = None) -> dict[str, Any]:
        return log_view(groups, om, superseded)

    key = record.key
    if history:
        return {
            "record_id": key,
            "generations": [{"generation": n, **view(groups)} for n, groups in await store.generations(key)],
        }
    retired = await store.retired_groups(key, RETIRED_SHOWN)
    superseded: dict[str, list[str]] = {}
    for g in retired:
        if g.retired_reason == "superseded" and g.replaced_by:
            superseded.setdefault(g.replaced_by, []).extend(i for i, _ in observation_lines(g.id, g.text) if i)
    return {
        "record_id": key,
        "generation": record.generation,
        "last_observed_at": record.last_observed_at,
        "extracted": record.extracted,
        **view(await store.groups(key), superseded),
        "retired": [retired_view(g) for g in retired],
    }


async def generation_diff(store: Store, key: str, generation: int) -> dict[str, Any]:
    """What generation N changed against N-1: the lines it added, and the lines it no longer holds
    (with why, from the retired pile: dropped, merged, superseded, archived; edited: a correction)."""
    stored = dict(await store.generations(key))
    if generation not in stored or generation - 1 not in stored:
        have = ", ".join(str(n) for n in sorted(stored)) or "none"
        raise NotFound(f"generation {generation} of {key} has no generation before it (it has {have})", field="diff")

    def flat(groups: list[Group]) -> dict[str, tuple[str, str]]:
        return {
            " ".join(text.split()): (line_id, text.strip())
            for g in groups
            for line_id, text in observation_lines(g.id, g.text)
            if line_id is not None
        }

    before, after = flat(stored[generation - 1]), flat(stored[generation])
    why = {}
    for g in await store.retired_groups(key):
        if g.retired_by == generation:
            for _, text in observation_lines(g.id, g.text):
                why[" ".join(text.split())] = (g.retired_reason, g.replaced_by, g.id)
    removed = []
    for line, (line_id, text) in before.items():
        if line not in after:
            reason, by, pile = why.get(line, (None, None, None))
            removed.append({"id": line_id, "text": text, "reason": reason, "replaced_by": by, "retired_id": pile})
    return {
        "record_id": key,
        "generation": generation,
        "against": generation - 1,
        "added": [{"id": i, "text": t} for line, (i, t) in after.items() if line not in before],
        "removed": removed,
        "kept": sum(1 for line in after if line in before),
    }
