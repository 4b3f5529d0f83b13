"""`get_context` assembled: one snapshot read, the working memory, the blocks, the messages that fit."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from om_mcp.config import Config
from om_mcp.engine.context.build import compose, fit_messages
from om_mcp.engine.errors import InputError
from om_mcp.engine.observation.engine import ObservationEngine
from om_mcp.engine.results import ContextOut, message_out
from om_mcp.engine.working_memory.service import WorkingMemory
from om_mcp.store import Hints, Message

MIN_MAX_TOKENS = 100


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
) -> ContextOut:
    """What the agent should see now (`exists`: the thread is stored). Activates what is due
    first; only the block_after valve may wait, once."""
    config, count = observation.config, observation.counter.count_text
    age = config.observational_memory.other_threads.max_age_seconds()
    since = None if age is None else datetime.fromtimestamp(time.time() - age, UTC).isoformat()

    async def read_context():
        return await observation.store.context(
            observation.record_key(thread_id, resource_id),
            thread_id,
            budget,
            working_memory.context_location(thread_id, resource_id),
            others_since=since,  # threads quiet since before then show nothing raw anyway
        )

    read = await read_context() if exists else None
    # The step before the answer works on the state just read; only if it changed anything
    # (an activation, a cycle it waited for) is the context read again.
    if read is not None and await observation.before_context(thread_id, resource_id, actor_model, read.snapshot):
        read = await read_context()
    memory, wm_text = await working_memory.for_context(resource_id, read)
    window: list[Message] = []
    if read is None:
        blocks, _ = compose(config, [], Hints(), {}, wm_text, {}, budget, count)
        omitted, dropped, snap = 0, 0, None
    else:
        snap = read.snapshot
        blocks, dropped = compose(
            config, read.groups, snap.hints, snap.record.extracted, wm_text, read.other_threads, budget, count
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
        messages=[message_out(m) for m in window],
        omitted_messages=omitted,
        truncated=omitted > 0 or dropped > 0,
        status=await observation.status_of(snap, thread_id, resource_id) if with_status else None,
    )
