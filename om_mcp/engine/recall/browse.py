"""Recall, messages mode: page through a thread's raw messages by seq, from its start,
its end, or a message id (a range's first or last id), at low or high detail; page 0
reads the messages around an id (a search hit with the question before it and the
answer after it)."""

from __future__ import annotations

import json
from collections.abc import Callable

from om_mcp.engine.errors import InputError, NotFound
from om_mcp.engine.recall.query import DEFAULT_LIMIT, RecallOut, RecallQuery
from om_mcp.engine.recall.render import fit_to_budget, render_low, render_part
from om_mcp.store import Message, Store

HINT_RESERVE_TOKENS = 40


async def browse(store: Store, q: RecallQuery, resource_id: str, budget: int, count: Callable[[str], int]) -> RecallOut:
    thread_id = q.thread_id if q.target_thread_id in (None, "current") else q.target_thread_id
    if thread_id != q.thread_id:
        other = await store.get_thread(thread_id)
        if other is None or other.resource_id != resource_id:
            raise NotFound(f"unknown thread {thread_id!r}", field="target_thread_id")
    anchor: Message | None = None
    if q.cursor is not None:
        anchor = await store.find_message(resource_id, q.cursor, None if q.target_thread_id is None else thread_id)
        if anchor is None and ":" in q.cursor:
            start, _, end = q.cursor.partition(":")
            raise InputError(
                f"cursor {q.cursor!r} looks like a range; pass one id: cursor={start!r} to read from its start"
                f" or cursor={end!r} page=-1 to read back from its end",
                field="cursor",
            )
        if anchor is None:
            raise NotFound(f"no message {q.cursor!r} in this resource", field="cursor")
        thread_id = anchor.thread_id
    if q.part_index is not None:
        if anchor is None:
            raise InputError("part_index needs a cursor naming the message to read", field="cursor")
        return await read_part(store, anchor, q.part_index, q.char_offset, budget, count)
    around = q.page == 0 and anchor is not None
    page = 1 if q.page == 0 else q.page
    if around:
        assert anchor is not None
        messages, has_more = await _around(store, anchor, q), False
    else:
        messages, has_more = await _page(store, thread_id, anchor, q, page)
    if q.detail == "high" and messages:
        return await read_part(store, messages[0], 0, 0, budget, count)
    rendered = [render_low(m, q.part_type, q.tool_name).text() for m in messages]
    kept, truncated, _ = fit_to_budget(rendered, budget - HINT_RESERVE_TOKENS, count)
    text = "\n\n".join(kept) if kept else "No messages."
    next_call = None
    if truncated and kept and len(kept) < len(messages):
        next_call = arguments(q, cursor=messages[len(kept)].id, page=1)
    elif has_more:
        direction = 1 if page > 0 else -1
        next_call = arguments(q, cursor=anchor.id if anchor else None, page=page + direction)
    if next_call:
        text += f"\n\n(more: recall {next_call})"
    return RecallOut(mode="messages", text=text, count=len(kept), next=next_call, truncated=truncated)


async def _page(
    store: Store, thread_id: str, anchor: Message | None, q: RecallQuery, page: int
) -> tuple[list[Message], bool]:
    """A page in time order, and whether there is more in the direction of travel.
    The cursor message is included: page 1 starts with it, page -1 ends with it."""
    limit, skip = q.size, (abs(page) - 1) * q.size
    filters = (q.part_type, q.tool_name)
    if anchor is not None and page > 0:
        rows = await store.message_page(
            thread_id, after_seq=anchor.seq - 1, limit=limit + 1, offset=skip, part_filter=filters
        )
    elif anchor is not None:
        rows = await store.message_page(
            thread_id, before_seq=anchor.seq + 1, limit=limit + 1, offset=skip, newest_first=True, part_filter=filters
        )
    else:
        rows = await store.message_page(
            thread_id, limit=limit + 1, offset=skip, newest_first=q.anchor == "end", part_filter=filters
        )
    has_more = len(rows) > limit
    rows = rows[:limit]
    if anchor is not None and page < 0 or anchor is None and q.anchor == "end":
        rows.reverse()
    return rows, has_more


async def _around(store: Store, anchor: Message, q: RecallQuery) -> list[Message]:
    """The anchor in the middle of a page: half the limit before it, the rest after it, in time order."""
    filters = (q.part_type, q.tool_name)
    before = (q.size - 1) // 2
    earlier = (
        await store.message_page(
            anchor.thread_id, before_seq=anchor.seq, limit=before, newest_first=True, part_filter=filters
        )
        if before
        else []
    )
    later = await store.message_page(
        anchor.thread_id, after_seq=anchor.seq - 1, limit=q.size - len(earlier), part_filter=filters
    )
    return [*reversed(earlier), *later]


async def read_part(
    store: Store, message: Message, part_index: int, char_offset: int, budget: int, count: Callable[[str], int]
) -> RecallOut:
    """One part at full detail, a chunk at a time; past the last part, the next message."""
    if part_index >= len(message.parts):
        following = await store.message_page(message.thread_id, after_seq=message.seq, limit=1)
        if not following:
            return RecallOut(mode="messages", text="No more parts or messages after this one.")
        message, part_index, char_offset = following[0], 0, 0
    chunk_tokens = max(20, min(2000, budget - HINT_RESERVE_TOKENS - 20))
    part = render_part(message, part_index, char_offset, chunk_tokens=chunk_tokens, count=count)
    next_call: str | None
    if part.next_char_offset is not None:
        next_call = f'cursor="{message.id}" part_index={part_index} char_offset={part.next_char_offset}'
    elif part_index + 1 < part.part_count:
        next_call = f'cursor="{message.id}" part_index={part_index + 1} detail="high"'
    else:
        following = await store.message_page(message.thread_id, after_seq=message.seq, limit=1)
        next_call = f'cursor="{following[0].id}" page=1' if following else None
    text = part.rendered.text(indent_lines=False) + (
        f"\n\n(next: recall {next_call})" if next_call else "\n\n(end of the thread)"
    )
    return RecallOut(mode="messages", text=text, count=1, next=next_call)


def arguments(q: RecallQuery, **changes: object) -> str:
    """The recall arguments that continue `q`: what it set that differs from the defaults, changed."""
    defaults = RecallQuery(thread_id=q.thread_id)
    values = {
        **{
            k: v
            for k, v in q.model_dump().items()
            if k not in ("thread_id", "cursor", "page")
            and v != getattr(defaults, k)
            and not (k == "limit" and v == DEFAULT_LIMIT[q.mode])
        },
        **changes,
    }
    return " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in values.items() if v is not None)
