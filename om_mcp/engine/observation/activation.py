"""Activation: buffered work goes live with no model call.

Chunks activate when the window reaches the threshold, after the agent has been
idle long enough (`activate_after_idle`), or when the actor's model changed
(`activate_on_provider_change`); a buffered reflection replaces the lines it
covered when the log reaches its threshold (or on the same idle/model rules,
when reflection sets them explicitly: it never inherits them).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from om_mcp.config.durations import parse_idle
from om_mcp.engine.observation.cycle import CycleOutcome, now_iso
from om_mcp.engine.observation.deps import CycleDeps
from om_mcp.engine.observation.events import EventType, windows
from om_mcp.engine.observation.reflection import reflected
from om_mcp.engine.observation.thresholds import activation_prefix, message_threshold, past_block_after
from om_mcp.store import Chunk, Snapshot, Thread

# Prompt-cache lifetimes by provider, for "auto": activating buffered work once the
# actor's cache has expired anyway costs no extra cache misses.
CACHE_TTL_MS = {
    "anthropic": 5 * 60_000,
    "openai": 60 * 60_000,
    "deepseek": 60 * 60_000,
    "groq": 2 * 3_600_000,
    "gemini": 24 * 3_600_000,
    "google": 24 * 3_600_000,
    "vertex_ai": 24 * 3_600_000,
}
DEFAULT_CACHE_TTL_MS = 5 * 60_000


def cache_ttl_ms(model: str | None) -> int:
    """The prompt-cache lifetime of the actor's provider, from a 'provider/model' id."""
    if not model:
        return DEFAULT_CACHE_TTL_MS
    provider, _, name = model.lower().partition("/")
    if not name:
        name, provider = provider, ""
    if provider == "openai" or name.startswith(("gpt", "o1", "o3", "o4")):
        # Older OpenAI models keep prompt caches for minutes, newer ones for an hour.
        return 5 * 60_000 if name.startswith(("gpt-4", "gpt-3")) else CACHE_TTL_MS["openai"]
    if name.startswith("claude"):
        return CACHE_TTL_MS["anthropic"]
    if name.startswith("gemini"):
        return CACHE_TTL_MS["gemini"]
    return CACHE_TTL_MS.get(provider, DEFAULT_CACHE_TTL_MS)


def idle_ms(value: Any, actor_model: str | None) -> int | None:
    parsed = parse_idle(value)
    return cache_ttl_ms(actor_model) if parsed == "auto" else parsed  # type: ignore[return-value]


def actor_model(thread: Thread | None, given: str | None) -> str | None:
    """The actor's model: as given to the call, else from its last assistant message."""
    return given or (thread.last_model if thread else None)


def trigger_for(thread: Thread | None, idle_setting: Any, provider_change: bool, given_model: str | None) -> str | None:
    """'ttl' when the conversation went idle past the setting, 'provider_change' when the
    actor's model differs from the previous assistant message's, else None."""
    limit = idle_ms(idle_setting, actor_model(thread, given_model))
    if limit is not None and thread is not None and thread.last_assistant_at:
        idle = (time.time() - datetime.fromisoformat(thread.last_assistant_at).timestamp()) * 1000
        if idle >= limit:
            return "ttl"
    if provider_change and thread is not None:
        current = given_model or thread.last_model
        previous = thread.last_model if given_model else thread.previous_model
        if current and previous and current != previous:
            return "provider_change"
    return None


async def activate(deps: CycleDeps, thread_id: str, resource_id: str, trigger: str = "threshold") -> CycleOutcome:
    snap = await deps.store.snapshot(deps.record_key(thread_id, resource_id), thread_id)
    if snap is None:
        return CycleOutcome("activation", False, reason="nothing buffered")
    return await activate_chunks(deps, snap, thread_id, trigger)


def chunk_trigger(deps: CycleDeps, snap: Snapshot, given_model: str | None) -> str | None:
    if not snap.chunks:
        return None
    threshold = message_threshold(deps.limits, snap.state.observation_tokens, deps.om.share_token_budget)
    if snap.state.pending_tokens >= threshold:
        return "threshold"
    obs = deps.om.observation
    setting = obs.activate_after_idle if obs.activate_after_idle is not None else deps.om.activate_after_idle
    change = obs.activate_on_provider_change
    change = deps.om.activate_on_provider_change if change is None else change
    return trigger_for(snap.thread, setting, change, given_model)


