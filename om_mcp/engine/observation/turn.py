"""The per-turn step: what an append schedules, and what happens before a context read.

The rule: a turn never waits on a model. An append only schedules background
work. Before a context read, buffered work is activated (no model call), and
only the `block_after` safety valve may make the turn wait, for at most
`turn_wait_seconds`, once per threshold crossing, and never while that cycle is
already running, the model's client is still loading, or the model is known to
be failing. Every other turn answers
from what is committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from om_mcp.engine.observation import activation
from om_mcp.engine.observation.thresholds import (
    message_threshold,
    past_block_after,
    reflection_buffer_due,
    reflection_due,
    reflection_must_block,
    should_buffer,
)
from om_mcp.store import RecordState, Snapshot

if TYPE_CHECKING:
    from om_mcp.engine.observation.engine import ObservationEngine


async def after_append(
    engine: ObservationEngine, thread_id: str, resource_id: str, state: RecordState, turn_ended: bool
) -> None:
    """Schedule what the new messages make due; never waits for a model."""
    if not engine.om.enabled or not (await engine.model_available("observation"))[0]:
        return
    key, limits = state.key, engine.limits
    threshold = message_threshold(limits, state.observation_tokens, engine.om.share_token_budget)
    if limits.buffer_tokens is not None:
        if should_buffer(limits, state.pending_tokens, state.last_buffered_at_tokens, threshold):
            await engine.worker.submit(key, "buffer", lambda: engine.buffer(thread_id, resource_id), rerun=True)
        elif engine.om.observation.buffer_on_idle and turn_ended:
            # The agent replied and is now idle: buffer what is there, however little.
            await engine.worker.submit(
                key, "buffer", lambda: engine.buffer(thread_id, resource_id, on_idle=True), rerun=True
            )
    elif state.pending_tokens >= threshold:
        await engine.worker.submit(
            key, "observe", lambda: engine.observe(thread_id, resource_id, "turn-sync"), rerun=True
        )
    await schedule_reflection(engine, thread_id, resource_id, state)


async def schedule_reflection(engine: ObservationEngine, thread_id: str, resource_id: str, state: RecordState) -> None:
    """Background reflection ahead of the threshold, or the threshold's own, in the background."""
    limits, tokens = engine.limits, state.observation_tokens
    if not (await engine.model_available("reflection"))[0]:
        return
    if (
        reflection_buffer_due(limits, tokens)
        and state.buffered_reflection_generation != state.generation
        and not engine.worker.busy(state.key, "reflect-buffer")
        and tokens < limits.observation_tokens
    ):
        await engine.worker.submit(
            state.key, "reflect-buffer", lambda: engine.reflect(thread_id, resource_id, "async-buffer")
        )
    elif reflection_due(limits, tokens, state.reflection_blocked_at) and (
        limits.reflection_buffer_at is None or state.buffered_reflection_generation != state.generation
    ):
        await engine.worker.submit(state.key, "reflect", lambda: engine.reflect(thread_id, resource_id, "turn-sync"))


async def before_context(engine: ObservationEngine, thread_id: str, resource_id: str, actor_model: str | None) -> None:
    """Activate what is due; past block_after, let this turn wait once for a sync cycle."""
    if not engine.om.enabled:
        return
    key = engine.record_key(thread_id, resource_id)
    snap = await engine.store.snapshot(key, thread_id)
    if snap is None:
        return
    trigger = activation.chunk_trigger(engine, snap, actor_model)
    changed = False
    if trigger is not None:
        changed = (await activation.activate_chunks(engine, snap, thread_id, trigger)).ran
    trigger = activation.reflection_trigger(engine, snap, actor_model)
    if trigger is not None:
        changed = await activation.activate_reflection(engine, snap, thread_id, trigger) or changed
    if changed:
        snap = await engine.store.snapshot(key, thread_id)
        if snap is None:
            return
    await _valve(engine, snap, thread_id, resource_id)


async def _valve(engine: ObservationEngine, snap: Snapshot, thread_id: str, resource_id: str) -> None:
    state, limits = snap.state, engine.limits
    key = state.key
    threshold = message_threshold(limits, state.observation_tokens, engine.om.share_token_budget)
    if past_block_after(limits, state.pending_tokens, threshold):
        await _wait_once(
            engine, key, "observe", _crossing(snap), lambda: engine.observe(thread_id, resource_id, "turn-sync")
        )
    elif reflection_due(limits, state.observation_tokens, state.reflection_blocked_at) and reflection_must_block(
        limits, state.observation_tokens
    ):
        await _wait_once(
            engine,
            key,
            "reflect",
            ("reflect", state.generation, state.observation_tokens),
            lambda: engine.reflect(thread_id, resource_id, "turn-sync"),
        )
    else:
        await schedule_reflection(engine, thread_id, resource_id, state)


def _crossing(snap: Snapshot) -> tuple:
    """A threshold crossing is identified by where the cursors stood when it was crossed."""
    return ("observe", tuple(sorted(snap.record.cursors.items())))


async def _wait_once(engine: ObservationEngine, key: str, op: str, crossing: tuple, run) -> None:
    operation = "reflection" if op == "reflect" else "observation"
    if not (await engine.model_available(operation))[0]:
        return  # a model known to be failing never makes a turn wait
    if engine.worker.busy(key, op):
        return  # the cycle for this crossing is already running: answer from what is committed
    job = await engine.worker.submit(key, op, run)
    if engine.waited.get((key, op)) == crossing:
        return  # this crossing already cost one turn its wait
    if await engine.model_failing(operation):
        return  # its backoff is over, but until a call succeeds the retry runs in the background
    if not (engine.reflector if op == "reflect" else engine.observer).router.warm:
        return  # the model's client is still loading (litellm: seconds): the cycle goes on in the background
    engine.waited[(key, op)] = crossing
    await job.wait(engine.om.turn_wait_seconds)
