"""Observation now: the thread's unobserved messages become observations in one
cycle (trigger 'turn-sync' past the threshold, or 'manual').

`ObserverStep` holds what every Observer cycle shares (the request, the call,
the end event, the side effects); buffering and resource batches reuse it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from om_mcp.engine.observation import activation, side_effects
from om_mcp.engine.observation.cycle import EventOperation, Operation, Trigger
from om_mcp.engine.observation.deps import CycleDeps
from om_mcp.engine.observation.observer import AgentResult, ObserverRequest
from om_mcp.engine.observation.selection import first_visible, last_visible, leave_turn_raw, safe_prefix
from om_mcp.engine.observation.thresholds import max_input_tokens
from om_mcp.store import Group, Hints, Message, NewGroup, Record, Thread


@dataclass
class Selection:
    record: Record
    messages: list[Message]
    previous: str  # the log the Observer sees (plus pending chunks when buffering)
    hints: Hints
    thread: Thread | None
    tail: int = 0  # buffering: the last seq observed or buffered before these messages
    pending_tokens: int = 0


@dataclass
class Produced:
    result: AgentResult
    extracted: dict[str, Any]
    failures: list[dict[str, str]] = field(default_factory=list)


def render_plain(groups: list[Group]) -> str:
    return "\n\n".join(g.text for g in groups)


def group_for(text: str, tokens: int, messages: list[Message], thread_id: str) -> NewGroup:
    return NewGroup(
        text=text,
        tokens=tokens,
        first_seq=messages[0].seq,
        last_seq=messages[-1].seq,
        first_message_id=first_visible(messages).id,
        last_message_id=last_visible(messages).id,
        thread_id=thread_id,
        observed_at=messages[-1].created_at,
    )


class ObserverStep:
    """The parts every Observer cycle shares; subclasses choose messages and commit."""

    kind: Operation
    operation: EventOperation = "observation"

    def __init__(
        self, deps: CycleDeps, thread_id: str, resource_id: str, trigger: Trigger, instruction: str | None = None
    ):
        self.deps = deps
        self.thread_id = thread_id
        self.resource_id = resource_id
        self.trigger = trigger
        self.instruction = instruction
        self.key = deps.record_key(thread_id, resource_id)

    def tokens_in(self, selection: Selection) -> int:
        return sum(m.tokens for m in selection.messages)

    def window(self, selection: Selection) -> tuple:
        return (selection.messages[0].seq,)

    async def call(self, selection: Selection, base: dict[str, Any]) -> Produced:
        deps = self.deps
        request = ObserverRequest(
            messages=selection.messages,
            previous_observations=selection.previous,
            current_task=selection.hints.current_task,
            suggested_response=selection.hints.suggested_response,
            extracted=deps.extractors.previous(selection.record.extracted, "observation"),
            instruction=self.instruction,
            current_title=selection.thread.title if selection.thread else None,
        )
        result = await deps.observer.observe(request)  # an answer without observations fails the call
        extracted, failures = await deps.extractors.run(
            "observation", result, selection.record.extracted, deps.observer.router
        )
        extracted = await deps.on_extracted(extracted, failures, base)
        return Produced(result, extracted, failures)

    def end_fields(self, selection: Selection, produced: Produced) -> dict[str, Any]:
        parsed, messages = produced.result.parsed, selection.messages
        return {
            "tokens_observed": self.tokens_in(selection),
            "observation_tokens": produced.result.output_tokens,
            "messages_observed": len(messages),
            "seq_ranges": {self.thread_id: [messages[0].seq, messages[-1].seq]},
            "first_message_id": messages[0].id,
            "last_message_id": messages[-1].id,
            "current_task": parsed.current_task,
            "suggested_response": parsed.suggested_response,
            "extracted_values": produced.extracted,
            "extraction_failures": produced.failures,
            "usage": produced.result.usage.model_dump(),
            "model": produced.result.model,
        }

    async def after_commit(self, selection: Selection, produced: Produced, base: dict[str, Any]) -> list[dict]:
        return await side_effects.apply(
            self.deps, self.thread_id, self.resource_id, produced.result.parsed, produced.extracted, base
        )


class ObserveStep(ObserverStep):
    kind: Operation = "observation"
    buffered = False
    lease_op = "observe"
    skip_reason = "no unobserved messages"

    async def select(self) -> Selection | None:
        deps, store = self.deps, self.deps.store
        # Buffered chunks cover the oldest unobserved messages: they go in first, with no model call.
        await activation.activate(deps, self.thread_id, self.resource_id, "all")
        snap = await store.snapshot(self.key, self.thread_id)
        if snap is None:
            return None
        messages = await store.unobserved(self.key, self.thread_id, max_tokens=max_input_tokens(deps.limits))
        if self.trigger != "manual":
            messages = safe_prefix(leave_turn_raw(messages))
        if not messages:
            return None
        groups = await store.groups(self.key)
        return Selection(snap.record, messages, render_plain(groups), snap.hints, snap.thread)

    async def stale_reason(self, selection: Selection) -> str:
        record = await self.deps.store.record(self.key)
        was = selection.record.cursors.get(self.thread_id, 0)
        now = record.cursors.get(self.thread_id, 0) if record else 0
        moved = f"another cycle observed these messages first (cursor {was} -> {now})" if now != was else None
        return await self.deps.stale_reason(self.key, self.lease_op, moved, selection.record.edits)

    async def commit(self, selection: Selection, produced: Produced, events: list[dict[str, Any]]) -> bool:
        parsed, messages = produced.result.parsed, selection.messages
        group = group_for(parsed.observations.strip(), produced.result.output_tokens, messages, self.thread_id)
        return await self.deps.store.commit_observation(
            self.key,
            lease=(self.lease_op, self.deps.owner),
            expected_cursors={self.thread_id: selection.record.cursors.get(self.thread_id, 0)},
            new_cursors={self.thread_id: messages[-1].seq},
            groups=[group],
            hints={
                self.thread_id: {"current_task": parsed.current_task, "suggested_response": parsed.suggested_response}
            },
            extracted=produced.extracted,
            observed_at=messages[-1].created_at,
            events=events,
            edits=selection.record.edits,
        )