async def activate_chunks(deps: CycleDeps, snap: Snapshot, thread_id: str, trigger: str) -> CycleOutcome:
    """Move a prefix of the buffered chunks into the log (all of them for trigger 'all')."""
    chunks, pending = snap.chunks, snap.state.pending_tokens
    threshold = message_threshold(deps.limits, snap.state.observation_tokens, deps.om.share_token_budget)
    if trigger == "all":
        prefix: list[Chunk] = list(chunks)
    else:
        force = past_block_after(deps.limits, pending, threshold)
        prefix = activation_prefix(deps.limits, chunks, pending, threshold, force)
    if not prefix:
        return CycleOutcome("activation", False, reason="nothing buffered")
    base = deps.event_base(prefix[0].cycle_id, snap.record.key, thread_id, snap.record.resource_id)
    if snap.thread is not None and snap.thread.last_assistant_id:
        base["anchor_message_id"] = snap.thread.last_assistant_id
    events = [
        {
            **base,
            "type": EventType.ACTIVATION,
            "cycle_id": c.cycle_id,
            "operation_type": "observation",
            "activated_at": now_iso(),
            "chunk_id": c.id,
            "chunks_activated": len(prefix),
            "tokens_activated": c.message_tokens,
            "observation_tokens": c.tokens,
            "messages_activated": c.message_count,
            "activated_thread_id": c.thread_id,
            "seq_ranges": {c.thread_id: [c.first_seq, c.last_seq]},
            "generation_count": snap.record.generation,
            "triggered_by": "threshold" if trigger == "all" else trigger,
            "windows": windows(deps.limits, deps.om.share_token_budget),
        }
        for c in prefix
    ]
    if not await deps.store.activate_chunks(snap.record.key, [c.id for c in prefix], events=events):
        return CycleOutcome("activation", False, reason="the buffered chunks changed meanwhile")
    await deps.events.emit(events, persisted=True)
    return CycleOutcome(
        "activation", True, prefix[0].cycle_id, tokens_in=sum(c.message_tokens for c in prefix), events=events
    )


def reflection_trigger(deps: CycleDeps, snap: Snapshot, given_model: str | None) -> str | None:
    buffered = snap.buffered_reflection
    if buffered is None or buffered.generation != snap.record.generation:
        return None
    if snap.state.observation_tokens >= deps.limits.observation_tokens:
        return "threshold"
    refl = deps.om.reflection  # never inherits the top-level settings
    return trigger_for(snap.thread, refl.activate_after_idle, refl.activate_on_provider_change, given_model)


async def activate_reflection(deps: CycleDeps, snap: Snapshot, thread_id: str, trigger: str) -> bool:
    """Swap a buffered reflection in for the groups it covered; False if the log moved on."""
    buffered = snap.buffered_reflection
    if buffered is None:
        return False
    store, key = deps.store, snap.record.key
    covered = (await store.groups(key, buffered.generation))[: buffered.covered]
    if not covered or len(covered) < buffered.covered:
        await store.discard_buffered_reflection(key)
        return False
    hints = buffered.hints
    reasons = {line: (why, by) for line, (why, by) in (hints.get("reasons") or {}).items()}
    groups, retired = reflected(
        covered, buffered.text, hints.get("labels") or {}, deps.counter, hints.get("edited"), reasons
    )
    event = {
        **deps.event_base(buffered.cycle_id, key, thread_id, snap.record.resource_id),
        "type": EventType.ACTIVATION,
        "operation_type": "reflection",
        "activated_at": now_iso(),
        "tokens_activated": buffered.tokens,
        "observation_tokens": buffered.tokens,
        "generation_count": snap.record.generation + 1,
        "triggered_by": trigger,
        "windows": windows(deps.limits, deps.om.share_token_budget),
    }
    if await store.commit_reflection(
        key,
        lease=None,
        generation=buffered.generation,
        covered=buffered.covered,
        groups=groups,
        extracted=buffered.hints.get("extracted"),
        blocked_at=None,
        events=[event],
        edits=snap.record.edits,
        retired=retired,
    ):
        await deps.events.emit([event], persisted=True)
        return True
    await store.discard_buffered_reflection(key)
    return False
