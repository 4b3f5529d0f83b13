"""Buffering: observation pre-computed in the background, stored as chunks that
continue exactly after the cursor (or the last chunk), and activated instantly
at the threshold (activation.py). Where buffering ends, activation begins."""

from __future__ import annotations

import uuid
from typing import Any

from om_mcp.engine.observation.cycle import Operation, now_iso
from om_mcp.engine.observation.selection import first_visible, last_visible, safe_prefix
from om_mcp.engine.observation.sync import ObserverStep, Produced, Selection, render_plain
from om_mcp.engine.observation.thresholds import enough_to_buffer, max_input_tokens
from om_mcp.store import Chunk, Hints, Message


def previous_with_chunks(groups_text: str, chunks: list[Chunk]) -> str:
    """The log the Observer sees when buffering: active groups, then the pending chunks."""
    return "\n\n".join(p for p in (groups_text, *(c.text for c in chunks)) if p and p.strip())


def chunk_for(cycle_id: str, thread_id: str, messages: list[Message], produced: Produced) -> Chunk:
    parsed = produced.result.parsed
    return Chunk(
        id=f"chunk-{uuid.uuid4().hex[:12]}",
        cycle_id=cycle_id,
        thread_id=thread_id,
        first_seq=messages[0].seq,
        last_seq=messages[-1].seq,
        first_message_id=first_visible(messages).id,
        last_message_id=last_visible(messages).id,
        message_count=len(messages),
        message_tokens=sum(m.tokens for m in messages),
        text=parsed.observations.strip(),
        tokens=produced.result.output_tokens,
        hints={"current_task": parsed.current_task, "suggested_response": parsed.suggested_response},
        last_message_at=messages[-1].created_at,
        created_at=now_iso(),
    )


class BufferStep(ObserverStep):
    kind: Operation = "buffering"
    buffered = True
    lease_op = "buffer"

    def __init__(self, *args: Any, on_idle: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.on_idle = on_idle
        self.skip_reason = "nothing new to buffer"

    async def select(self) -> Selection | None:
        deps, store = self.deps, self.deps.store
        snap = await store.snapshot(self.key, self.thread_id)
        if snap is None:
            return None
        tail = await store.tail(self.key, self.thread_id)
        messages = await store.unobserved(
            self.key, self.thread_id, after_seq=tail, max_tokens=max_input_tokens(deps.limits)
        )
        messages = safe_prefix(messages)
        if not messages or not enough_to_buffer(deps.limits, sum(m.tokens for m in messages), self.on_idle):
            if messages:
                self.skip_reason = "too little new content to buffer"
            await store.mark_buffered(self.key, snap.state.pending_tokens)  # see `store.commits.mark_buffered`
            return None
        groups = await store.groups(self.key)
        mine = [c for c in snap.chunks if c.thread_id == self.thread_id]
        hints = (
            Hints(**{k: mine[-1].hints.get(k) for k in ("current_task", "suggested_response")}) if mine else snap.hints
        )
        return Selection(
            snap.record,
            messages,
            previous_with_chunks(render_plain(groups), snap.chunks),
            hints,
            snap.thread,
            tail=tail,
            pending_tokens=snap.state.pending_tokens,
        )

    def end_fields(self, selection: Selection, produced: Produced) -> dict[str, Any]:
        fields = super().end_fields(selection, produced)
        fields["tokens_buffered"] = fields.pop("tokens_observed")
        return fields

    async def stale_reason(self, selection: Selection) -> str:
        now = await self.deps.store.tail(self.key, self.thread_id)
        moved = (
            f"an observation covered these messages first (tail {selection.tail} -> {now})"
            if now != selection.tail
            else None
        )
        return await self.deps.stale_reason(self.key, self.lease_op, moved, selection.record.edits)

    async def commit(self, selection: Selection, produced: Produced, events: list[dict[str, Any]]) -> bool:
        cycle_id = events[0]["cycle_id"]
        return await self.deps.store.append_chunks(
            self.key,
            lease=(self.lease_op, self.deps.owner),
            expected_tails={self.thread_id: selection.tail},
            chunks=[chunk_for(cycle_id, self.thread_id, selection.messages, produced)],
            extracted=produced.extracted,
            buffered_at_tokens=selection.pending_tokens,
            events=events,
            edits=selection.record.edits,
        )
