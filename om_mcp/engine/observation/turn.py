"""The per-turn step: what an append schedules, and what happens before a context read.

The rule: a turn never waits on a model. An append only schedules background
work. Before a context read, buffered work is activated (no model call), and
only the `block_after` safety valve (or, with buffering off, the threshold
itself) may make the turn wait, for at most `turn_wait_seconds`, once per
threshold crossing, and never while the model is known to be failing.

The valve joins what is already running rather than racing it: a buffering run
in flight is waited for and its chunk activated (a second, synchronous cycle
would only make that run's result stale), and only when nothing runs does the
turn start its own observation. While the model's client is still loading
(litellm: seconds) a buffered turn does not wait at all: the run goes on in the
background and its chunk is activated by the next turn. With buffering off the
user asked for the turn to wait, so it waits, bounded, whatever is running.
"""

from __future__ import annotations

from typing import Protocol

import anyio

from om_mcp.engine.observation import activation
from om_mcp.engine.observation.cycle import CycleOutcome, Trigger
from om_mcp.engine.observation.deps import CycleDeps
from om_mcp.engine.observation.thresholds import (
    message_threshold,
    past_block_after,
    reflection_buffer_due,
    reflection_due,
    reflection_must_block,
    should_buffer,
)
from om_mcp.engine.worker import Worker
from om_mcp.store import RecordState, Snapshot


class TurnEngine(Protocol):
    """What the per-turn step needs of the engine: the cycles' dependencies, the worker that runs
    them in the background, the cycles it may start, and the crossings a turn already waited for."""

    deps: CycleDeps
    worker: Worker
    waited: dict[tuple[str, str], tuple]

    async def observe(self, thread_id: str, resource_id: str, trigger: Trigger) -> CycleOutcome: ...

    async def buffer(self, thread_id: str, resource_id: str, on_idle: bool = False) -> CycleOutcome: ...

    async def reflect(self, thread_id: str, resource_id: str, trigger: Trigger) -> CycleOutcome: ...

    async def warm_up(self) -> None: ...

    async def model_available(self, operation: str, manual: bool = False) -> tuple[bool, str]: ...

    async def model_failing(self, operation: str) -> bool: ...


async def after_append(
    engine: TurnEngine, thread_id: str, resource_id: str, state: RecordState, turn_ended: bool
) -> None:
    """Schedule what the new messages make due; never waits for a model."""
    if not engine.deps.om.enabled or not (await engine.model_available("observation"))[0]:
        return
    key, limits = state.key, engine.deps.limits
    threshold = message_threshold(limits, state.observation_tokens, engine.deps.om.share_token_budget)
    if limits.buffer_tokens is not None:
        if should_buffer(limits, state.pending_tokens, state.last_buffered_at_tokens, threshold):
            await engine.worker.submit(key, "buffer", lambda: engine.buffer(thread_id, resource_id), rerun=True)
        elif engine.deps.om.observation.buffer_on_idle and turn_ended:
            # The agent replied and is now idle: buffer what is there, however little.
            await engine.worker.submit(
                key, "buffer", lambda: engine.buffer(thread_id, resource_id, on_idle=True), rerun=True
            )
    elif state.pending_tokens >= threshold:
        await engine.worker.submit(
            key, "observe", lambda: engine.observe(thread_id, resource_id, "turn-sync"), rerun=True
        )
    elif state.pending_tokens >= threshold / 2 and not engine.deps.observer.router.warm:
        # Without buffering a turn waits for the observation at the threshold: have the model's
        # client loaded (litellm: seconds) before then, not during that wait.
        await engine.worker.submit("models", "warm-up", engine.warm_up)
    await schedule_reflection(engine, thread_id, resource_id, state)


async def schedule_reflection(engine: TurnEngine, thread_id: str, resource_id: str, state: RecordState) -> bool:
    """Background reflection ahead of the threshold, or the threshold's own, in the background.
    True if a cycle was started (with no worker running, it ran: the memory may have changed)."""
    limits, tokens = engine.deps.limits, state.observation_tokens
    if not (await engine.model_available("reflection"))[0]:
        return False
    if (
        reflection_buffer_due(limits, tokens)
        and state.buffered_reflection_generation != state.generation
        and not engine.worker.busy(state.key, "reflect-buffer")
        and tokens < limits.observation_tokens
    ):
        await engine.worker.submit(
            state.key, "reflect-buffer", lambda: engine.reflect(thread_id, resource_id, "async-buffer")
        )
        return True
    if reflection_due(limits, tokens, state.reflection_blocked_at) and (
        limits.reflection_buffer_at is None or state.buffered_reflection_generation != state.generation
    ):
        await engine.worker.submit(state.key, "reflect", lambda: engine.reflect(thread_id, resource_id, "turn-sync"))
        return True
    return False


async def before_context(
    engine: TurnEngine, thread_id: str, resource_id: str, actor_model: str | None, snap: Snapshot | None
) -> bool:
    """Activate what is due; past block_after, let this turn wait once for a sync cycle. `snap` is
    the state the context was read from; True if the memory may have changed since (read it again)."""
    if not engine.deps.om.enabled or snap is None:
        return False
    key = snap.record.key
    trigger = activation.chunk_trigger(engine.deps, snap, actor_model)
    changed = False
    if trigger is not None and (await activation.activate_chunks(engine.deps, snap, thread_id, trigger)).ran:
        # The activation may have taken the log past its threshold (or past block_after): the
        # reflection trigger reads the log as it is now, so a ready buffered reflection is used.
        changed = True
        snap = await engine.deps.store.snapshot(key, thread_id)
        if snap is None:
            return True
    trigger = activation.reflection_trigger(engine.deps, snap, actor_model)
    if trigger is not None and await activation.activate_reflection(engine.deps, snap, thread_id, trigger):
        changed = True
        snap = await engine.deps.store.snapshot(key, thread_id)
        if snap is None:
            return True
    return await _valve(engine, snap, thread_id, resource_id, actor_model) or changed


