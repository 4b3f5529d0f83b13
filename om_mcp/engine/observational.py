"""Observational memory: the cycles that turn messages into observations and
keep the log bounded.

Every cycle has one shape: select (what is unobserved) -> call the model with
no transaction open -> parse -> commit in one transaction that re-checks the
state it started from -> emit events. Sync observation, background buffering,
manual runs, activation and reflection differ only in selection and commit.
"""

from __future__ import annotations

import json
import logging
import os
from contextlib import contextmanager
from contextvars import ContextVar
import socket
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Literal

import anyio

from om_mcp.config import Config, Limits
from om_mcp.engine.agents import AgentResult, CycleFailed, Observer, ObserverRequest, Reflector
from om_mcp.engine.durations import cache_ttl_ms, parse_idle
from om_mcp.engine.extractors import Extractors
from om_mcp.engine.results import (
    ActiveWindows, BufferedObservations, BufferedReflection as BufferedReflectionOut, BufferedWindows, Status,
    Window, Windows,
)
from om_mcp.engine.tokens import TokenCounter
from om_mcp.engine.worker import Worker
from om_mcp.models import ModelClient, ModelError, ModelRouter
from om_mcp.store import Message, Store
from om_mcp.store.om import Chunk, Group, NewGroup, Record, Snapshot

log = logging.getLogger(__name__)

Trigger = Literal["manual", "turn-sync", "async-buffer"]
EventListener = Callable[[dict[str, Any]], Awaitable[None]]

# Events emitted while a caller's block runs are also handed to it (the MCP
# adapter turns them into notifications for that request).
_collector: ContextVar[list[dict[str, Any]] | None] = ContextVar("om_event_collector", default=None)
MIN_REMAINING_TOKENS = 1000


@dataclass
class CycleOutcome:
    """What one cycle did, for tool results and tests."""

    operation: Literal["observation", "reflection", "buffering", "activation"]
    ran: bool
    cycle_id: str | None = None
    reason: str | None = None
    error: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Hooks:
    """Library callbacks; each receives the event payload. A hook that raises is logged."""

    on_observation_start: Callable[[dict], Any] | None = None
    on_observation_end: Callable[[dict], Any] | None = None
    on_reflection_start: Callable[[dict], Any] | None = None
    on_reflection_end: Callable[[dict], Any] | None = None
    on_debug_event: Callable[[dict], Any] | None = None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _role_model(om, role: str):
    if om.model is not None:
        return om.model
    own = getattr(om, role).model
    other = om.reflection.model if role == "observation" else om.observation.model
    return own if own is not None else other


