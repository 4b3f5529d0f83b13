"""Resource scope: one observation log per user or project, fed by all its threads.

The busiest threads are picked until the threshold is covered, ordered
oldest-first, packed into batches of at most `max_tokens_per_batch` and
observed in parallel. Each batch commits on its own, so a failed batch leaves
only its threads unobserved, and a thread the model skipped stays unobserved
for the next run: nothing is dropped.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Awaitable, Callable

import anyio

from om_mcp.engine.agents import CycleFailed, ObserverRequest
from om_mcp.engine.context import thread_label
from om_mcp.models import ModelError
from om_mcp.store import Message
from om_mcp.store.om import NewGroup

if TYPE_CHECKING:
    from om_mcp.engine.observational import CycleOutcome, ObservationalMemory


def choose_threads(by_thread: dict[str, list[Message]], threshold: int, everything: bool) -> list[str]:
    """Largest first until the threshold is covered, then oldest first."""
    sizes = {tid: sum(m.tokens for m in msgs) for tid, msgs in by_thread.items()}
    chosen, total = [], 0
    for tid in sorted(sizes, key=lambda t: (-sizes[t], t)):
        if total >= threshold and not everything:
            break
        chosen.append(tid)
        total += sizes[tid]
    return sorted(chosen, key=lambda t: by_thread[t][0].seq)


def batches(thread_ids: list[str], by_thread: dict[str, list[Message]], limit: int) -> list[list[str]]:
    """Greedy packing in order; a thread bigger than the limit gets a batch of its own."""
    out: list[list[str]] = []
    current: list[str] = []
    size = 0
    for tid in thread_ids:
        tokens = sum(m.tokens for m in by_thread[tid])
        if current and size + tokens > limit:
            out.append(current)
            current, size = [], 0
        current.append(tid)
        size += tokens
    if current:
        out.append(current)
    return out


async def observe_resource(
    engine: "ObservationalMemory",
    thread_id: str,
    resource_id: str,
    trigger: str,
    instruction: str | None,
    progress: Callable[[str], Awaitable[None]] | None,
) -> "CycleOutcome":
    from om_mcp.engine.observational import CycleOutcome

    record = await engine.record(thread_id, resource_id)
    key = record.key
    if not await engine.om_store.acquire_lease(key, "observe", engine.owner, engine.lease_ttl):
        return CycleOutcome("observation", False, reason="another process is observing this resource")
    try:
        by_thread: dict[str, list[Message]] = {}
        for message in await engine.om_store.unobserved(key, resource_id):
            by_thread.setdefault(message.thread_id, []).append(message)
        if trigger != "manual" and thread_id in by_thread:
            # The current thread's turn in progress stays raw, as in thread scope.
            by_thread[thread_id] = engine._select_for_turn(by_thread[thread_id])
        by_thread = {tid: msgs for tid, msgs in by_thread.items() if msgs}
        if not by_thread:
            return CycleOutcome("observation", False, reason="no unobserved messages")
        groups = await engine.om_store.groups(key)
        threshold = engine.message_threshold(sum(g.tokens for g in groups))
        chosen = choose_threads(by_thread, threshold, everything=trigger == "manual")
        planned = batches(chosen, by_thread, engine.om.observation.max_tokens_per_batch)
        outcomes: list[CycleOutcome] = []

        async def run(batch: list[str]) -> None:
            outcomes.append(await _observe_batch(engine, record, resource_id, batch, by_thread, trigger, instruction))

        if progress:
            await progress(f"observing {len(chosen)} threads in {len(planned)} batches")
        async with anyio.create_task_group() as group:
            for batch in planned:
                group.start_soon(run, batch)
        ran = [o for o in outcomes if o.ran]
        errors = [o.error for o in outcomes if o.error]
        return CycleOutcome(
            "observation", bool(ran), ran[0].cycle_id if ran else None,
            error="; ".join(errors) or None,
            tokens_in=sum(o.tokens_in for o in ran), tokens_out=sum(o.tokens_out for o in ran),
            events=[e for o in outcomes for e in o.events],
        )
    finally:
        await engine.om_store.release_lease(key, "observe", engine.owner)


async def _observe_batch(engine, record, resource_id, batch, by_thread, trigger, instruction) -> "CycleOutcome":
    from om_mcp.engine.observational import CycleOutcome, _first_visible, _last_visible, _ms, _now, _render_plain, _usage

    obscure = engine.om.obscure_thread_ids if engine.om.obscure_thread_ids is not None else True
    labels = {thread_label(tid, obscure): tid for tid in batch}
    messages = [m for tid in batch for m in by_thread[tid]]
    tokens_in = sum(m.tokens for m in messages)
    cycle_id = uuid.uuid4().hex
    base = {**engine._event_base(cycle_id, record, batch[0]), "thread_ids": batch}
    started = time.monotonic()
    await engine._emit([{
        **base, "type": "data-om-observation-start", "operation_type": "observation", "trigger": trigger,
        "started_at": _now(), "tokens_to_observe": tokens_in, "config": engine._config_snapshot(),
    }])
    groups = await engine.om_store.groups(record.key)
    request = ObserverRequest(
        messages=messages, previous_observations=_render_plain(groups),
        threads={label: by_thread[tid] for label, tid in labels.items()},
        extracted=engine.extractors.previous(record.extracted, "observation"), instruction=instruction,
    )
    try:
        async with engine._renewing(record.key, "observe", cycle_id):
            result = await engine.observer.observe(request)
    except (ModelError, CycleFailed) as error:
        return await engine._failed(base, "observation", "data-om-observation-failed", error, tokens_in, started)
    per_thread = {labels[label]: parsed for label, parsed in result.parsed.threads.items() if label in labels}
    if not per_thread and len(batch) == 1 and result.parsed.observations.strip():
        per_thread = {batch[0]: result.parsed}
    new_groups, cursors, expected = [], {}, {}
    for tid in batch:
        parsed = per_thread.get(tid)
        if parsed is None or not parsed.observations.strip():
            continue  # not observed: the thread stays raw and is retried next time
        msgs = by_thread[tid]
        text = parsed.observations.strip()
        new_groups.append(NewGroup(
            text=text, tokens=engine.counter.count_text(text), first_seq=msgs[0].seq, last_seq=msgs[-1].seq,
            first_message_id=_first_visible(msgs).id, last_message_id=_last_visible(msgs).id, thread_id=tid,
            observed_at=msgs[-1].created_at,
        ))
        cursors[tid] = msgs[-1].seq
        expected[tid] = record.cursors.get(tid, 0)
    if not new_groups:
        return await engine._failed(
            base, "observation", "data-om-observation-failed",
            CycleFailed("the Observer returned no observations for these threads"), tokens_in, started,
        )
    observed_ids = [m.id for tid in cursors for m in by_thread[tid]]
    end = {
        **base, "type": "data-om-observation-end", "operation_type": "observation", "trigger": trigger,
        "completed_at": _now(), "duration_ms": _ms(started), "tokens_observed": tokens_in,
        "observation_tokens": sum(g.tokens for g in new_groups), "usage": _usage(result),
        "message_ids": observed_ids, "observed_thread_ids": list(cursors), "model": result.model,
    }
    ok = await engine.om_store.commit_observation(
        record.key, expected_cursors=expected, new_cursors=cursors, groups=new_groups,
        hints={"last_observed_at": max(by_thread[t][-1].created_at for t in cursors)},
        lease=("observe", engine.owner), events=[end],
    )
    if not ok:
        return await engine._failed(
            base, "observation", "data-om-observation-failed",
            CycleFailed("discarded: these threads were observed by someone else meanwhile"), tokens_in, started,
        )
    for tid in cursors:
        parsed = per_thread[tid]
        hints = {k: v for k, v in (("current_task", parsed.current_task),
                                   ("suggested_response", parsed.suggested_response)) if v}
        if hints:
            await engine.store.update_thread(tid, metadata={"om": hints})
        if engine.om.observation.thread_title and parsed.thread_title:
            await engine.store.set_generated_title(tid, parsed.thread_title.strip()[:120])
    await engine._emit([end], persisted=True)
    await engine._hook("on_observation_end", end)
    return CycleOutcome("observation", True, cycle_id, tokens_in=tokens_in, tokens_out=end["observation_tokens"],
                        events=[end])