async def _valve(engine: TurnEngine, snap: Snapshot, thread_id: str, resource_id: str, actor_model: str | None) -> bool:
    """True if the turn waited for a cycle (or one ran inline): what it reads may have changed."""
    state, limits = snap.state, engine.deps.limits
    threshold = message_threshold(limits, state.observation_tokens, engine.deps.om.share_token_budget)
    if past_block_after(limits, state.pending_tokens, threshold):
        return await _observe_now(engine, snap, thread_id, resource_id, actor_model)
    if reflection_due(limits, state.observation_tokens, state.reflection_blocked_at) and reflection_must_block(
        limits, state.observation_tokens
    ):
        return await _reflect_now(engine, snap, thread_id, resource_id, actor_model)
    started = await schedule_reflection(engine, thread_id, resource_id, state)
    return started and engine.worker.group is None


def _crossing(snap: Snapshot) -> tuple:
    """A threshold crossing is identified by where the cursors stood when it was crossed."""
    return ("observe", tuple(sorted(snap.record.cursors.items())))


async def _may_wait(engine: TurnEngine, operation: str) -> bool:
    if not (await engine.model_available(operation))[0]:
        return False  # a model known to be failing never makes a turn wait
    # its backoff is over, but until a call succeeds the retry runs in the background
    return not await engine.model_failing(operation)


def _deadline(engine: TurnEngine) -> float:
    return anyio.current_time() + engine.deps.om.turn_wait_seconds


def _left(deadline: float) -> float:
    return max(0.0, deadline - anyio.current_time())


async def _observe_now(
    engine: TurnEngine, snap: Snapshot, thread_id: str, resource_id: str, actor_model: str | None
) -> bool:
    """Past block_after (buffering) or the threshold (buffering off): wait, once per crossing,
    for the run in flight and take its result, or observe now and wait for that. True if the
    turn waited (or the cycle ran inline): the memory may have changed."""
    key, limits = snap.state.key, engine.deps.limits
    crossing = _crossing(snap)
    if engine.waited.get((key, "observe")) == crossing or not await _may_wait(engine, "observation"):
        return False  # this crossing already cost one turn its wait, or the model is failing
    sync = limits.buffer_tokens is None
    warm = engine.deps.observer.router.warm
    deadline = _deadline(engine)
    running = engine.worker.job(key, "buffer")
    if running is not None:
        if not warm and not sync:
            return False  # the run in flight is loading its client: its chunk is activated by a later turn
        engine.waited[(key, "observe")] = crossing
        await running.wait_run(_left(deadline))
        after = await engine.deps.store.snapshot(key, thread_id)
        if after is None:
            return True
        trigger = activation.chunk_trigger(engine.deps, after, actor_model)
        if trigger is not None and (await activation.activate_chunks(engine.deps, after, thread_id, trigger)).ran:
            after = await engine.deps.store.snapshot(key, thread_id)
            if after is None:
                return True
        threshold = message_threshold(limits, after.state.observation_tokens, engine.deps.om.share_token_budget)
        if not past_block_after(limits, after.state.pending_tokens, threshold) or engine.worker.busy(key, "buffer"):
            return True
    elif await _held_elsewhere(engine, key, "buffer"):
        return False  # another process is buffering this record: its chunk is activated by a later turn
    # Nothing in flight (or the run just joined was not enough): observe now. With buffering off
    # the append already started this cycle, and the turn joins it.
    job = await engine.worker.submit(key, "observe", lambda: engine.observe(thread_id, resource_id, "turn-sync"))
    if not warm and not sync:
        # the model's client is still loading (litellm: seconds): the cycle goes on in the background
        return engine.worker.group is None
    engine.waited[(key, "observe")] = crossing
    await job.wait_run(_left(deadline))
    return True


async def _reflect_now(
    engine: TurnEngine, snap: Snapshot, thread_id: str, resource_id: str, actor_model: str | None
) -> bool:
    """The log is past its threshold and must be reflected before this turn: join the
    reflection in flight (and activate what it buffered), or reflect now; once per size.
    True if the turn waited (or the cycle ran inline)."""
    state, key = snap.state, snap.state.key
    crossing = ("reflect", state.generation, state.observation_tokens)
    if engine.waited.get((key, "reflect")) == crossing or not await _may_wait(engine, "reflection"):
        return False
    if not engine.deps.reflector.router.warm and engine.deps.limits.buffer_tokens is not None:
        await engine.worker.submit(key, "reflect", lambda: engine.reflect(thread_id, resource_id, "turn-sync"))
        return engine.worker.group is None  # the client is still loading: the reflection goes on in the background
    engine.waited[(key, "reflect")] = crossing
    deadline = _deadline(engine)
    running = engine.worker.job(key, "reflect-buffer")
    if running is not None:
        await running.wait_run(_left(deadline))
        after = await engine.deps.store.snapshot(key, thread_id)
        if (
            after is not None
            and (trigger := activation.reflection_trigger(engine.deps, after, actor_model)) is not None
        ):
            await activation.activate_reflection(engine.deps, after, thread_id, trigger)
        return True
    job = await engine.worker.submit(key, "reflect", lambda: engine.reflect(thread_id, resource_id, "turn-sync"))
    await job.wait_run(_left(deadline))
    return True


async def _held_elsewhere(engine: TurnEngine, key: str, op: str) -> bool:
    holder = await engine.deps.store.lease_holder(key, op)
    return holder is not None and holder != engine.deps.owner