class ObservationalMemory:
    def __init__(
        self,
        store: Store,
        config: Config,
        counter: TokenCounter,
        *,
        client: ModelClient | None = None,
        hooks: Hooks | None = None,
        worker: Worker | None = None,
    ):
        self.store = store
        self.om_store = store.om
        self.config = config
        self.om = config.observational_memory
        self.limits: Limits = self.om.limits()
        self.counter = counter
        self.hooks = hooks or Hooks()
        self.worker = worker or Worker()
        self.listeners: list[EventListener] = []
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_ttl = self.om.lease_seconds
        self.turn_wait_seconds = self.om.turn_wait_seconds
        self.extractors = Extractors(self.om, counter)
        obs, refl = self.om.observation, self.om.reflection
        self.observer = Observer(
            ModelRouter(_role_model(self.om, "observation"), obs.model_settings, self.om.call_policy, client),
            counter,
            instruction=obs.instruction,
            thread_title=obs.thread_title,
            extractors=self.extractors.inline("observation") + self._working_memory_extractor(),
            previous_tokens=obs.previous_observer_tokens,
            observe_attachments=obs.observe_attachments,
        )
        self.reflector = Reflector(
            ModelRouter(_role_model(self.om, "reflection"), refl.model_settings, self.om.call_policy, client),
            counter,
            instruction=refl.instruction,
            extractors=self.extractors.inline("reflection"),
        )

    # -- keys and reads --------------------------------------------------------------

    def record_key(self, thread_id: str, resource_id: str) -> str:
        return f"resource:{resource_id}" if self.om.scope == "resource" else f"thread:{thread_id}"

    async def record(self, thread_id: str, resource_id: str) -> Record:
        key = self.record_key(thread_id, resource_id)
        thread = None if self.om.scope == "resource" else thread_id
        return await self.om_store.ensure_record(key, self.om.scope, resource_id, thread)

    async def unobserved(self, thread_id: str, resource_id: str, all_threads: bool = False) -> list[Message]:
        key = self.record_key(thread_id, resource_id)
        scope_thread = None if (all_threads and self.om.scope == "resource") else thread_id
        return await self.om_store.unobserved(key, resource_id, scope_thread)

    def message_threshold(self, observation_tokens: int) -> int:
        if not self.om.share_token_budget:
            return self.limits.message_tokens
        total = self.limits.message_tokens + self.limits.observation_tokens
        return max(total - observation_tokens, self.limits.message_tokens)

    async def snapshot(self, thread_id: str, resource_id: str) -> Snapshot:
        """The record and its windows, in one read (pending counts every thread
        of the resource in resource scope)."""
        key = self.record_key(thread_id, resource_id)
        scope_thread = None if self.om.scope == "resource" else thread_id
        snap = await self.om_store.snapshot(key, resource_id, scope_thread, thread_id)
        if snap is None:
            await self.record(thread_id, resource_id)
            snap = await self.om_store.snapshot(key, resource_id, scope_thread, thread_id)
        return snap

    async def status(self, thread_id: str, resource_id: str, snap: Snapshot | None = None) -> Status:
        snap = snap or await self.snapshot(thread_id, resource_id)
        record, chunks, buffered = snap.record, snap.chunks, snap.buffered_reflection
        threshold = self.message_threshold(snap.observation_tokens)
        buffering = self.worker.busy(record.key, "buffer")
        reflecting = self.worker.busy(record.key, "reflect-buffer")
        return Status(
            record_id=record.key,
            thread_id=thread_id,
            resource_id=resource_id,
            scope=self.om.scope,
            message_count=snap.message_count,
            unobserved_messages=snap.pending_messages,
            windows=Windows(
                active=ActiveWindows(
                    messages=Window(tokens=snap.pending_tokens, threshold=threshold),
                    observations=Window(tokens=snap.observation_tokens, threshold=self.limits.observation_tokens),
                ),
                buffered=BufferedWindows(
                    observations=BufferedObservations(
                        chunks=len(chunks),
                        message_tokens=sum(c.message_tokens for c in chunks),
                        projected_message_removal=sum(
                            c.message_tokens for c in self._activation_prefix(chunks, snap.pending_tokens, threshold)
                        ),
                        observation_tokens=sum(c.observation_tokens for c in chunks),
                        status="running" if buffering else ("complete" if chunks else "idle"),
                    ),
                    reflection=BufferedReflectionOut(
                        input_observation_tokens=buffered.input_tokens if buffered else 0,
                        observation_tokens=buffered.tokens if buffered else 0,
                        status="running" if reflecting else ("complete" if buffered else "idle"),
                    ),
                ),
            ),
            generation_count=record.generation,
            last_observed_at=record.last_observed_at,
            observation_enabled=self.om.enabled,
        )

    # -- the turn: what append_messages and get_context trigger ---------------------------

    async def after_append(self, thread_id: str, resource_id: str, turn_ended: bool = False) -> list[dict]:
        """Never waits for a model: schedules buffering, or a sync observation
        in the background when buffering is off."""
        if not self.om.enabled:
            return []
        snap = await self.snapshot(thread_id, resource_id)
        record, pending, observation_tokens = snap.record, snap.pending_tokens, snap.observation_tokens
        threshold = self.message_threshold(observation_tokens)
        if self.limits.buffer_tokens is not None:
            if self._should_buffer(record, pending, threshold):
                await self.worker.submit(
                    record.key, "buffer", lambda: self.buffer(thread_id, resource_id), rerun=True
                )
            elif self.om.observation.buffer_on_idle and turn_ended:
                # The agent replied and is now idle: buffer what is there, however little.
                await self.worker.submit(
                    record.key, "buffer", lambda: self.buffer(thread_id, resource_id, on_idle=True), rerun=True
                )
            await self._maybe_buffer_reflection(thread_id, resource_id, record, observation_tokens, snap)
        else:
            if pending >= threshold:
                await self.worker.submit(
                    record.key, "observe", lambda: self.observe(thread_id, resource_id, "turn-sync"), rerun=True
                )
            await self._maybe_reflect(thread_id, resource_id, wait=False, snap=snap)
        return []

    async def before_context(self, thread_id: str, resource_id: str, actor_model: str | None = None) -> Snapshot:
        """The step before the agent's model call: activate what is due, and only
        past block_after (or with buffering off) observe synchronously, waiting
        at most `turn_wait_seconds` (the cycle goes on in the background)."""
        snap = await self.snapshot(thread_id, resource_id)
        if not self.om.enabled:
            return snap
        record, pending = snap.record, snap.pending_tokens
        key = record.key
        threshold = self.message_threshold(snap.observation_tokens)
        if self.limits.buffer_tokens is not None:
            trigger = await self._activation_trigger(thread_id, record, snap.chunks, pending, threshold, actor_model)
            if trigger is not None:
                await self.activate(thread_id, resource_id, trigger)
                snap = await self.snapshot(thread_id, resource_id)
                pending = snap.pending_tokens
            needs_sync = self.limits.block_after is not None and pending >= self.limits.block_after
        else:
            needs_sync = pending >= threshold
        if needs_sync:
            job = await self.worker.submit(key, "observe", lambda: self.observe(thread_id, resource_id, "turn-sync"))
            await job.wait(self.turn_wait_seconds)
            snap = await self.snapshot(thread_id, resource_id)
        if await self._maybe_reflect(thread_id, resource_id, wait=True, snap=snap):
            snap = await self.snapshot(thread_id, resource_id)
        return snap

    # -- observation -----------------------------------------------------------------

    def _select_for_turn(self, messages: list[Message]) -> list[Message]:
        """Leave the turn in progress raw: the last user message and what follows
        it stay in the agent's context, unless nothing else would be observed."""
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
        if last_user is None or last_user == 0:
            return messages
        return messages[:last_user]

    async def observe(
        self, thread_id: str, resource_id: str, trigger: Trigger, instruction: str | None = None,
        progress: Callable[[str], Awaitable[None]] | None = None,
    ) -> CycleOutcome:
        """Observe the unobserved messages now (sync path)."""
        if self.om.scope == "resource":
            from om_mcp.engine.resource_scope import observe_resource

            return await observe_resource(self, thread_id, resource_id, trigger, instruction, progress)
        record = await self.record(thread_id, resource_id)
        key = record.key
        if not await self.om_store.acquire_lease(key, "observe", self.owner, self.lease_ttl):
            return CycleOutcome("observation", False, reason="another process is observing this thread")
        try:
            # Buffered chunks cover the oldest unobserved messages: apply them
            # first (no model call), then observe only what they do not cover.
            await self._activate_all(thread_id, resource_id)
            record = await self.record(thread_id, resource_id)
            messages = await self.unobserved(thread_id, resource_id)
            if trigger != "manual":
                # OM-18: wait for a pending tool call's result, never split them.
                messages = _safe_prefix(self._select_for_turn(messages))
            if not messages:
                return CycleOutcome("observation", False, reason="no unobserved messages")
            return await self._observe_messages(record, thread_id, resource_id, messages, trigger, instruction, progress)
        finally:
            await self.om_store.release_lease(key, "observe", self.owner)

    async def _observe_messages(
        self, record: Record, thread_id: str, resource_id: str, messages: list[Message], trigger: Trigger,
        instruction: str | None, progress: Callable[[str], Awaitable[None]] | None,
    ) -> CycleOutcome:
        key = record.key
        cycle_id = uuid.uuid4().hex
        tokens_in = sum(m.tokens for m in messages)
        groups = await self.om_store.groups(key)
        base = {**self._event_base(cycle_id, record, thread_id), "trigger": trigger}
        started = time.monotonic()
        await self._emit([{
            **base, "type": "data-om-observation-start", "operation_type": "observation", "trigger": trigger,
            "started_at": _now(), "tokens_to_observe": tokens_in, "config": self._config_snapshot(),
        }])
        if progress:
            await progress(f"observing {len(messages)} messages ({tokens_in} tokens)")
        request = ObserverRequest(
            messages=messages,
            previous_observations=_render_plain(groups),
            current_task=record.current_task,
            suggested_response=record.suggested_response,
            extracted=self.extractors.previous(record.extracted, "observation"),
            instruction=instruction,
        )
        try:
            async with self._renewing(key, "observe", cycle_id):
                result = await self.observer.observe(request)
                extracted, failures = await self.extractors.run(
                    "observation", result, record.extracted, self.observer.router, messages
                )
        except (ModelError, CycleFailed) as error:
            return await self._failed(base, "observation", "data-om-observation-failed", error, tokens_in, started)
        if not result.parsed.observations.strip():
            return await self._failed(
                base, "observation", "data-om-observation-failed", CycleFailed("the Observer returned no observations"),
                tokens_in, started,
            )
        group = NewGroup(
            text=result.parsed.observations.strip(), tokens=result.output_tokens,
            first_seq=messages[0].seq, last_seq=messages[-1].seq,
            first_message_id=_first_visible(messages).id, last_message_id=_last_visible(messages).id,
            thread_id=thread_id, observed_at=messages[-1].created_at,
        )
        hints = {
            "current_task": result.parsed.current_task, "suggested_response": result.parsed.suggested_response,
            "extracted": extracted, "last_observed_at": messages[-1].created_at,
        }
        end = {
            **base, "type": "data-om-observation-end", "operation_type": "observation", "trigger": trigger,
            "completed_at": _now(), "duration_ms": _ms(started), "tokens_observed": tokens_in,
            "observation_tokens": result.output_tokens, "observations": group.text,
            "current_task": result.parsed.current_task, "suggested_response": result.parsed.suggested_response,
            "extracted_values": extracted, "extraction_failures": failures, "usage": _usage(result),
            "message_ids": [m.id for m in messages], "model": result.model,
        }
        committed = await self.om_store.commit_observation(
            key, expected_cursors={thread_id: record.cursors.get(thread_id, 0)},
            new_cursors={thread_id: messages[-1].seq}, groups=[group], hints=hints,
            lease=("observe", self.owner), events=[end],
        )
        if not committed:
            return await self._failed(
                base, "observation", "data-om-observation-failed",
                CycleFailed("discarded: the thread was observed by someone else meanwhile"), tokens_in, started,
            )
        events = [end]
        events += await self._maybe_retitle(thread_id, result, cycle_id, base)
        await self._maybe_update_working_memory(thread_id, resource_id, result)
        await self._store_custom_paths(thread_id, extracted)
        await self._emit(events, persisted=True)
        await self._hook("on_observation_end", end)
        return CycleOutcome("observation", True, cycle_id, tokens_in=tokens_in, tokens_out=result.output_tokens,
                            events=events)

    # -- buffering (background observation) ------------------------------------------------

    def _should_buffer(self, record: Record, pending: int, threshold: int) -> bool:
        interval = self.limits.buffer_tokens
        if not interval or pending <= 0:
            return False
        step = interval / 2 if pending >= threshold - 1.1 * interval else interval
        return int(pending // step) > int(record.last_buffered_at_tokens // step)

    async def buffer(self, thread_id: str, resource_id: str, on_idle: bool = False) -> CycleOutcome:
        """Observe the messages after the last chunk into a new buffered chunk."""
        record = await self.record(thread_id, resource_id)
        key = record.key
        if not await self.om_store.acquire_lease(key, "buffer", self.owner, self.lease_ttl):
            return CycleOutcome("buffering", False, reason="another process is buffering this thread")
        try:
            tail = await self.om_store.tail(key, thread_id)
            candidates = await self.om_store.unobserved(key, resource_id, thread_id, after_seq=tail)
            candidates = _safe_prefix(candidates)
            pending = (await self.snapshot(thread_id, resource_id)).pending_tokens
            tokens_in = sum(m.tokens for m in candidates)
            if not candidates:
                return CycleOutcome("buffering", False, reason="nothing new to buffer")
            if not on_idle and tokens_in < (self.limits.buffer_tokens or 0) / 2:
                return CycleOutcome("buffering", False, reason="too little new content to buffer")
            cycle_id = uuid.uuid4().hex
            base = {**self._event_base(cycle_id, record, thread_id), "trigger": "async-buffer"}
            started = time.monotonic()
            await self._emit([{
                **base, "type": "data-om-buffering-start", "operation_type": "observation",
                "started_at": _now(), "tokens_to_buffer": tokens_in, "config": self._config_snapshot(),
            }])
            chunks = await self.om_store.chunks(key)
            groups = await self.om_store.groups(key)
            previous = _join_text([_render_plain(groups), *(c.observations for c in chunks)])
            request = ObserverRequest(
                messages=candidates, previous_observations=previous,
                current_task=(chunks[-1].hints.get("current_task") if chunks else None) or record.current_task,
                suggested_response=(chunks[-1].hints.get("suggested_response") if chunks else None)
                or record.suggested_response,
                extracted=self.extractors.previous(record.extracted, "observation"),
            )
            try:
                async with self._renewing(key, "buffer", cycle_id):
                    result = await self.observer.observe(request)
                    extracted, failures = await self.extractors.run(
                        "observation", result, record.extracted, self.observer.router, candidates
                    )
            except (ModelError, CycleFailed) as error:
                return await self._failed(base, "observation", "data-om-buffering-failed", error, tokens_in, started)
            text = result.parsed.observations.strip()
            if not text:
                return CycleOutcome("buffering", False, cycle_id, reason="the Observer returned nothing to buffer")
            chunk = Chunk(
                id=f"chunk-{uuid.uuid4().hex[:12]}", cycle_id=cycle_id, thread_id=thread_id,
                first_seq=candidates[0].seq, last_seq=candidates[-1].seq,
                message_ids=[m.id for m in candidates], message_tokens=tokens_in, observations=text,
                observation_tokens=result.output_tokens,
                hints={
                    "current_task": result.parsed.current_task, "suggested_response": result.parsed.suggested_response,
                    "extracted": extracted, "first_message_id": _first_visible(candidates).id,
                    "last_message_id": _last_visible(candidates).id,
                },
                last_message_at=candidates[-1].created_at, created_at=_now(),
            )
            end = {
                **base, "type": "data-om-buffering-end", "operation_type": "observation", "completed_at": _now(),
                "duration_ms": _ms(started), "tokens_buffered": tokens_in, "buffered_tokens": result.output_tokens,
                "observations": text, "extracted_values": extracted, "extraction_failures": failures,
                "usage": _usage(result), "message_ids": chunk.message_ids, "model": result.model,
            }
            if not await self.om_store.append_chunk(
                key, expected_tail=tail, chunk=chunk, lease=("buffer", self.owner), events=[end],
                buffered_at_tokens=pending,
            ):
                return await self._failed(
                    base, "observation", "data-om-buffering-failed",
                    CycleFailed("discarded: the messages were observed meanwhile"), tokens_in, started,
                )
            events = [end] + await self._maybe_retitle(thread_id, result, cycle_id, base)
            await self._maybe_update_working_memory(thread_id, resource_id, result)
            await self._store_custom_paths(thread_id, extracted)
            await self._emit(events, persisted=True)
            await self._hook("on_observation_end", end)
            return CycleOutcome("buffering", True, cycle_id, tokens_in=tokens_in, tokens_out=result.output_tokens,
                                events=events)
        finally:
            await self.om_store.release_lease(key, "buffer", self.owner)

    # -- activation (no model call) ------------------------------------------------------

    def _activation_prefix(self, chunks: list[Chunk], pending: int, threshold: int, force: bool = False) -> list[Chunk]:
        """The prefix of chunks an activation takes now (OM-29)."""
        if not chunks:
            return []
        ratio = self.limits.buffer_activation
        keep = threshold * (1 - ratio) if ratio <= 1 else ratio
        target = max(0.0, pending - keep)
        min_remaining = min(MIN_REMAINING_TOKENS, keep)
        over = under = None
        total = 0
        for index, chunk in enumerate(chunks):
            total += chunk.message_tokens
            if total >= target and over is None:
                over = (index, total)
            if total < target:
                under = (index, total)
        if force and over and pending - over[1] >= min_remaining:
            count = over[0] + 1
        elif over and over[1] - target <= 0.95 * keep and pending - over[1] >= min_remaining:
            count = over[0] + 1
        elif under and pending - under[1] >= min_remaining:
            count = under[0] + 1
        elif over:
            count = over[0] + 1
        else:
            count = 1
        return chunks[:count]

    async def _activation_trigger(
        self, thread_id: str, record: Record, chunks: list[Chunk], pending: int, threshold: int,
        actor_model: str | None,
    ) -> str | None:
        if not chunks:
            return None
        if pending >= threshold:
            return "threshold"
        idle = self._idle_ms(self.om.observation.activate_after_idle, self.om.activate_after_idle, actor_model)
        if idle is not None:
            last = await self._last_assistant_at(thread_id)
            if last is not None and (time.time() - last) * 1000 >= idle:
                return "ttl"
        on_change = self.om.observation.activate_on_provider_change
        if on_change is None:
            on_change = self.om.activate_on_provider_change
        if on_change and await self._provider_changed(thread_id, actor_model):
            return "provider_change"
        return None

    def _idle_ms(self, own: Any, inherited: Any, actor_model: str | None) -> int | None:
        value = parse_idle(own) if own is not None else parse_idle(inherited)
        if own is False:
            return None
        if value == "auto":
            return cache_ttl_ms(actor_model)
        return value

    async def _last_assistant_at(self, thread_id: str) -> float | None:
        latest = await self.store.thread_messages(thread_id, newest_first=True, limit=1, roles=("assistant",))
        if not latest:
            return None
        return datetime.fromisoformat(latest[0].created_at).timestamp()

    async def _provider_changed(self, thread_id: str, actor_model: str | None) -> bool:
        recent = await self.store.thread_messages(thread_id, newest_first=True, limit=20, roles=("assistant",))
        models = [m.metadata.get("model") for m in recent if m.metadata.get("model")]
        current = actor_model or (models[0] if models else None)
        previous = models[1] if actor_model is None and len(models) > 1 else (models[0] if actor_model and models else None)
        return bool(current and previous and current != previous)

    async def activate(self, thread_id: str, resource_id: str, trigger: str = "threshold") -> CycleOutcome:
        snap = await self.snapshot(thread_id, resource_id)
        record, chunks, pending = snap.record, snap.chunks, snap.pending_tokens
        threshold = self.message_threshold(snap.observation_tokens)
        force = self.limits.block_after is not None and pending >= self.limits.block_after
        prefix = chunks if trigger == "all" else self._activation_prefix(chunks, pending, threshold, force)
        return await self._activate(record, thread_id, prefix, "threshold" if trigger == "all" else trigger)

    async def _activate_all(self, thread_id: str, resource_id: str) -> None:
        await self.activate(thread_id, resource_id, "all")

    async def _activate(self, record: Record, thread_id: str, prefix: list[Chunk], trigger: str) -> CycleOutcome:
        if not prefix:
            return CycleOutcome("activation", False, reason="nothing buffered")
        cycle_id = uuid.uuid4().hex
        base = self._event_base(cycle_id, record, thread_id)
        groups = [
            NewGroup(
                text=c.observations, tokens=c.observation_tokens, first_seq=c.first_seq, last_seq=c.last_seq,
                first_message_id=c.hints.get("first_message_id") or c.message_ids[0],
                last_message_id=c.hints.get("last_message_id") or c.message_ids[-1],
                thread_id=c.thread_id, observed_at=c.last_message_at,
            )
            for c in prefix
        ]
        events = [
            {
                **base, "type": "data-om-activation", "operation_type": "observation", "activated_at": _now(),
                "chunk_id": c.id, "chunks_activated": len(prefix), "tokens_activated": c.message_tokens,
                "observation_tokens": c.observation_tokens, "messages_activated": len(c.message_ids),
                "message_ids": c.message_ids, "generation_count": record.generation, "triggered_by": trigger,
                "observations": c.observations,
            }
            for c in prefix
        ]
        ok = await self.om_store.activate_chunks(record.key, [c.id for c in prefix], groups, events=events)
        if not ok:
            return CycleOutcome("activation", False, reason="the buffered chunks changed meanwhile")
        await self._emit(events, persisted=True)
        return CycleOutcome("activation", True, cycle_id, tokens_in=sum(c.message_tokens for c in prefix),
                            events=events)

    # -- reflection ------------------------------------------------------------------------

    def _start_level(self, trigger: Trigger) -> int:
        if trigger == "manual":
            return 0
        return 2 if "gemini-2.5-flash" in self.reflector.router.describe() else 1

    async def _maybe_reflect(
        self, thread_id: str, resource_id: str, wait: bool, snap: Snapshot | None = None
    ) -> bool:
        """Reflect or activate a buffered reflection when due; True if it may have changed the log."""
        snap = snap or await self.snapshot(thread_id, resource_id)
        record, tokens = snap.record, snap.observation_tokens
        if tokens < self.limits.observation_tokens:
            return False
        if self.limits.reflection_buffer_at is not None:
            buffered = snap.buffered_reflection
            if buffered is not None and buffered.generation == record.generation:
                groups = await self.om_store.groups(record.key)
                await self._activate_reflection(thread_id, resource_id, record, buffered, groups)
                return True
            if self.limits.reflection_block_after is not None and tokens < self.limits.reflection_block_after:
                await self._maybe_buffer_reflection(thread_id, resource_id, record, tokens, snap)
                return False
        if record.reflection_blocked_at == tokens:
            return False  # the last sync reflection could not get below the threshold; wait for new content
        job = await self.worker.submit(
            record.key, "reflect", lambda: self.reflect(thread_id, resource_id, "turn-sync")
        )
        if wait:
            await job.wait(self.turn_wait_seconds)
        return True

    async def _maybe_buffer_reflection(
        self, thread_id: str, resource_id: str, record: Record, observation_tokens: int, snap: Snapshot
    ) -> None:
        at = self.limits.reflection_buffer_at
        if at is None or observation_tokens < at or self.worker.busy(record.key, "reflect-buffer"):
            return
        buffered = snap.buffered_reflection
        if buffered is not None and buffered.generation == record.generation:
            return
        await self.worker.submit(
            record.key, "reflect-buffer", lambda: self.reflect(thread_id, resource_id, "async-buffer")
        )

    async def reflect(
        self, thread_id: str, resource_id: str, trigger: Trigger, instruction: str | None = None,
        progress: Callable[[str], Awaitable[None]] | None = None,
    ) -> CycleOutcome:
        """Rewrite the active log into a new generation (or, for async-buffer,
        store the rewrite until the threshold activates it)."""
        record = await self.record(thread_id, resource_id)
        key = record.key
        op = "reflect-buffer" if trigger == "async-buffer" else "reflect"
        if not await self.om_store.acquire_lease(key, op, self.owner, self.lease_ttl):
            return CycleOutcome("reflection", False, reason="another process is reflecting")
        try:
            groups = await self.om_store.groups(key)
            if not groups:
                return CycleOutcome("reflection", False, reason="no observations to reflect")
            tokens_in = sum(g.tokens for g in groups)
            cycle_id = uuid.uuid4().hex
            base = {**self._event_base(cycle_id, record, thread_id), "trigger": trigger}
            started = time.monotonic()
            start_type = "data-om-buffering-start" if trigger == "async-buffer" else "data-om-observation-start"
            await self._emit([{
                **base, "type": start_type, "operation_type": "reflection", "trigger": trigger,
                "started_at": _now(), "tokens_to_observe": tokens_in, "config": self._config_snapshot(),
            }])  # _emit calls on_reflection_start with this payload
            if progress:
                await progress(f"reflecting over {tokens_in} observation tokens")
            target = (
                round(0.75 * tokens_in) if trigger == "async-buffer" else self.limits.observation_tokens
            )

            async def attempt_failed(level: int, reason: str) -> None:
                await self._emit([{
                    **base, "type": "data-om-observation-failed", "operation_type": "reflection",
                    "failed_at": _now(), "error": f"compression level {level}: {reason}", "retrying": True,
                }])
                if progress:
                    await progress(f"level {level}: {reason}; compressing harder")

            try:
                async with self._renewing(key, op, cycle_id):
                    result = await self.reflector.reflect(
                        _render_plain(groups), target_tokens=target, start_level=self._start_level(trigger),
                        guidance=instruction, extracted=self.extractors.previous(record.extracted, "reflection"),
                        on_attempt_failed=attempt_failed,
                    )
                    extracted, failures = await self.extractors.run(
                        "reflection", result, record.extracted, self.reflector.router, []
                    )
            except (ModelError, CycleFailed) as error:
                failed_type = "data-om-buffering-failed" if trigger == "async-buffer" else "data-om-observation-failed"
                return await self._failed(base, "reflection", failed_type, error, tokens_in, started)
            group = _reflection_group(result.parsed.observations.strip(), result.output_tokens, groups)
            hints = {"suggested_response": result.parsed.suggested_response, "extracted": extracted}
            end = {
                **base, "type": "data-om-buffering-end" if trigger == "async-buffer" else "data-om-observation-end",
                "operation_type": "reflection", "trigger": trigger, "completed_at": _now(),
                "duration_ms": _ms(started), "tokens_observed": tokens_in, "observation_tokens": result.output_tokens,
                "compression_level": result.level, "attempts": result.attempts, "usage": _usage(result),
                "extracted_values": extracted, "extraction_failures": failures, "model": result.model,
                "generation_count": record.generation + (0 if trigger == "async-buffer" else 1),
            }
            if trigger == "async-buffer":
                from om_mcp.store.om import BufferedReflection

                ok = await self.om_store.store_buffered_reflection(
                    key,
                    BufferedReflection(cycle_id, record.generation, len(groups), tokens_in, group.text,
                                       result.output_tokens, hints),
                    lease=(op, self.owner), events=[end],
                )
            else:
                blocked = result.output_tokens if result.output_tokens >= self.limits.observation_tokens else None
                ok = await self.om_store.commit_reflection(
                    key, generation=record.generation, covered=len(groups), groups=[group], hints=hints,
                    lease=(op, self.owner), events=[end], blocked_at=blocked,
                )
            if not ok:
                return await self._failed(
                    base, "reflection", "data-om-observation-failed",
                    CycleFailed("discarded: the log changed generation meanwhile"), tokens_in, started,
                )
            await self._emit([end], persisted=True)
            await self._hook("on_reflection_end", end)
            return CycleOutcome("reflection", True, cycle_id, tokens_in=tokens_in, tokens_out=result.output_tokens,
                                events=[end])
        finally:
            await self.om_store.release_lease(key, op, self.owner)

    async def _activate_reflection(self, thread_id, resource_id, record: Record, buffered, groups: list[Group]) -> None:
        group = _reflection_group(buffered.text, buffered.tokens, groups[: buffered.covered])
        cycle_id = buffered.cycle_id
        event = {
            **self._event_base(cycle_id, record, thread_id), "type": "data-om-activation",
            "operation_type": "reflection", "activated_at": _now(), "tokens_activated": buffered.tokens,
            "observation_tokens": buffered.tokens, "generation_count": record.generation + 1,
            "triggered_by": "threshold",
        }
        if await self.om_store.commit_reflection(
            record.key, generation=buffered.generation, covered=buffered.covered, groups=[group],
            hints=buffered.hints, events=[event],
        ):
            await self._emit([event], persisted=True)
        else:
            await self.om_store.discard_buffered_reflection(record.key)

    # -- working memory kept by the Observer (observation.manage_working_memory) -----------

    WORKING_MEMORY_SLUG = "working-memory"

    def _working_memory_extractor(self) -> list[tuple[str, str]]:
        wm_config = self.config.working_memory
        if not (self.om.observation.manage_working_memory and wm_config.enabled):
            return []
        if wm_config.mode == "schema":
            how = ("a JSON object with only the fields to change (null deletes a field), matching this schema: "
                   + json.dumps(wm_config.schema_, ensure_ascii=False))
        else:
            how = "the complete updated Markdown note, following this template:\n" + (wm_config.effective_template or "")
        return [(self.WORKING_MEMORY_SLUG,
                 "Only when this conversation taught something durable about the user or the task, write the "
                 f"working memory as {how}. Leave the tag out when nothing changed.")]

    async def _maybe_update_working_memory(self, thread_id: str, resource_id: str, result: AgentResult) -> None:
        update = result.parsed.extracted.get(self.WORKING_MEMORY_SLUG)
        if not update or not self._working_memory_extractor():
            return
        from om_mcp.engine import working_memory as wm

        wm_config = self.config.working_memory.model_copy(update={"read_only": False})
        scope = wm_config.scope
        key = resource_id if scope == "resource" else thread_id

        def apply(current: str | None) -> str | None:
            value = current
            if wm_config.mode == "schema" and current:
                value = json.loads(current)
            outcome = wm.apply_update(wm_config, value, update)
            if not outcome.changed:
                return None
            return outcome.value if isinstance(outcome.value, str) else json.dumps(outcome.value, ensure_ascii=False)

        try:
            await self.store.update_working_memory(scope, key, apply, resource_id=resource_id)
        except (ValueError, wm.WorkingMemoryError) as error:  # a bad update is logged, never fatal
            log.warning("observer's working-memory update refused: %s", error)

    async def _store_custom_paths(self, thread_id: str, extracted: dict[str, Any]) -> None:
        """Values whose extractor sets metadata_key_path also go to that dot path
        under the thread's `om` metadata."""
        paths = self.extractors.custom_paths(extracted)
        if not paths:
            return
        thread = await self.store.get_thread(thread_id)
        if thread is None:
            return
        om_meta = dict(thread.metadata.get("om") or {})
        for path, value in paths.items():
            node = om_meta
            *parents, leaf = path.split(".")
            for part in parents:
                if not isinstance(node.get(part), dict):
                    node[part] = {}
                node = node[part]
            node[leaf] = value
        await self.store.update_thread(thread_id, metadata={"om": om_meta})

    # -- helpers -------------------------------------------------------------------------

    async def _maybe_retitle(self, thread_id: str, result: AgentResult, cycle_id: str, base: dict) -> list[dict]:
        title = result.parsed.thread_title
        if not (self.om.observation.thread_title and title):
            return []
        title = title.strip()[:120]
        old, changed = await self.store.set_generated_title(thread_id, title)
        if not changed:
            return []
        event = {**base, "type": "data-om-thread-update", "thread_id": thread_id, "new_title": title,
                 "timestamp": _now()}
        if old:
            event["old_title"] = old
        await self.om_store.add_events([event])
        return [event]

    def _event_base(self, cycle_id: str, record: Record, thread_id: str) -> dict[str, Any]:
        return {"cycle_id": cycle_id, "record_id": record.key, "thread_id": thread_id,
                "resource_id": record.resource_id}

    def _config_snapshot(self) -> dict[str, Any]:
        return {"message_tokens": self.limits.message_tokens, "observation_tokens": self.limits.observation_tokens,
                "scope": self.om.scope}

    async def _failed(
        self, base: dict, operation: str, event_type: str, error: Exception, tokens: int, started: float
    ) -> CycleOutcome:
        event = {
            **base, "type": event_type, "operation_type": operation, "failed_at": _now(),
            "duration_ms": _ms(started), "tokens_attempted": tokens, "error": str(error),
        }
        log.warning("%s cycle %s failed: %s", operation, base.get("cycle_id"), error)
        await self.om_store.add_events([event])
        await self._emit([event], persisted=True)
        await self._hook("on_observation_end" if operation == "observation" else "on_reflection_end", event)
        kind = "buffering" if "buffering" in event_type else operation
        return CycleOutcome(kind, False, base.get("cycle_id"), error=str(error), tokens_in=tokens, events=[event])

    @contextmanager
    def collect(self):
        """Gather the events emitted (in this task and tasks it starts) during the block."""
        events: list[dict[str, Any]] = []
        token = _collector.set(events)
        try:
            yield events
        finally:
            _collector.reset(token)

    async def _emit(self, events: list[dict[str, Any]], persisted: bool = False) -> None:
        """Persist (unless already persisted in a commit) and tell listeners;
        a failing listener or hook never affects the cycle."""
        if not persisted:
            await self.om_store.add_events(events)
        collected = _collector.get()
        if collected is not None:
            collected.extend(events)
        for event in events:
            if event["type"].endswith("-start"):
                name = "on_reflection_start" if event.get("operation_type") == "reflection" else "on_observation_start"
                await self._hook(name, event)
            await self._hook("on_debug_event", event)
            for listener in list(self.listeners):
                try:
                    await listener(event)
                except Exception as error:  # noqa: BLE001 - a listener must never break a cycle
                    log.warning("event listener failed: %s", error)

    async def _hook(self, name: str, payload: dict[str, Any]) -> None:
        hook = getattr(self.hooks, name, None)
        if hook is None:
            return
        try:
            outcome = hook(payload)
            if hasattr(outcome, "__await__"):
                await outcome
        except Exception as error:  # noqa: BLE001
            log.warning("hook %s raised: %s", name, error)

    def _renewing(self, key: str, op: str, cycle_id: str):
        return _LeaseRenewal(self, key, op, cycle_id)


class _LeaseRenewal:
    """Keeps a lease alive while a model call runs, so a slow call is not
    mistaken for a dead process; a crash stops renewal and the lease expires."""

    def __init__(self, engine: ObservationalMemory, key: str, op: str, cycle_id: str):
        self.engine, self.key, self.op, self.cycle_id = engine, key, op, cycle_id

    async def __aenter__(self):
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._renew)
        return self

    async def _renew(self) -> None:
        while True:
            await anyio.sleep(self.engine.lease_ttl / 3)
            await self.engine.om_store.acquire_lease(
                self.key, self.op, self.engine.owner, self.engine.lease_ttl, self.cycle_id
            )

    async def __aexit__(self, exc_type, exc, tb):
        self._group.cancel_scope.cancel()
        if exc is not None and not isinstance(exc, anyio.get_cancelled_exc_class()):
            # anyio wraps a body's exception in an ExceptionGroup when the group
            # has child tasks; the cycle must see the plain ModelError/CycleFailed.
            await self._group.__aexit__(None, None, None)
            return False
        return await self._group.__aexit__(exc_type, exc, tb)


