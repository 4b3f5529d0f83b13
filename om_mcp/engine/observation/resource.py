"""Resource scope: one observation log per user or project, fed by all its threads.

The busiest threads are picked, packed into batches of at most
`max_tokens_per_batch` and observed in parallel, synchronously or buffered
(cursors and chunks are per thread, and commits are conditional, so buffering
works here too). Each batch is one cycle that commits on its own: a failed
batch leaves only its threads unobserved, and a thread the model skipped stays
unobserved for the next run. Nothing is dropped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import anyio

from om_mcp.engine.observation import activation, side_effects
from om_mcp.engine.observation.buffering import chunk_for, previous_with_chunks
from om_mcp.engine.observation.cycle import (
    CycleOutcome,
    EventOperation,
    Operation,
    Trigger,
    exclusive_with,
    refusal,
    run_cycle,
)
from om_mcp.engine.observation.deps import CycleDeps
from om_mcp.engine.observation.observer import ObserverRequest
from om_mcp.engine.observation.parsing import ParsedOutput
from om_mcp.engine.observation.selection import batches, choose_threads, leave_turn_raw, safe_prefix
from om_mcp.engine.observation.sync import Produced, group_for, render_plain
from om_mcp.engine.observation.thresholds import enough_to_buffer, max_input_tokens, message_threshold
from om_mcp.engine.observation.transcript import thread_label
from om_mcp.store import Hints, Message, Record


@dataclass
class Batch:
    record: Record
    threads: dict[str, list[Message]]
    starts: dict[str, int]  # per thread: the cursor (sync) or tail (buffered) the batch continues from
    hints: dict[str, Hints]
    previous: str
    pending_tokens: int = 0


class BatchStep:
    """One batch of threads, observed in one Observer call."""

    operation: EventOperation = "observation"

    def __init__(
        self,
        deps: CycleDeps,
        key: str,
        resource_id: str,
        batch: Batch,
        *,
        buffered: bool,
        trigger: Trigger,
        instruction: str | None,
    ):
        self.deps, self.key, self.resource_id, self.batch = deps, key, resource_id, batch
        self.buffered = buffered
        self.kind: Operation = "buffering" if buffered else "observation"
        self.lease_op = "buffer" if buffered else "observe"
        self.trigger = trigger
        self.instruction = instruction
        self.thread_id = next(iter(batch.threads))
        self.skip_reason = "nothing to observe"
        obscure = deps.om.obscure_thread_ids if deps.om.obscure_thread_ids is not None else True
        self.labels = {thread_label(t, obscure): t for t in batch.threads}

    async def select(self) -> Batch:
        return self.batch

    def tokens_in(self, batch: Batch) -> int:
        return sum(m.tokens for msgs in batch.threads.values() for m in msgs)

    def window(self, batch: Batch) -> tuple:
        return tuple(sorted((t, msgs[0].seq) for t, msgs in batch.threads.items()))

    async def call(self, batch: Batch, base: dict[str, Any]) -> dict[str, Produced]:
        deps = self.deps
        only = next(iter(batch.hints.values())) if len(batch.threads) == 1 else Hints()
        request = ObserverRequest(
            messages=[m for msgs in batch.threads.values() for m in msgs],
            previous_observations=batch.previous,
            current_task=only.current_task,
            suggested_response=only.suggested_response,
            threads={label: batch.threads[t] for label, t in self.labels.items()},
            extracted=deps.extractors.previous(batch.record.extracted, "observation"),
            instruction=self.instruction,
        )
        result = await deps.observer.observe(request)
        sections: dict[str, ParsedOutput] = {
            self.labels[label]: parsed for label, parsed in result.parsed.threads.items() if label in self.labels
        }
        if not sections and len(batch.threads) == 1 and result.parsed.observations.strip():
            sections = {self.thread_id: result.parsed}
        produced = {}
        for thread_id, parsed in sections.items():
            if not parsed.observations.strip():
                continue  # not observed: the thread stays raw and is retried next time
            # Values written outside every section belong to each thread of the batch.
            parsed = replace(parsed, extracted={**result.parsed.extracted, **parsed.extracted})
            part = replace(result, parsed=parsed, output_tokens=deps.counter.count_text(parsed.observations))
            extracted, failures = await deps.extractors.run(
                "observation", part, batch.record.extracted, deps.observer.router
            )
            extracted = await deps.on_extracted(extracted, failures, {**base, "thread_id": thread_id})
            produced[thread_id] = Produced(part, extracted, failures)
        return produced  # not empty: the Observer refuses an answer without observations for the batch

    def end_fields(self, batch: Batch, produced: dict[str, Produced]) -> dict[str, Any]:
        first = next(iter(produced.values()))
        extracted = {k: v for p in produced.values() for k, v in p.extracted.items()}
        return {
            "tokens_buffered" if self.buffered else "tokens_observed": self.tokens_in(batch),
            "observation_tokens": sum(p.result.output_tokens for p in produced.values()),
            "observed_thread_ids": list(produced),
            "extracted_values": extracted,
            "seq_ranges": {t: [batch.threads[t][0].seq, batch.threads[t][-1].seq] for t in produced},
            "extraction_failures": [f for p in produced.values() for f in p.failures],
            "usage": first.result.usage.model_dump(),
            "model": first.result.model,
        }

    async def stale_reason(self, batch: Batch) -> str:
        moved = await self._moved(batch, batch.starts)
        reason = f"another cycle observed these threads' messages first ({', '.join(moved)})" if moved else None
        return await self.deps.stale_reason(self.key, self.lease_op, reason, batch.record.edits)

    async def commit(self, batch: Batch, produced: dict[str, Produced], events: list[dict[str, Any]]) -> bool:
        """Commit the batch; if another cycle got to some of its threads first, commit the others
        (each thread's section stands alone; the ones dropped stay with what the other cycle wrote,
        or raw). Only a batch whose every thread moved is thrown away."""
        if await self._commit(batch, produced, events):
            return True
        moved = await self._moved(batch, produced)
        if not moved or len(moved) == len(produced):
            return False
        for thread_id in moved:
            del produced[thread_id]  # after_commit sees only what was committed
        end = events[0]
        end.update(self.end_fields(batch, produced))
        end["tokens_buffered" if self.buffered else "tokens_observed"] = sum(
            m.tokens for t in produced for m in batch.threads[t]
        )
        end["dropped_thread_ids"] = moved  # observed first by another cycle
        return await self._commit(batch, produced, events)

    async def _moved(self, batch: Batch, threads: Iterable[str]) -> list[str]:
        """Those of `threads` whose cursor (or tail, buffering) is no longer where the batch started."""
        store = self.deps.store
        record = await store.record(self.key)
        cursors = record.cursors if record else {}
        moved = []
        for thread_id in threads:
            now = await store.tail(self.key, thread_id) if self.buffered else cursors.get(thread_id, 0)
            if now != batch.starts[thread_id]:
                moved.append(thread_id)
        return moved

    async def _commit(self, batch: Batch, produced: dict[str, Produced], events: list[dict[str, Any]]) -> bool:
        store, lease = self.deps.store, (self.lease_op, self.deps.owner)
        extracted = {k: v for p in produced.values() for k, v in p.extracted.items()}
        if self.buffered:
            cycle_id = events[0]["cycle_id"]
            return await store.append_chunks(
                self.key,
                lease=lease,
                expected_tails={t: batch.starts[t] for t in produced},
                chunks=[chunk_for(f"{cycle_id}:{t}", t, batch.threads[t], p) for t, p in produced.items()],
                extracted=extracted,
                buffered_at_tokens=batch.pending_tokens,
                events=events,
                edits=batch.record.edits,
            )
        groups = [
            group_for(p.result.parsed.observations.strip(), p.result.output_tokens, batch.threads[t], t)
            for t, p in produced.items()
        ]
        return await store.commit_observation(
            self.key,
            lease=lease,
            expected_cursors={t: batch.starts[t] for t in produced},
            new_cursors={t: batch.threads[t][-1].seq for t in produced},
            groups=groups,
            hints={
                t: {
                    "current_task": p.result.parsed.current_task,
                    "suggested_response": p.result.parsed.suggested_response,
                }
                for t, p in produced.items()
            },
            extracted=extracted,
            observed_at=max(batch.threads[t][-1].created_at for t in produced),
            events=events,
            edits=batch.record.edits,
        )

    async def after_commit(self, batch: Batch, produced: dict[str, Produced], base: dict[str, Any]) -> list[dict]:
        events = []
        for thread_id, p in produced.items():
            events += await side_effects.apply(
                self.deps, thread_id, self.resource_id, p.result.parsed, p.extracted, base
            )
        return events


async def run_resource(
    deps: CycleDeps,
    thread_id: str,
    resource_id: str,
    trigger: Trigger,
    *,
    buffered: bool,
    instruction: str | None = None,
    on_idle: bool = False,
    progress: Callable[[str], Awaitable[None]] | None = None,
) -> CycleOutcome:
    """Observe (or buffer) the resource's busiest threads, in parallel batches."""
    store, key = deps.store, deps.record_key(thread_id, resource_id)
    op = "buffer" if buffered else "observe"
    kind: Operation = "buffering" if buffered else "observation"
    if not await store.acquire_lease(key, op, deps.owner, deps.lease_ttl, excluding=exclusive_with(op, trigger)):
        return CycleOutcome(kind, False, reason=await refusal(deps, key, op))
    try:
        if not buffered:
            await activation.activate(deps, thread_id, resource_id, "all")
        snap = await store.snapshot(key, thread_id)
        if snap is None:
            return CycleOutcome(kind, False, reason="no unobserved messages")
        busy = await store.busy_threads(key)
        per_thread: dict[str, list[Message]] = {}
        starts: dict[str, int] = {}
        for tid, cursor, _ in busy:
            start = await store.tail(key, tid) if buffered else cursor
            messages = await store.unobserved(key, tid, after_seq=start, max_tokens=max_input_tokens(deps.limits))
            messages = safe_prefix(messages)
            if tid == thread_id and trigger != "manual" and not buffered:
                messages = leave_turn_raw(messages)  # the turn in progress stays raw, as in thread scope
            if messages:
                per_thread[tid], starts[tid] = messages, start
        sizes = {t: sum(m.tokens for m in msgs) for t, msgs in per_thread.items()}
        if buffered:
            sizes = {t: n for t, n in sizes.items() if enough_to_buffer(deps.limits, n, on_idle)}
        if not sizes:
            if buffered:
                await store.mark_buffered(key, snap.state.pending_tokens)  # see `store.commits.mark_buffered`
            return CycleOutcome(kind, False, reason="nothing new to buffer" if buffered else "no unobserved messages")
        threshold = message_threshold(deps.limits, snap.state.observation_tokens, deps.om.share_token_budget)
        chosen = choose_threads(sizes, threshold, everything=trigger == "manual" or buffered)
        chosen.sort(key=lambda t: per_thread[t][0].seq)  # batches are packed oldest first
        planned = batches(chosen, sizes, deps.om.observation.max_tokens_per_batch)
        groups = await store.groups(key)
        previous = previous_with_chunks(render_plain(groups), snap.chunks) if buffered else render_plain(groups)
        hints = await store.thread_hints(key, chosen)
        if progress:
            await progress(f"{kind}: {len(chosen)} threads in {len(planned)} batches")
        outcomes: list[CycleOutcome] = []

        async def run(threads: list[str]) -> None:
            batch = Batch(
                snap.record,
                {t: per_thread[t] for t in threads},
                {t: starts[t] for t in threads},
                {t: hints.get(t, Hints()) for t in threads},
                previous,
                snap.state.pending_tokens,
            )
            step = BatchStep(deps, key, resource_id, batch, buffered=buffered, trigger=trigger, instruction=instruction)
            outcomes.append(await run_cycle(deps, step, take_lease=False, base_extra={"thread_ids": threads}))

        async with anyio.create_task_group() as group:
            for threads in planned:
                group.start_soon(run, threads)
        ran = [o for o in outcomes if o.ran]
        return CycleOutcome(
            kind,
            bool(ran),
            (ran or outcomes)[0].cycle_id if outcomes else None,
            reason=None if ran else next((o.reason for o in outcomes if o.reason), None),
            error="; ".join(o.error for o in outcomes if o.error) or None,
            tokens_in=sum(o.tokens_in for o in ran),
            tokens_out=sum(o.tokens_out for o in ran),
            events=[e for o in outcomes for e in o.events],
        )
    finally:
        with anyio.CancelScope(shield=True):
            await store.release_lease(key, op, deps.owner)
