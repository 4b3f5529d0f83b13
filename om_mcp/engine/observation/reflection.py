"""Reflection: the Reflector rewrites the active log into a new, shorter generation.

At the threshold it runs synchronously and commits generation+1; ahead of the
threshold ("async-buffer") it stores its rewrite, which activation.py swaps in
at the threshold with no model call. Groups added while it ran are kept after it.

In resource scope the log is split into one section per thread, and so is the
rewrite: each thread's part becomes its own group, so deleting a thread removes
exactly its part (only lines written outside every section are shared).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from om_mcp.engine.context.escape import neutralise
from om_mcp.engine.observation.cycle import EventOperation, Operation, Trigger, now_iso
from om_mcp.engine.observation.deps import CycleDeps
from om_mcp.engine.observation.events import EventType
from om_mcp.engine.observation.lines import user_stated
from om_mcp.engine.observation.observer import AgentResult
from om_mcp.engine.observation.parsing import ParsedOutput, parse_output
from om_mcp.engine.observation.thresholds import reflection_target, start_level
from om_mcp.engine.observation.transcript import thread_label
from om_mcp.engine.tokens import TokenCounter
from om_mcp.store import BufferedReflection, Group, NewGroup, Record


@dataclass
class Selection:
    record: Record
    groups: list[Group]
    text: str
    labels: dict[str, str]  # label -> thread id (resource scope)


@dataclass
class Reflected:
    result: AgentResult
    extracted: dict[str, Any]
    failures: list[dict[str, str]]


def render_for_reflector(groups: list[Group], sections: bool, obscure: bool) -> tuple[str, dict[str, str]]:
    """The log as the Reflector reads it; in resource scope one section per thread."""
    if not sections:
        return "\n\n".join(neutralise(g.text) for g in groups), {}
    labels: dict[str, str] = {}
    blocks = []
    for g in groups:  # model-written text, neutralised; the <thread> sections around it are ours
        if g.thread_id:
            label = thread_label(g.thread_id, obscure)
            labels[label] = g.thread_id
            blocks.append(f'<thread id="{label}">\n{neutralise(g.text.strip())}\n</thread>')
        else:
            blocks.append(neutralise(g.text.strip()))
    return "\n\n".join(blocks), labels


def log_text(parsed: ParsedOutput) -> str:
    """The whole rewritten log: the thread sections and the lines written outside them."""
    return "\n\n".join(p for p in (parsed.observations.strip(), parsed.unsectioned.strip()) if p)


def reflection_groups(text: str, covered: list[Group], labels: dict[str, str], counter: TokenCounter) -> list[NewGroup]:
    """The rewrite as groups: per thread section when the log had sections, else one group."""

    def spanning(text: str, groups: list[Group], thread_id: str | None) -> NewGroup:
        first = min(groups, key=lambda g: g.first_seq)
        last = max(groups, key=lambda g: g.last_seq)
        return NewGroup(
            text=text,
            tokens=counter.count_text(text),
            first_seq=first.first_seq,
            last_seq=last.last_seq,
            first_message_id=first.first_message_id,
            last_message_id=last.last_message_id,
            thread_id=thread_id,
            kind="reflection",
            observed_at=last.observed_at,
        )

    if not labels:
        return keep_user_stated([spanning(text, covered, None)], covered, counter)
    parsed = parse_output(f"<observations>\n{text}\n</observations>", multi_thread=True)
    out = []
    for label, section in parsed.threads.items():
        thread_id = labels.get(label)
        mine = [g for g in covered if g.thread_id == thread_id]
        if thread_id and mine and section.observations.strip():
            out.append(spanning(section.observations.strip(), mine, thread_id))
    shared = parsed.unsectioned.strip() if parsed.threads else text.strip()
    if shared:
        out.append(spanning(shared, covered, None))
    return keep_user_stated(out, covered, counter)


def keep_user_stated(groups: list[NewGroup], covered: list[Group], counter: TokenCounter) -> list[NewGroup]:
    """A line the user corrected survives every reflection: one the Reflector left out is put
    back at the end of its thread's part (or of the rewrite)."""
    written = {" ".join(line.split()) for g in groups for line in g.text.splitlines()}
    for source in covered:
        missing = [line.strip() for line in user_stated(source.text) if " ".join(line.split()) not in written]
        if not missing:
            continue
        target = next((g for g in groups if g.thread_id == source.thread_id), groups[-1] if groups else None)
        if target is None:
            continue
        target.text = target.text.rstrip() + "\n" + "\n".join(missing)
        target.tokens = counter.count_text(target.text)
        written.update(" ".join(line.split()) for line in missing)
    return groups


