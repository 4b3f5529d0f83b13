"""Reflection: the Reflector condenses the active log into a new, shorter generation, by
edits over its lines (engine/observation/edits.py) or, as a fallback, a rewrite. Every line
the new generation no longer holds goes to the retired pile (retire.py), and a log it cannot
bring under the threshold sends its oldest days to the archive (archive.py).

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

from om_mcp.engine.observation import archive
from om_mcp.engine.observation.cycle import EventOperation, Operation, Trigger, now_iso
from om_mcp.engine.observation.deps import CycleDeps
from om_mcp.engine.observation.edits import Labelled, label_log
from om_mcp.engine.observation.events import EventType
from om_mcp.engine.observation.lines import user_stated
from om_mcp.engine.observation.observer import AgentResult
from om_mcp.engine.observation.parsing import ParsedOutput, parse_output
from om_mcp.engine.observation.retire import Reason, retired_lines
from om_mcp.engine.observation.thresholds import reflection_target, start_level
from om_mcp.engine.observation.transcript import thread_label
from om_mcp.engine.tokens import TokenCounter
from om_mcp.neutral import block, neutralise
from om_mcp.store import BufferedReflection, Group, NewGroup, Record


@dataclass
class Selection:
    record: Record
    groups: list[Group]
    text: str
    labels: dict[str, str]  # label -> thread id (resource scope)
    labelled: Labelled | None = None  # edits mode: the log with a label on each line


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
            blocks.append(block("thread", g.text.strip(), f' id="{label}"'))
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


def edited_groups(covered: list[Group], texts: list[str], counter: TokenCounter) -> list[NewGroup]:
    """The covered groups after the Reflector's edits: each keeps its range and thread; a group
    left with nothing goes."""
    return [
        NewGroup(
            text=text,
            tokens=counter.count_text(text),
            first_seq=g.first_seq,
            last_seq=g.last_seq,
            first_message_id=g.first_message_id,
            last_message_id=g.last_message_id,
            thread_id=g.thread_id,
            kind=g.kind,
            observed_at=g.observed_at,
        )
        for g, text in zip(covered, texts)
        if text.strip()
    ]


def reflected(
    covered: list[Group],
    text: str,
    labels: dict[str, str],
    counter: TokenCounter,
    edited: list[str] | None = None,
    reasons: dict[str, Reason] | None = None,
) -> tuple[list[NewGroup], list[NewGroup]]:
    """(the new log's groups, the lines it retires) from a rewrite's text, or from the texts
    the Reflector's edits left (`edited`, with why each line went)."""
    if edited is not None:
        groups = edited_groups(covered, edited, counter)
    else:
        groups = reflection_groups(text, covered, labels, counter)
    return groups, retired_lines(covered, [g.text for g in groups], counter.count_text, reasons)


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
        sections = om.scope == "resource"
        text, labels = render_for_reflector(groups, sections, obscure)
        labelled = label_log(groups, sections, obscure) if om.reflection.edits else None
        return Selection(record, groups, text, labels, labelled)

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
            labelled=selection.labelled,
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
            "answered_with": "edits" if result.edits is not None else "rewrite",
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
        applied = result.edits
        if self.buffered:
            hints = {
                "suggested_response": result.parsed.suggested_response,
                "extracted": produced.extracted,
                "labels": selection.labels,
            }
            if applied is not None:  # activation makes the same groups from these
                hints["edited"], hints["reasons"] = applied.texts, applied.reasons
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
        groups, retired = reflected(
            selection.groups,
            text,
            selection.labels,
            deps.counter,
            applied.texts if applied is not None else None,
            applied.reasons if applied is not None else None,
        )
        blocked = None
        if result.output_tokens >= deps.limits.observation_tokens:
            # Reflection could not get the log under its threshold: its oldest days go to the archive.
            keep = round(deps.limits.observation_tokens * archive.ARCHIVE_SHARE)
            groups, archived = archive.split(groups, keep, deps.counter.count_text)
            retired += archived
            size = sum(g.tokens for g in groups)
            blocked = size if size >= deps.limits.observation_tokens else None
            events[0]["archived_days"] = len(archived)
        events[0]["retired_lines"] = len(retired) - events[0].get("archived_days", 0)
        return await deps.store.commit_reflection(
            self.key,
            lease=lease,
            generation=selection.record.generation,
            covered=len(selection.groups),
            groups=groups,
            extracted=produced.extracted,
            blocked_at=blocked,
            events=events,
            hints={self.thread_id: {"suggested_response": result.parsed.suggested_response}},
            edits=selection.record.edits,
            retired=retired,
        )

    async def after_commit(self, selection: Selection, produced: Reflected, base: dict[str, Any]) -> list[dict]:
        return []
