"""Forgetting by phrase: what `forget --match` would remove, and the plan that removes it.

Every message and observation line holding the phrase (ignoring case), in the resources a
caller's access grants (one, or every one for the owner): messages go whole, lines with their
sub-bullets, from every generation and from buffered work, and with each line the retired lines
it took the place of (a merged line's sources, theirs in turn: `sources`), from the retired pile
and every earlier generation; the store then takes the phrase out of every other column that can
hold it (store/forget.py, by the registry) and leaves a phrase tombstone (store/phrases.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from om_mcp.engine.observation import lines
from om_mcp.engine.observation.events import EventType, user_event
from om_mcp.engine.text import message_text
from om_mcp.store import RETIRED, Access, Group, Record, Store
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


def sources(retired: Iterable[Group], hashes: Iterable[str]) -> set[str]:
    """The hashes of the retired lines that the lines of `hashes` took the place of (merged into them,
    superseded by them), and of the lines those took the place of, and so on: what a forget of the
    lines must take too, or recall finds them and a restore brings them back."""
    piles = [(g.replaced_by, {line.hash for line in lines.lines(g.text) if line.hash}) for g in retired]
    wanted, out = set(hashes), set[str]()
    while True:
        more = {h for by, held in piles if by in wanted for h in held} - wanted - out
        if not more:
            return out
        out |= more
        wanted |= more


def without_sources(
    generations: Sequence[tuple[int, Sequence[Group]]], active: int, gone: set[str], texts: dict[str, str]
) -> int:
    """Take the sources of the lines `gone` out of the retired pile and every earlier generation (not the
    active log, where a line is the user's to see and forget by its id); `texts`: each group's text as
    the plan leaves it so far (updated here). How many lines went."""
    retired = next((members for generation, members in generations if generation == RETIRED), [])
    taken = sources(retired, gone)
    removed = 0
    if not taken:
        return 0
    for generation, members in generations:
        if generation == active:
            continue
        for group in members:
            text, n = lines.remove_hashes(texts.get(group.id, group.text), taken)
            if n:
                texts[group.id] = text
                removed += n
    return removed


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
    texts: dict[str, str] = {}
    gone: dict[str, set[str]] = {}  # record key -> hashes of the lines that go
    active = earlier = 0
    needle = fold(phrase)
    for key, group in found.groups:
        gone.setdefault(key, set()).update(
            line.hash for line in lines.lines(group.text) if line.hash and needle in fold(line.text)
        )
        text, n = lines.remove_containing(group.text, phrase)
        texts[group.id] = text
        if _active(group, records[key]):
            active += n
        else:
            earlier += n
    for key, hashes in sorted(gone.items()):  # and the retired lines they took the place of
        record = records[key]
        if record is not None:
            generations = [*await store.generations(key), (RETIRED, await store.retired_groups(key))]
            earlier += without_sources(generations, record.generation, hashes, texts)
    groups: dict[str, tuple[str, int] | None] = {
        gid: ((text, count(text)) if text.strip() else None) for gid, text in texts.items()
    }
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