class ReflectStep:
    kind: Operation = "reflection"
    operation: EventOperation = "reflection"
    skip_reason = "no observations to reflect"

    def __init__(
        self, deps: CycleDeps, thread_id: str, resource_id: str, trigger: Trigger, instruction: str | None = None
    ):
        self.deps, self.thread_id, self.resource_id = deps, thread_id, resource_id
        self.trigger, self.instruction = trigger, instruction
        self.buffered = trigger == "async-buffer"
        self.lease_op = "reflect-buffer" if self.buffered else "reflect"
        self.key = deps.record_key(thread_id, resource_id)

    async def select(self) -> Selection | None:
        store = self.deps.store
        record = await store.record(self.key)
        groups = await store.groups(self.key) if record else []
        if not record or not groups:
            return None
        om = self.deps.om
        obscure = om.obscure_thread_ids if om.obscure_thread_ids is not None else True
        text, labels = render_for_reflector(groups, om.scope == "resource", obscure)
        return Selection(record, groups, text, labels)

    def tokens_in(self, selection: Selection) -> int:
        return sum(g.tokens for g in selection.groups)

    def window(self, selection: Selection) -> tuple:
        return (selection.record.generation, selection.groups[0].id)

    async def call(self, selection: Selection, base: dict[str, Any]) -> Reflected:
        deps = self.deps

        async def attempt_failed(level: int, reason: str) -> None:
            await deps.events.emit(
                [
                    {
                        **base,
                        "type": EventType.OBSERVATION_FAILED,
                        "operation_type": "reflection",
                        "failed_at": now_iso(),
                        "error": f"compression level {level}: {reason}",
                        "retrying": True,
                    }
                ]
            )

        result = await deps.reflector.reflect(
            selection.text,
            target_tokens=reflection_target(deps.limits, self.tokens_in(selection), self.buffered),
            start_level=start_level(self.trigger == "manual", deps.reflector.router.describe()),
            guidance=self.instruction,
            extracted=deps.extractors.previous(selection.record.extracted, "reflection"),
            on_attempt_failed=attempt_failed,
        )
        extracted, failures = await deps.extractors.run(
            "reflection", result, selection.record.extracted, deps.reflector.router
        )
        extracted = await deps.on_extracted(extracted, failures, base)
        return Reflected(result, extracted, failures)

    def end_fields(self, selection: Selection, produced: Reflected) -> dict[str, Any]:
        result = produced.result
        return {
            "tokens_observed": self.tokens_in(selection),
            "observation_tokens": result.output_tokens,
            "compression_level": result.level,
            "attempts": result.attempts,
            "usage": result.usage.model_dump(),
            "extracted_values": produced.extracted,
            "extraction_failures": produced.failures,
            "model": result.model,
            "generation_count": selection.record.generation + (0 if self.buffered else 1),
        }

    async def stale_reason(self, selection: Selection) -> str:
        record = await self.deps.store.record(self.key)
        was, now = selection.record.generation, record.generation if record else None
        moved = f"a newer generation replaced the log it reflected ({was} -> {now})" if now != was else None
        if moved is None and len(await self.deps.store.groups(self.key, was)) < len(selection.groups):
            moved = "groups it reflected were deleted"
        return await self.deps.stale_reason(self.key, self.lease_op, moved, selection.record.edits)

    async def commit(self, selection: Selection, produced: Reflected, events: list[dict[str, Any]]) -> bool:
        deps, result = self.deps, produced.result
        text = log_text(result.parsed)
        lease = (self.lease_op, deps.owner)
        if self.buffered:
            hints = {
                "suggested_response": result.parsed.suggested_response,
                "extracted": produced.extracted,
                "labels": selection.labels,
            }
            return await deps.store.store_buffered_reflection(
                self.key,
                BufferedReflection(
                    events[0]["cycle_id"],
                    selection.record.generation,
                    len(selection.groups),
                    self.tokens_in(selection),
                    text,
                    result.output_tokens,
                    hints,
                ),
                lease=lease,
                events=events,
                edits=selection.record.edits,
            )
        blocked = result.output_tokens if result.output_tokens >= deps.limits.observation_tokens else None
        return await deps.store.commit_reflection(
            self.key,
            lease=lease,
            generation=selection.record.generation,
            covered=len(selection.groups),
            groups=reflection_groups(text, selection.groups, selection.labels, deps.counter),
            extracted=produced.extracted,
            blocked_at=blocked,
            events=events,
            hints={self.thread_id: {"suggested_response": result.parsed.suggested_response}},
            edits=selection.record.edits,
        )

    async def after_commit(self, selection: Selection, produced: Reflected, base: dict[str, Any]) -> list[dict]:
        return []
