"""Which messages a cycle takes: pure functions over lists of messages."""

from __future__ import annotations

from collections.abc import Sequence

from om_mcp.store import Message


def leave_turn_raw(messages: list[Message]) -> list[Message]:
    """The turn in progress stays in the agent's context: the last user message and what
    follows it are not observed, unless nothing else would be."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    if last_user is None or last_user == 0:
        return messages
    return messages[:last_user]


def safe_prefix(messages: list[Message]) -> list[Message]:
    """Drop a trailing tool call still waiting for its result, so a cycle never
    separates a call from its result."""
    answered = {p.get("tool_call_id") for m in messages for p in m.parts if p.get("type") == "tool-result"}
    while messages:
        last = messages[-1]
        calls = [p for p in last.parts if p.get("type") == "tool-call"]
        waiting = any(p.get("tool_call_id") is None or p.get("tool_call_id") not in answered for p in calls)
        if calls and waiting and not any(p.get("type") == "tool-result" for p in last.parts):
            messages = messages[:-1]
            continue
        break
    return messages


def visible(message: Message) -> bool:
    return message.role != "system"


def first_visible(messages: Sequence[Message]) -> Message:
    return next((m for m in messages if visible(m)), messages[0])


def last_visible(messages: Sequence[Message]) -> Message:
    return next((m for m in reversed(messages) if visible(m)), messages[-1])


def choose_threads(sizes: dict[str, int], threshold: int, everything: bool) -> list[str]:
    """Resource scope: the busiest threads until the threshold is covered (all of them
    for a manual run)."""
    chosen, total = [], 0
    for thread_id in sorted(sizes, key=lambda t: (-sizes[t], t)):
        if total >= threshold and not everything:
            break
        chosen.append(thread_id)
        total += sizes[thread_id]
    return chosen


def batches(thread_ids: list[str], sizes: dict[str, int], limit: int) -> list[list[str]]:
    """Greedy packing in order; a thread bigger than the limit gets a batch of its own."""
    out: list[list[str]] = []
    current: list[str] = []
    size = 0
    for thread_id in thread_ids:
        tokens = sizes[thread_id]
        if current and size + tokens > limit:
            out.append(current)
            current, size = [], 0
        current.append(thread_id)
        size += tokens
    if current:
        out.append(current)
    return out
