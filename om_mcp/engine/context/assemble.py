"""`get_context` assembled: one snapshot read, the working memory, the blocks, the messages that fit."""

from __future__ import annotations

import time as clock
from collections.abc import Callable
from datetime import UTC, date, datetime, time
from typing import Any

from om_mcp.config import Config
from om_mcp.engine import user_layer
from om_mcp.engine.context.build import compose, fit_messages
from om_mcp.engine.errors import InputError
from om_mcp.engine.observation import archive
from om_mcp.engine.observation.engine import ObservationEngine
from om_mcp.engine.results import ContextOut
from om_mcp.engine.user_layer import USER_RESOURCE
from om_mcp.engine.working_memory.render import render_for_context
from om_mcp.engine.working_memory.service import WorkingMemory
from om_mcp.store import Access, Group, Hints, Message, Store, resource_key

MIN_MAX_TOKENS = 100


class SeenMessages:
    """The messages the last contexts showed, kept between calls by seq: a window read again is read as
    its sizes, and only the messages new since are fetched and decoded (the store's `window`), so a turn
    costs what it adds, not what it shows. A stored message never changes but for its token count,
    which the sizes carry; a deleted one is not among them. Holds the `THREADS` threads read last."""

    THREADS = 64

    def __init__(self) -> None:
        self.rows: dict[int, Message] = {}  # what the store is given to reuse
        self._threads: dict[str, list[int]] = {}  # each thread's seqs in `rows`, least recently read first

    def keep(self, thread_id: str, messages: list[Message]) -> None:
        self.forget(thread_id)
        if len(self._threads) >= self.THREADS:
            self.forget(next(iter(self._threads)))
        self._threads[thread_id] = [m.seq for m in messages]
        self.rows.update((m.seq, m) for m in messages)

    def forget(self, thread_id: str) -> None:
        for seq in self._threads.pop(thread_id, ()):
            self.rows.pop(seq, None)


def context_budget(config: Config, max_tokens: int | None) -> int:
    """A context's token budget: the caller's max_tokens, else the configured output budget."""
    if max_tokens is None:
        return config.output_token_budget
    if max_tokens < MIN_MAX_TOKENS:
        raise InputError(f"max_tokens must be at least {MIN_MAX_TOKENS}", field="max_tokens")
    return max_tokens


async def assemble(
    observation: ObservationEngine,
    working_memory: WorkingMemory,
    thread_id: str,
    resource_id: str,
    *,
    exists: bool,
    budget: int,
    actor_model: str | None = None,
    with_status: bool = False,
    as_of: datetime | None = None,
    access: Access,
    seen: SeenMessages | None = None,
) -> ContextOut:
    """What the agent should see now (`exists`: the thread is stored). Activates what is due
    first; only the block_after valve may wait, once. `as_of`: what it would have seen then
    (nothing is activated or observed for that). The person layer is shown to an `access` that
    reaches it (the local owner's), never to a tenant's. `seen`: the windows read before, reused."""
    config, count = observation.config, observation.counter.count_text
    age = config.observational_memory.other_threads.max_age_seconds()
    since = None if age is None else datetime.fromtimestamp(clock.time() - age, UTC).isoformat()

    async def read_context():
        return await observation.store.context(
            observation.record_key(thread_id, resource_id),
            thread_id,
            budget,
            working_memory.context_location(thread_id, resource_id),
            others_since=since,  # threads quiet since before then show nothing raw anyway
            known=seen.rows if seen is not None else None,
        )

    if as_of is not None:
        return await _as_of(observation, working_memory, thread_id, resource_id, exists, budget, as_of)
    read = await read_context() if exists else None
    # The step before the answer works on the state just read; only if it changed anything
    # (an activation, a cycle it waited for) is the context read again.
    if read is not None and await observation.before_context(thread_id, resource_id, actor_model, read.snapshot):
        read = await read_context()
    memory, wm_text = await working_memory.for_context(resource_id, read)
    person = await user_memory(observation.store, config, resource_id, count) if access.allows(USER_RESOURCE) else ""
    window: list[Message] = []
    if read is None:
        blocks, _ = compose(config, [], Hints(), {}, wm_text, {}, budget, count, user_memory=person)
        omitted, dropped, snap = 0, 0, None
    else:
        if seen is not None:
            seen.keep(thread_id, read.window)
            for other, messages in read.other_threads.items():
                seen.keep(other, messages)
        snap = read.snapshot
        catalog = archive.catalog(read.archived, count, read.archived_total)
        blocks, dropped = compose(
            config,
            read.groups,
            snap.hints,
            snap.record.extracted,
            wm_text,
            read.other_threads,
            budget,
            count,
            user_memory=person,
            archive_catalog=catalog,
        )
        window, left_out = fit_messages(read.window, budget - count(blocks.system_text()))
        omitted = max(snap.state.thread_pending_messages - len(window), left_out)
    return ContextOut(
        thread_id=thread_id,
        resource_id=resource_id,
        system_text=blocks.system_text(),
        observations=blocks.observations or None,
        current_task=snap.hints.current_task if snap else None,
        suggested_response=snap.hints.suggested_response if snap else None,
        working_memory=memory,
        messages=window,
        omitted_messages=omitted,
        truncated=omitted > 0 or dropped > 0,
        status=await observation.status_of(snap, thread_id, resource_id) if with_status else None,
    )