def _reflection_group(text: str, tokens: int, covered: list[Group]) -> NewGroup:
    """One group standing for `covered`, its range spanning all of theirs (in
    resource scope, groups are committed per batch, not in message order)."""
    first = min(covered, key=lambda g: g.first_seq)
    last = max(covered, key=lambda g: g.last_seq)
    return NewGroup(
        text=text, tokens=tokens, first_seq=first.first_seq, last_seq=last.last_seq,
        first_message_id=first.first_message_id, last_message_id=last.last_message_id,
        kind="reflection", observed_at=last.observed_at,
    )


def _render_plain(groups: list[Group]) -> str:
    return "\n\n".join(g.text for g in groups)


def _join_text(pieces: list[str]) -> str:
    return "\n\n".join(p for p in pieces if p and p.strip())


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _usage(result: AgentResult) -> dict[str, Any]:
    return result.usage.model_dump()


def _visible(message: Message) -> bool:
    return message.role != "system"


def _first_visible(messages: list[Message]) -> Message:
    return next((m for m in messages if _visible(m)), messages[0])


def _last_visible(messages: list[Message]) -> Message:
    return next((m for m in reversed(messages) if _visible(m)), messages[-1])


def _safe_prefix(messages: list[Message]) -> list[Message]:
    """Drop a trailing tool call still waiting for its result, so a buffered
    chunk never separates a call from its result."""
    answered = {
        p.get("tool_call_id") for m in messages for p in m.parts if p.get("type") == "tool-result"
    }
    while messages:
        last = messages[-1]
        calls = [p for p in last.parts if p.get("type") == "tool-call"]
        if calls and any(p.get("tool_call_id") not in answered or p.get("tool_call_id") is None for p in calls) and not any(
            p.get("type") == "tool-result" for p in last.parts
        ):
            messages = messages[:-1]
            continue
        break
    return messages
