"""A slow or failing model never slows the turn, through the MCP client and litellm's real
HTTP path (the scripted OpenAI-compatible server on loopback; no network, no key).

Each scenario plays paced turns (append_messages + get_context) past the observation
threshold and past block_after. The rule under test: only the block_after safety valve
may make a turn wait, once per threshold crossing, never again while that cycle runs or
once the model is known to be failing; every other turn answers from what is committed.
Asserted on counts: the turns the valve made wait (each wait is recorded where the engine
remembers that a crossing cost a turn its wait), provider calls; never on time. A turn
that waited on the hung model any other way would hang, and the test's time limit says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.mcp import connect, ok, read_json
from support.timeouts import scaled

from om_mcp.config import Config
from om_mcp.config.models import CallPolicy
from om_mcp.engine import Memory
from om_mcp.models import ModelError, ModelRouter, ModelTarget, health
from om_mcp.models.litellm_client import load_litellm
from om_mcp.models.router import probe
from om_mcp.server import build_server
from om_mcp.testing import ScriptedModel
from om_mcp.testing.fake_server import FakeLLMServer, FakeReply

pytestmark = pytest.mark.anyio

TURNS = 30
TURN_WAIT_SECONDS = 2.0  # the valve's one wait
TIMEOUT, BUDGET = 1.5, 2.5  # per attempt, per call (all attempts and fallbacks)
MAX_RETRIES = 2
HUNG = 120.0  # a model that answers long after the test is over
UNREACHABLE = "http://127.0.0.1:9/v1"  # the discard port: nothing listens


@pytest.fixture(scope="module", autouse=True)
def litellm_imported() -> None:
    """litellm's import (seconds of CPU) happens once, before any turn is played."""
    load_litellm()


class Waits(dict):
    """The engine's record of the crossings that cost a turn its wait, counting each wait."""

    count = 0

    def __setitem__(self, key: Any, crossing: Any) -> None:
        self.count += 1
        super().__setitem__(key, crossing)


@pytest.fixture
def waits(monkeypatch) -> Waits:
    """The valve's waits in the memory the server opens."""
    waits = Waits()
    opened = Memory.open.__func__  # type: ignore[attr-defined]

    async def open_counting(cls, *args: Any, **kwargs: Any) -> Memory:
        memory = await opened(cls, *args, **kwargs)
        memory.observation.waited = waits
        return memory

    monkeypatch.setattr(Memory, "open", classmethod(open_counting))
    return waits


@contextmanager
def provider(scenario: str) -> Iterator[tuple[Any, FakeLLMServer]]:
    """The model setting for a scenario, and the fake server that counts its requests."""
    with FakeLLMServer() as fake:
        if scenario in ("hung", "times out"):
            fake.delay = HUNG
        elif scenario == "HTTP 500":
            fake.responder = lambda request: FakeReply("upstream exploded", status=500)
        api_base = UNREACHABLE if scenario == "unreachable" else fake.base_url
        model: Any = {"model": "openai/fake", "api_base": api_base, "max_retries": MAX_RETRIES}
        if scenario == "no key":
            model = "openai/gpt-4o-mini"  # needs OPENAI_API_KEY, which the test environment does not have
        yield model, fake


def config(tmp_path: Path, model: Any, budget: float = BUDGET, timeout: float = TIMEOUT) -> Config:
    return Config.model_validate(
        {
            "db_path": str(tmp_path / "om.db"),
            "observational_memory": {
                "model": model,
                "scope": "thread",
                "turn_wait_seconds": TURN_WAIT_SECONDS,
                "observation": {"message_tokens": 300},  # buffering every 60 tokens, block_after at 360
                "call_policy": {
                    "timeout_seconds": timeout,
                    "total_budget_seconds": budget,
                    "backoff_initial_seconds": 0.01,
                    "backoff_max_seconds": 0.02,
                },
            },
        }
    )


async def play(client, turns: int = TURNS) -> None:
    """Paced turns of about 40 tokens each."""
    for n in range(turns):
        await ok(
            client,
            "append_messages",
            thread_id="t",
            messages=[
                {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}: " + "we planned the trip " * 8}
            ],
        )
        await ok(client, "get_context", thread_id="t")
        await anyio.sleep(0.05)


@pytest.mark.parametrize("scenario", ["hung", "times out", "HTTP 500", "unreachable", "no key"])
@pytest.mark.slow
async def test_a_slow_or_failing_model_never_slows_the_turn(tmp_path, monkeypatch, waits, scenario):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # "hung": the call outlives the test (its timeout and budget above it); "times out": they cut it.
    limit = {"budget": HUNG, "timeout": HUNG} if scenario == "hung" else {}
    with provider(scenario) as (model, fake):
        async with connect(build_server(config(tmp_path, model, **limit))) as client:
            await ok(client, "get_context", thread_id="warm-up")  # the first call waits for the engine to open
            await play(client)
            status = await read_json(client, "om://threads/t/status")
            if scenario == "hung":
                # the cycles are still in flight: more turns, all answered from what is committed
                await play(client, 10)
    observation = status["observation"]
    assert status["unobserved_messages"] == TURNS  # nothing observed, nothing lost
    if scenario == "no key":
        assert waits.count == 0 and fake.requests == []
        assert observation["model_ready"] is False and "OPENAI_API_KEY" in observation["reason"]
        return
    if scenario == "hung":
        # the valve waited once, when block_after was crossed; never again while that cycle ran
        assert waits.count == 1
        assert 1 <= len(fake.requests) <= 2  # the buffering call and the valve's observation call
        return
    assert waits.count <= 1
    # The breaker: at most two calls' worth of attempts (a buffering run and the valve's
    # observation, both started before the first failure), then nothing.
    attempts = MAX_RETRIES + 1 if scenario != "times out" else 2
    assert len(fake.requests) <= 2 * attempts if scenario != "unreachable" else fake.requests == []
    assert observation["last_failure"] and observation["next_attempt_at"]
    assert "failing" in observation["reason"]


