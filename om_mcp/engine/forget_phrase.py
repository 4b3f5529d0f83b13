"""Forgetting by phrase: what `forget --match` would remove, and the plan that removes it.

Every message and observation line holding the phrase (ignoring case), in the resources a
caller's access grants (one, or every one for the owner): messages go whole, lines with their
sub-bullets, from every generation and from buffered work; the store then scrubs what the models
copied the phrase into (store/scrub.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from om_mcp.engine.observation import lines
from om_mcp.engine.observation.events import EventType, user_event
from om_mcp.engine.text import message_text
from om_mcp.store import Access, Record, Store
from om_mcp.store.rows import Found, Rewrite
from om_mcp.store.scrub import fold

SNIPPET_CHARS = 120


def snippet(text: str, phrase: str | None = None) -> str:
    """One line of at most SNIPPET_CHARS, around the phrase when there is one."""
    flat = " ".join(text.split())
    if phrase:
        at = fold(flat).find(fold(phrase))
        if at > SNIPPET_CHARS // 2:
            flat = "…" + flat[at - SNIPPET_CHARS // 3 :]
    return flat if len(flat) <= SNIPPET_CHARS else flat[: SNIPPET_CHARS - 1] + "…"


async def _records(store: Store, found: Found) -> dict[str, Record | None]:
    keys = {k for k, _ in found.groups} | {k for k, _ in found.chunks}
    return {key: await store.record(key) for key in sorted(keys)}


def _active(group: Any, record: Record | None) -> bool:
    return record is not None and group.generation == record.generation


async def items(store: Store, phrase: str, found: Found) -> list[dict[str, Any]]:
    """What a preview lists: each message, and each line of an active log, that holds the phrase."""
    records = await _records(store, found)
    listed: list[dict[str, Any]] = [
        {
            "thread_id": m.thread_id,
            "message_id": m.id,
            "role": m.role,
            "created_at": m.created_at,
            "text": snippet(message_text(m.parts), phrase),
        }
        for m in found.messages
    ]
    for key, group in found.groups:
        if _active(group, records[key]):
            listed += [
                {"id": line.id(group.id), "text": snippet(line.text, phrase)}
                for line in lines.lines(group.text)
                if line.hash is not None and fold(phrase) in fold(line.text)
            ]
    return listed


async def plan(
    store: Store, count: Callable[[str], int], phrase: str, found: Found, *, within: Access, thread_id: str | None
) -> tuple[Rewrite, dict[str, int]]:
    """The rewrite that forgets what `found` holds (found `within` those resources, and scrubbed from
    them), and its counts (lines of active logs, earlier copies, groups left empty, whether more
    messages are left for the next batch)."""
    records = await _records(store, found)
    groups: dict[str, tuple[str, int] | None] = {}
    active = earlier = 0
    for key, group in found.groups:
        text, n = lines.remove_containing(group.text, phrase)
        groups[group.id] = (text, count(text)) if text.strip() else None
        if _active(group, records[key]):
            active += n
        else:
            earlier += n
    chunks: dict[str, tuple[str, int] | None] = {}
    for _key, chunk in found.chunks:
        text, n = lines.remove_containing(chunk.text, phrase)
        chunks[chunk.id] = (text, count(text)) if text.strip() else None
        earlier += n
    messages: dict[str, list[int]] = {}
    for m in found.messages:
        messages.setdefault(m.thread_id, []).append(m.seq)
    counts = {
        "messages": len(found.messages),
        "lines": active,
        "earlier_lines": earlier,
        "groups": sum(1 for v in groups.values() if v is None),
    }
    event = user_event(EventType.FORGET, thread_id, within.only, selector="match", **counts)
    rewrite = Rewrite(
        {key: record.version for key, record in records.items() if record is not None},
        messages=messages,
        groups=groups,
        chunks=chunks,
        scrub=phrase,
        scrub_within=within,
        events=[event],
    )
    return rewrite, {**counts, "more": int(found.truncated)}
