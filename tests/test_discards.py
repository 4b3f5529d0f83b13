"""A cycle's paid model call is thrown away only when what it read changed under it: messages
appended meanwhile, another thread's commit, or a lease that lapsed with nobody taking it leave
it valid; a resource batch keeps the threads nobody else observed; a real conflict is counted,
with its reason, in the status and in the cycle's event, a skip (`data-om-observation-skipped`), not a failure.

The model is gated by an event, so every interleaving is forced, not timed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from support.backends import location
from support.engine import Memory, Script, config, msg, stored_events, tracing_observer

from om_mcp.store import NewGroup

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_location")]


class Gate:
    def __init__(self) -> None:
        self.called, self.open = anyio.Event(), anyio.Event()

    async def __call__(self, messages: list[dict]) -> str:
        self.called.set()
        await self.open.wait()
        return tracing_observer(messages)


async def start_observe(mem: Memory, group, thread_id: str, done: dict, resource_id: str = "default") -> None:
    async def run() -> None:
        done[thread_id] = await mem.observe(thread_id, resource_id)

    group.start_soon(run)


async def observe_elsewhere(mem: Memory, key: str, thread_id: str) -> None:
    """Another process observes a thread's unobserved messages first (its commit, as it would make it)."""
    messages = await mem.store.unobserved(key, thread_id)
    record = await mem.store.record(key)
    assert await mem.store.commit_observation(
        key,
        lease=None,
        expected_cursors={thread_id: record.cursors.get(thread_id, 0)},
        new_cursors={thread_id: messages[-1].seq},
        groups=[
            NewGroup(
                text="* 🔴 (10:00) observed elsewhere",
                tokens=5,
                first_seq=messages[0].seq,
                last_seq=messages[-1].seq,
                first_message_id=messages[0].id,
                last_message_id=messages[-1].id,
                thread_id=thread_id,
                observed_at=messages[-1].created_at,
            )
        ],
        hints={},
        extracted=None,
        observed_at=None,
    )


def discarded(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cycles whose result was thrown away: skips (what they read changed), never failures."""
    assert not [e for e in events if e["type"].endswith("-failed") and e.get("discarded")]
    return [e for e in events if e["type"].endswith("-skipped") and e.get("discarded")]


@pytest.mark.slow
async def test_messages_appended_during_a_cycle_leave_it_valid():
    gate = Gate()
    mem = await Memory.open(config(), db_path=location(), client=Script(observer=gate).model)
    done: dict[str, Any] = {}
    async with anyio.create_task_group() as group:
        await mem.append_messages("t", [msg(n) for n in range(4)])
        await start_observe(mem, group, "t", done)
        await gate.called.wait()
        await mem.append_messages("t", [msg(n) for n in range(4, 8)])  # after its selection
        gate.open.set()
    assert done["t"].ran
    status = await mem.status("t")
    assert status.discarded_cycles == {}
    assert discarded(await stored_events(mem)) == []
    await mem.close()


async def test_a_lease_that_lapsed_with_nobody_taking_it_leaves_the_work_valid():
    gate = Gate()
    mem = await Memory.open(config(), db_path=location(), client=Script(observer=gate).model)
    done: dict[str, Any] = {}
    async with anyio.create_task_group() as group:
        await mem.append_messages("t", [msg(n) for n in range(4)])
        await start_observe(mem, group, "t", done)
        await gate.called.wait()
        await mem.store.release_lease("thread:t", "observe", mem.observation.owner)  # as if it expired
        gate.open.set()
    assert done["t"].ran
    assert (await mem.status("t")).discarded_cycles == {}
    await mem.close()


async def test_a_real_conflict_is_thrown_away_counted_and_said():
    gate = Gate()
    mem = await Memory.open(config(), db_path=location(), client=Script(observer=gate).model)
    done: dict[str, Any] = {}
    async with anyio.create_task_group() as group:
        await mem.append_messages("t", [msg(n) for n in range(4)])
        await start_observe(mem, group, "t", done)
        await gate.called.wait()
        await observe_elsewhere(mem, "thread:t", "t")  # the very messages it is observing
        gate.open.set()
    assert not done["t"].ran and done["t"].error is None
    assert done["t"].reason.startswith("skipped: another cycle observed these messages first")
    status = await mem.status("t")
    assert list(status.discarded_cycles.values()) == [1]
    assert "another cycle observed" in next(iter(status.discarded_cycles))
    (event,) = discarded(await stored_events(mem))
    assert event["discarded"] == next(iter(status.discarded_cycles))
    log = await mem.observations("t")
    assert "observed elsewhere" in log["text"] and "saw m0" not in log["text"]  # nothing observed twice
    await mem.close()


async def test_a_resource_batch_keeps_the_threads_nobody_else_observed():
    gate = Gate()
    mem = await Memory.open(config(scope="resource"), db_path=location(), client=Script(observer=gate).model)
    done: dict[str, Any] = {}
    async with anyio.create_task_group() as group:
        await mem.append_messages("a", [msg(n) for n in range(3)])
        await mem.append_messages("b", [msg(n) for n in range(10, 13)])
        await start_observe(mem, group, "a", done)
        await gate.called.wait()
        await observe_elsewhere(mem, "resource:default", "b")  # another thread's commit, first
        gate.open.set()
    assert done["a"].ran
    status = await mem.status("a")
    assert status.discarded_cycles == {}
    log = (await mem.observations(resource_id="default"))["text"]
    assert "saw m0" in log and "saw m10" not in log and "observed elsewhere" in log  # b observed once
    (end,) = [e for e in await stored_events(mem, "a") if e["type"] == "data-om-observation-end"]
    assert end["dropped_thread_ids"] == ["b"] and end["observed_thread_ids"] == ["a"]
    await mem.close()


async def test_a_buffering_run_and_an_observation_never_hold_one_record_at_once():
    mem = await Memory.open(config(), db_path=location(), client=Script().model)
    store = mem.store
    try:
        assert await store.acquire_lease("thread:t", "buffer", "A", 30, excluding=("observe",))
        for owner in ("A", "B"):  # whoever asks, while the buffering run lives
            assert not await store.acquire_lease("thread:t", "observe", owner, 30, excluding=("buffer",))
        assert await store.acquire_lease("thread:t", "observe", "B", 30)  # a manual observe goes ahead
        await store.release_lease("thread:t", "observe", "B")
        assert await store.acquire_lease("thread:other", "observe", "B", 30, excluding=("buffer",))  # another record
        await store.release_lease("thread:t", "buffer", "A")
        assert await store.acquire_lease("thread:t", "observe", "B", 30, excluding=("buffer",))
        assert not await store.acquire_lease("thread:t", "buffer", "A", 30, excluding=("observe",))
        assert await store.acquire_lease("thread:t", "observe", "B", 30, excluding=("buffer",))  # a renewal
    finally:
        await mem.close()
