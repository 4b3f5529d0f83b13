"""Recall, threads mode: the user's conversations, newest first."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from om_mcp.engine.errors import InputError
from om_mcp.engine.recall.browse import HINT_RESERVE_TOKENS
from om_mcp.engine.recall.query import RecallOut, RecallQuery
from om_mcp.engine.recall.render import fit_to_budget
from om_mcp.store import Store


def iso_bound(value: str | None, field: str) -> str | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(f"{field} must be an ISO-8601 date or datetime, got {value!r}", field=field) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


async def list_threads(
    store: Store, q: RecallQuery, resource_id: str, budget: int, count: Callable[[str], int]
) -> RecallOut:
    page = max(q.page, 1)
    threads, has_more = await store.list_threads(
        resource_id,
        before=iso_bound(q.before, "before"),
        after=iso_bound(q.after, "after"),
        limit=q.size,
        offset=(page - 1) * q.size,
    )
    lines = [
        f"- {t.title or '(untitled)'} [{t.id}]{' ← current' if t.id == q.thread_id else ''}:"
        f" {t.message_count} messages, updated {t.updated_at[:16].replace('T', ' ')}"
        for t in threads
    ]
    kept, truncated, _ = fit_to_budget(lines, budget - HINT_RESERVE_TOKENS, count)
    next_call = f'mode="threads" limit={q.size} page={page + 1}' if has_more and not truncated else None
    text = "\n".join(kept) or "No threads."
    if truncated:
        text += "\n(more threads did not fit: raise max_tokens or lower limit)"
    elif next_call:
        text += f"\n(more: recall {next_call})"
    return RecallOut(mode="threads", text=text, count=len(kept), next=next_call, truncated=truncated)