async def failed_once(client) -> None:
    """Settles once the thread's status shows the model's first failure: the breaker is open."""
    with anyio.fail_after(60):
        while not (await read_json(client, "om://threads/t/status"))["observation"].get("last_failure"):
            await anyio.sleep(0.05)


@pytest.mark.slow
async def test_a_turn_does_not_wait_on_the_retry_of_a_failing_model(tmp_path, monkeypatch, waits):
    """block_after is crossed while the breaker is open; when its backoff ends, the next
    turn must not wait on the retry (a model that failed is failing until a call succeeds)."""
    monkeypatch.setattr(health, "BACKOFF_INITIAL_SECONDS", 1.0)
    with provider("HTTP 500") as (model, fake):
        # the first call fails at once (the breaker opens early), the later ones after 1.5 s
        fake.responder = lambda request: FakeReply("down", status=500, delay_seconds=1.5 if fake.requests[1:] else 0)
        model["max_retries"] = 0
        async with connect(build_server(config(tmp_path, model))) as client:
            await ok(client, "get_context", thread_id="warm-up")  # the first call waits for the engine to open
            await play(client, 3)  # past the first buffering step (60 tokens), well before block_after (360)
            await failed_once(client)  # on a loaded machine the first failure can come later than turn 9
            await play(client, 57)
    assert waits.count == 0
    assert len(fake.requests) >= 2  # the retry after the backoff was made, in the background


async def test_a_manual_observe_returns_within_its_budget(tmp_path):
    """A model that would take two minutes: the manual observe gives up at the call budget,
    says so, and changes nothing."""
    with provider("times out") as (model, fake):
        # The budget stretched by the machine's load: on a busy machine the work before the request (the
        # prompt, the breaker's and the meter's reads) can outlast a 2.5 s budget before the attempt's own
        # timeout can speak, and then the cycle's cut says "call budget" and no model failure is recorded.
        budget = max(BUDGET, scaled(BUDGET))
        async with connect(build_server(config(tmp_path, model, budget=budget))) as client:
            await ok(client, "append_messages", thread_id="t", user="remember the blue door", assistant="noted")
            # Without its budget the observe would wait the model's two minutes, past the test's limit.
            outcome = await ok(client, "observe", thread_id="t")
            status = await read_json(client, "om://threads/t/status")
    assert outcome["ran"] is False and "timed out" in outcome["error"], outcome
    assert status["unobserved_messages"] == 2 and status["observation"]["last_failure"]
    assert json.dumps(fake.requests[0]).count("remember the blue door") == 1


async def test_a_timed_out_attempt_is_not_retried_with_less_time_than_it_had():
    """timeout 0.3 s in a 0.5 s budget: a second attempt would get 0.2 s against a model that
    just needed more than 0.3 s, a provider call spent for nothing."""
    slow = ScriptedModel(["late"], delay=5.0)
    policy = CallPolicy(
        timeout_seconds=0.3, total_budget_seconds=0.5, backoff_initial_seconds=0.01, backoff_max_seconds=0.01
    )
    with pytest.raises(ModelError) as info:
        await ModelRouter(ModelTarget(model="m", max_retries=5), policy=policy, client=slow).complete(
            [{"role": "user", "content": "hi"}]
        )
    assert info.value.attempts == 1 and len(slow.calls) == 1 and info.value.transient
    # with the time for it, a manual cycle's timed-out attempt is retried as before
    slow = ScriptedModel(["late"], delay=5.0)
    policy = policy.model_copy(update={"total_budget_seconds": 1.2})
    token = probe.set(True)
    try:
        with pytest.raises(ModelError) as info:
            await ModelRouter(ModelTarget(model="m", max_retries=5), policy=policy, client=slow).complete(
                [{"role": "user", "content": "hi"}]
            )
    finally:
        probe.reset(token)
    assert len(slow.calls) == 2


async def test_a_long_unobserved_backlog_does_not_make_get_context_recount_per_message(make_config):
    """While the model is down (or observation is off) messages pile up unobserved and the
    context is cut to its budget. That cut counted the whole JSON again for every message
    it left out: 0.35 s a turn at 300 messages. Now the whole text is counted a few times."""
    config = make_config()  # observation off: the backlog only grows
    memory = await Memory.open(config)
    whole_counts = []
    count_text = memory.counter.count_text

    def counting(text: str) -> int:
        if len(text) > 20_000:
            whole_counts.append(len(text))
        return count_text(text)

    try:
        async with connect(build_server(config, memory)) as client:
            for n in range(0, 300, 50):
                await ok(
                    client,
                    "append_messages",
                    thread_id="t",
                    messages=[
                        {"role": "user", "content": f"message {n + i}: " + "train fares to Lisbon and Porto " * 8}
                        for i in range(50)
                    ],
                )
            memory.counter.count_text = counting
            context = await ok(client, "get_context", thread_id="t")
    finally:
        await memory.close()
    assert context["omitted_messages"] > 200 and context["messages"][-1]["content"].startswith("message 299:")
    assert count_text(json.dumps(context, ensure_ascii=False, separators=(",", ":"))) <= config.output_token_budget
    assert len(whole_counts) <= 3, whole_counts
