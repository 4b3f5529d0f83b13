"""What a turn waits for: the block_after valve joins the buffering run in flight and activates
its chunk (no second cycle, nothing thrown away), a loading client makes no buffered turn wait,
and with buffering off the turn at the threshold waits for its observation, bounded.

The model is gated by events, so every order is forced rather than timed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from support.backends import location
from support.engine import Memory, Script, config, msg, stored_events, tracing_observer
from support.timeouts import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_location")]


class Gate:
    """An Observer that says when it was called and answers only once released."""

    def __init__(self) -> None:
        self.called = anyio.Event()
        self.open = anyio.Event()

    async def __call__(self, messages: list[dict]) -> str:
        self.called.set()
        await self.open.wait()
        return tracing_observer(messages)


async def per_message() -> int:
    mem = await Memory.open(config(), db_path=location(), client=Script().model)
    try:
        return (await mem.append_messages("probe", [msg(0)])).status.windows.active.messages.tokens
    finally:
        await mem.close()


def cycles(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def discarded(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"].endswith("-skipped") or "discarded" in str(e.get("error"))]


async def context_in_background(mem: Memory, group, done: dict) -> None:
    async def run() -> None:
        done["context"] = await mem.get_context("t")

    group.start_soon(run)
    await wait_all_tasks_blocked()


async def test_the_valve_joins_the_buffering_run_in_flight_and_activates_its_chunk():
    per = await per_message()
    gate = Gate()
    script = Script(observer=gate)
    options = dict(
        buffering=True,
        observation__message_tokens=10 * per,
        observation__buffer_tokens=2 * per,
        observation__block_after=12 * per,
        turn_wait_seconds=60,
    )
    mem = await Memory.open(config(**options), db_path=location(), client=script.model)
    done: dict[str, Any] = {}
    async with mem.running(poll_seconds=None), anyio.create_task_group() as group:
        await mem.append_messages("t", [msg(0), msg(1)])  # a buffering interval: the run starts
        await gate.called.wait()
        await mem.append_messages("t", [msg(n) for n in range(2, 13)])  # past block_after meanwhile
        await context_in_background(mem, group, done)
        assert "context" not in done  # the turn waits for the run in flight ...
        assert len(script.observer_calls) == 1  # ... and started no cycle of its own
        gate.open.set()
    context = done["context"]
    assert "saw m0" in context.observations and "saw m1" in context.observations  # its chunk, activated
    assert [m.id for m in context.messages][:1] == ["m2"]
    events = await stored_events(mem)
    activations = cycles(events, "data-om-activation")
    assert activations and activations[0]["triggered_by"] == "threshold"
    assert not [e for e in cycles(events, "data-om-observation-start") if e["trigger"] == "turn-sync"]
    assert discarded(events) == []
    await mem.close()


async def test_a_buffered_turn_does_not_wait_while_the_client_loads_and_nothing_is_thrown_away():
    per = await per_message()
    loaded, loading = anyio.Event(), anyio.Event()
    script = Script()
    script.model._loaded = loaded  # the client is still being set up (litellm's import)
    set_up = script.model.warm_up

    async def warm_up() -> None:
        loading.set()
        await set_up()

    script.model.warm_up = warm_up  # type: ignore[method-assign]
    options = dict(
        buffering=True,
        observation__message_tokens=10 * per,
        observation__buffer_tokens=2 * per,
        observation__block_after=12 * per,
        turn_wait_seconds=60,
    )
    mem = await Memory.open(config(**options), db_path=location(), client=script.model)
    async with mem.running(poll_seconds=None):
        await mem.append_messages("t", [msg(0), msg(1)])
        await mem.append_messages("t", [msg(n) for n in range(2, 13)])
        await loading.wait()  # the buffering run waits for its client
        with anyio.fail_after(scaled(30)):  # a deadlock guard, not a timing assertion
            context = await mem.get_context("t")  # answers at once: nothing to wait for yet
        assert context.observations is None and len(context.messages) == 13
        status = context.status.observation
        assert status.warming_up and not status.model_ready and "warming up" in status.reason
        assert script.observer_calls == []  # no cycle of the turn's own either
        buffering = mem.worker.job(mem.record_key("t", "default"), "buffer")
        assert buffering is not None  # the run in flight, waiting for its client
        loaded.set()
        await buffering.wait()
        context = await mem.get_context("t")  # the next turn activates what the run buffered
    assert "saw m0" in context.observations
    events = await stored_events(mem)
    assert not [e for e in cycles(events, "data-om-observation-start") if e["trigger"] == "turn-sync"]
    assert discarded(events) == []
    assert not context.status.observation.warming_up
    await mem.close()


async def test_with_buffering_off_the_turn_at_the_threshold_waits_for_its_observation():
    per = await per_message()
    gate = Gate()
    script = Script(observer=gate)
    mem = await Memory.open(
        config(observation__message_tokens=4 * per, turn_wait_seconds=60), db_path=location(), client=script.model
    )
    done: dict[str, Any] = {}
    async with mem.running(poll_seconds=None), anyio.create_task_group() as group:
        await mem.append_messages("t", [msg(n) for n in range(4)])  # the threshold: the cycle starts
        await gate.called.wait()
        await context_in_background(mem, group, done)
        assert "context" not in done  # the turn waits for the observation ...
        gate.open.set()
    context = done["context"]
    assert "saw m0" in context.observations  # ... and carries it
    assert len(script.observer_calls) == 1
    await mem.close()


async def test_with_buffering_off_the_wait_is_bounded_by_turn_wait_seconds():
    per = await per_message()
    gate = Gate()
    script = Script(observer=gate)
    mem = await Memory.open(
        config(observation__message_tokens=4 * per, turn_wait_seconds=0), db_path=location(), client=script.model
    )
    async with mem.running(poll_seconds=None):
        await mem.append_messages("t", [msg(n) for n in range(4)])
        await gate.called.wait()
        observing = mem.worker.job(mem.record_key("t", "default"), "observe")
        context = await mem.get_context("t")  # the bound is 0: it answers from what is committed
        assert context.observations is None
        gate.open.set()
        await observing.wait()
        context = await mem.get_context("t")
    assert "saw m0" in context.observations  # the cycle went on in the background
    await mem.close()


async def test_with_buffering_off_the_client_loads_before_the_threshold_is_reached():
    per = await per_message()
    loaded = anyio.Event()
    script = Script()
    script.model._loaded = loaded
    mem = await Memory.open(
        config(observation__message_tokens=8 * per, turn_wait_seconds=60), db_path=location(), client=script.model
    )
    async with mem.running(poll_seconds=None):
        await mem.append_messages("t", [msg(n) for n in range(2)])  # a quarter of the threshold: nothing yet
        assert mem.worker.job("models", "warm-up") is None
        await mem.append_messages("t", [msg(n) for n in range(2, 4)])  # half of it: the client starts loading
        warming = mem.worker.job("models", "warm-up")
        assert warming is not None and script.observer_calls == []
        loaded.set()
        await warming.wait()
        assert mem.observation.observer.router.warm
    await mem.close()