async def user_memory(store: Store, config: Config, resource_id: str, count: Callable[[str], int]) -> str:
    """The person layer's block for a resource's context: empty (and nothing read) when it is off."""
    layer = config.observational_memory.user
    if not layer.enabled or resource_id == user_layer.USER_RESOURCE:
        return ""
    groups = await store.groups(resource_key(user_layer.USER_RESOURCE))
    memory = await store.get_working_memory("resource", user_layer.USER_RESOURCE)
    return user_layer.block(groups, memory, layer.tokens, count)


def parse_as_of(value: Any) -> datetime:
    """An `as_of` argument: an ISO date (the end of that day, UTC) or date-time (naive: UTC). Anything
    else, an empty or blank one included (it never means "now"), is refused naming the field."""
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            if len(text) == 10:
                day = date.fromisoformat(text)
                when = datetime.combine(day, time.max)
            else:
                when = datetime.fromisoformat(text)  # "" and blanks are refused here too
        except ValueError:
            raise InputError(
                f"as_of: cannot read {value!r}; give an ISO date (2026-03-02) or date-time (2026-03-02T14:30)",
                field="as_of",
            ) from None
    else:
        raise InputError("as_of must be an ISO date or date-time", field="as_of")
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)


async def _as_of(
    observation: ObservationEngine,
    working_memory: WorkingMemory,
    thread_id: str,
    resource_id: str,
    exists: bool,
    budget: int,
    at: datetime,
) -> ContextOut:
    """The context as it was at `at`: the log and the working memory as they were then, and the
    messages made by then that it had not observed yet."""
    config, count, store = observation.config, observation.counter.count_text, observation.store
    stamp = at.isoformat()
    groups: list[Group] = []
    wm_text, memory = "", None
    if exists:
        _, groups = await store.log_at(observation.record_key(thread_id, resource_id), stamp)
        where = working_memory.context_location(thread_id, resource_id)
        if where is not None:
            table, owner = where
            memory = working_memory.value(
                await store.working_memory_at("resource" if table == "resources" else "thread", owner, stamp)
            )
            wm_text = render_for_context(config.working_memory, memory)
    blocks, dropped = compose(config, groups, Hints(), {}, wm_text, {}, budget, count, now=at)
    window: list[Message] = []
    if exists:
        seen = [g.last_seq for g in groups if g.thread_id in (None, thread_id)]
        window = await store.messages_at(thread_id, max(seen, default=0), at, budget - count(blocks.system_text()))
    return ContextOut(
        thread_id=thread_id,
        resource_id=resource_id,
        system_text=blocks.system_text(),
        observations=blocks.observations or None,
        working_memory=memory,
        messages=window,
        truncated=dropped > 0,
        as_of=stamp,
    )
