"""The engine over litellm's real HTTP path, against the scripted
OpenAI-compatible server on loopback (no network, no keys).

The model is configured the way a user would: a {model, api_base} table in a
TOML file or as JSON in an OM_ variable.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path

import pytest
from support.timeouts import scaled

from om_mcp.config import load_config
from om_mcp.engine import Memory
from om_mcp.models.litellm_client import load_litellm
from om_mcp.testing.fake_server import FakeLLMServer, FakeReply, request_text

pytestmark = pytest.mark.anyio

FAST_POLICY = """
[observational_memory.call_policy]
timeout_seconds = {timeout}
total_budget_seconds = {budget}
backoff_initial_seconds = 0.01
backoff_max_seconds = 0.02
"""


def observer_or_reflector(request: dict) -> str:
    """Observer: one line per message id of the transcript. Reflector: one summary line."""
    system = request["messages"][0]["content"]
    if system.startswith("You keep the long-term memory"):
        return "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) reflected summary\n</observations>"
    second = request["messages"][-1]["content"]
    ids = list(dict.fromkeys(re.findall(r"\bm\d+\b", second)))
    lines = "\n".join(f"* 🔴 (10:00) saw {i}" for i in ids)
    return (
        f"<observations>\nDate: Mar 2, 2026\n{lines}\n</observations>\n<current-task>help with the trip</current-task>"
    )


@pytest.fixture
def server():
    with FakeLLMServer(observer_or_reflector) as s:
        yield s


def write_config(
    tmp_path: Path, model_toml: str, *, timeout: float | None = None, budget: float | None = None, extra: str = ""
) -> Path:
    """A config on the fake server; a call that should succeed gets 5 s an attempt and 10 s in all on a quiet
    machine (scaled by the machine factor); a test of the limits gives its own."""
    timeout = scaled(5.0) if timeout is None else timeout
    budget = scaled(10.0) if budget is None else budget
    path = tmp_path / "om.toml"
    path.write_text(
        "[observational_memory]\n" + model_toml + "\n"
        "[observational_memory.observation]\nbuffer_tokens = false\nmessage_tokens = 120\n"
        + extra
        + FAST_POLICY.format(timeout=timeout, budget=budget)
    )
    return path


async def first_call_made(server: FakeLLMServer) -> None:
    """litellm's first request in a process sets itself up for seconds on a loaded machine, inside
    the attempt's time: make it here, so the attempts under test reach the server."""
    delay, server.delay = server.delay, 0.0
    litellm = load_litellm()
    await litellm.acompletion(
        model="openai/warm-up", api_base=server.base_url, api_key="none", messages=[{"role": "user", "content": "hi"}]
    )
    server.delay = delay
    server.requests.clear()


def msg(n: int, role: str | None = None) -> dict:
    return {"id": f"m{n}", "role": role or ("user" if n % 2 == 0 else "assistant"), "content": f"m{n} " + "words " * 20}


async def events(mem: Memory, type_: str) -> list[dict]:
    return [e.payload for e in await mem.store.events(thread_id="t", limit=500) if e.type == type_]


async def test_observation_and_reflection_over_http(server, tmp_path):
    server.responder = lambda request: FakeReply(
        observer_or_reflector(request), usage={"prompt_tokens": 1234, "completion_tokens": 56}
    )
    path = write_config(tmp_path, f'model = {{ model = "openai/fake", api_base = "{server.base_url}" }}')
    mem = await Memory.open(load_config(path, env={}), db_path=str(tmp_path / "om.db"))
    await mem.append_messages("t", [msg(n) for n in range(6)])  # crosses 120 tokens: the turn observes
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request["model"] == "fake"
    assert [m["role"] for m in request["messages"]] == ["system", "user", "user"]
    assert request["temperature"] == pytest.approx(0.3)
    assert "m0 words" in request_text(request) and "<conversation>" in request["messages"][2]["content"]

    ctx = await mem.get_context("t")
    assert "saw m0" in ctx.observations and "saw m3" in ctx.observations
    assert [m.id for m in ctx.messages] == ["m4", "m5"]
    assert ctx.current_task == "help with the trip"
    end = (await events(mem, "data-om-observation-end"))[0]
    assert end["usage"]["input_tokens"] == 1234 and end["usage"]["output_tokens"] == 56
    assert end["model"] == "openai/fake"

    outcome = await mem.reflect("t")
    assert outcome.ran and len(server.requests) == 2
    assert server.requests[1]["temperature"] == 0
    assert "<memory-log>" in server.requests[1]["messages"][1]["content"]
    assert "reflected summary" in (await mem.observations("t"))["text"]
    await mem.close()


async def test_model_table_from_an_env_variable(server, tmp_path):
    env = {
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__MODEL": json.dumps(
            {"model": "openai/observer-model", "api_base": server.base_url}
        ),
        "OM_OBSERVATIONAL_MEMORY__REFLECTION__MODEL": json.dumps(
            {"model": "openai/reflector-model", "api_base": server.base_url}
        ),
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS": "false",
    }
    mem = await Memory.open(load_config(env=env), db_path=":memory:")
    await mem.append_messages("t", [msg(0), msg(1)])
    assert (await mem.observe("t")).ran
    assert (await mem.reflect("t")).ran
    assert [r["model"] for r in server.requests] == ["observer-model", "reflector-model"]
    await mem.close()


async def test_a_stalled_server_fails_the_cycle_within_the_budget(server, tmp_path):
    server.delay = 3600  # uncut, the observe would outlast the test's time limit
    # An attempt's 1.5 s is litellm's time to send the request too, on a loaded machine.
    path = write_config(
        tmp_path,
        f'model = {{ model = "openai/slow", api_base = "{server.base_url}", max_retries = 3 }}',
        timeout=1.5,
        budget=4.0,
    )
    mem = await Memory.open(load_config(path, env={}), db_path=":memory:")
    await mem.append_messages("t", [msg(0), msg(1)])  # below the threshold: no call
    assert server.requests == []
    await first_call_made(server)
    outcome = await mem.observe("t")
    assert not outcome.ran and outcome.error and "timed out" in outcome.error
    assert 1 <= len(server.requests) <= 3  # four attempts allowed, the 4 s budget leaves room for at most three
    status = await mem.status("t")
    assert status.unobserved_messages == 2 and status.windows.active.observations.tokens == 0
    assert (await mem.observations("t"))["groups"] == []
    failed = await events(mem, "data-om-observation-failed")
    assert len(failed) == 1 and failed[0]["cycle_id"] == outcome.cycle_id and "timed out" in failed[0]["error"]

    # The model is now known to be failing: the turn path does not call it again
    # (it backs off across turns), the append answers at once, the status says why.
    calls = len(server.requests)
    await mem.append_messages("t", [msg(n) for n in range(2, 6)])
    await mem.get_context("t")
    assert len(server.requests) == calls
    status = await mem.status("t")
    assert status.unobserved_messages == 6
    assert status.observation.next_attempt_at and "timed out" in status.observation.last_failure
    assert len(await events(mem, "data-om-observation-failed")) == 1

    # A manual observe tries anyway, and its success closes the breaker.
    server.delay = 0.0
    outcome = await mem.observe("t")
    assert outcome.ran
    assert (await mem.status("t")).unobserved_messages == 0
    text = (await mem.observations("t"))["text"]
    assert all(f"saw m{n}" in text for n in range(6))
    await mem.close()


async def test_fallback_to_the_second_model_after_http_500(server, tmp_path):
    def responder(request):
        if request["model"] == "first":
            return 500, "upstream exploded"
        return observer_or_reflector(request)

    server.responder = responder
    path = write_config(
        tmp_path,
        f'model = [{{ model = "openai/first", api_base = "{server.base_url}", max_retries = 1 }},'
        f' {{ model = "openai/second", api_base = "{server.base_url}" }}]',
    )
    mem = await Memory.open(load_config(path, env={}), db_path=":memory:")
    await mem.append_messages("t", [msg(0), msg(1)])
    outcome = await mem.observe("t")
    assert outcome.ran
    assert [r["model"] for r in server.requests] == ["first", "first", "second"]
    end = (await events(mem, "data-om-observation-end"))[0]
    assert end["model"] == "openai/second"
    assert "saw m0" in (await mem.observations("t"))["text"]
    await mem.close()


async def test_every_fallback_failing_commits_nothing(server, tmp_path):
    server.responder = lambda request: (503, f"down: {request['model']}")
    path = write_config(
        tmp_path,
        f'model = [{{ model = "openai/a", api_base = "{server.base_url}", max_retries = 0 }},'
        f' {{ model = "openai/b", api_base = "{server.base_url}", max_retries = 0 }}]',
    )
    mem = await Memory.open(load_config(path, env={}), db_path=":memory:")
    await mem.append_messages("t", [msg(0)])
    outcome = await mem.observe("t")
    assert not outcome.ran and "down: b" in outcome.error
    assert [r["model"] for r in server.requests] == ["a", "b"]
    assert (await mem.status("t")).unobserved_messages == 1
    await mem.close()


async def test_input_above_the_largest_tier_fails_without_a_call(server, tmp_path):
    path = write_config(
        tmp_path, f'model = {{ up_to = {{ "50" = {{ model = "openai/tiny", api_base = "{server.base_url}" }} }} }}'
    )
    mem = await Memory.open(load_config(path, env={}), db_path=":memory:")
    await mem.append_messages("t", [msg(0)])
    outcome = await mem.observe("t")
    assert not outcome.ran and "largest up_to threshold" in outcome.error
    assert server.requests == []
    assert (await mem.status("t")).unobserved_messages == 1
    assert len(await events(mem, "data-om-observation-failed")) == 1
    await mem.close()


async def health_of(mem: Memory, model: str):
    return await mem.store.model_health(model)


def window(health) -> float:
    """How long the breaker stays open after the failure it records."""
    return health.next_attempt_at - datetime.fromisoformat(health.last_failure_at).timestamp()


async def test_the_breaker_opens_backs_off_and_closes_across_turns(server, tmp_path, monkeypatch):
    """Automatic turns against HTTP 503, then 429, then a healthy server: one call per backoff window,
    each window twice the last, and the first success closes the breaker and observes."""
    from om_mcp.models import health

    class Clock:  # the breaker's clock, moved by the test: no waiting out a window, none closing too soon
        now = time.time()

        @classmethod
        def time(cls) -> float:
            return cls.now

    monkeypatch.setattr(health, "time", Clock)
    first = health.BACKOFF_INITIAL_SECONDS
    answers = [(503, "overloaded"), (429, "slow down")]
    server.responder = lambda request: answers.pop(0) if answers else observer_or_reflector(request)
    path = write_config(tmp_path, f'model = {{ model = "openai/m", api_base = "{server.base_url}", max_retries = 0 }}')
    mem = await Memory.open(load_config(path, env={}), db_path=":memory:")
    await mem.append_messages("t", [msg(n) for n in range(8)])  # past the threshold: the turn's cycle fails
    opened = await health_of(mem, "openai/m")
    assert len(server.requests) == 1 and opened.state == "backoff" and "overloaded" in opened.last_error

    await mem.append_messages("t", [msg(n) for n in range(8, 10)])  # inside the window: no call
    await mem.get_context("t")
    assert len(server.requests) == 1
    assert "next attempt" in (await mem.status("t")).observation.reason

    Clock.now = opened.next_attempt_at
    await mem.append_messages("t", [msg(10)])  # the window passed: one try, 429, a window twice as long
    again = await health_of(mem, "openai/m")
    assert len(server.requests) == 2 and again.failures == 2 and "slow down" in again.last_error
    assert window(opened) == pytest.approx(first) and window(again) == pytest.approx(2 * first)  # doubled

    Clock.now = again.next_attempt_at
    await mem.append_messages("t", [msg(11)])
    closed = await health_of(mem, "openai/m")
    assert closed is None or (closed.state == "ok" and closed.failures == 0)
    status = await mem.status("t")
    assert status.observation.model_ready and status.observation.reason is None
    assert status.unobserved_messages < 12 and "saw m0" in (await mem.observations("t"))["text"]
    assert len(await events(mem, "data-om-observation-failed")) == 2
    await mem.close()


async def test_a_permanent_error_is_never_retried(server, tmp_path):
    server.responder = lambda request: (401, "invalid api key")
    path = write_config(tmp_path, f'model = {{ model = "openai/m", api_base = "{server.base_url}", max_retries = 3 }}')
    mem = await Memory.open(load_config(path, env={}), db_path=":memory:")
    await mem.append_messages("t", [msg(n) for n in range(8)])
    assert len(server.requests) == 1  # no retry within the call
    paused = await health_of(mem, "openai/m")
    assert paused.state == "paused" and "invalid api key" in paused.last_error
    for turn in range(5):  # nor across turns
        await mem.append_messages("t", [msg(n) for n in range(8 + 2 * turn, 10 + 2 * turn)])
        await mem.get_context("t")
    assert len(server.requests) == 1
    status = await mem.status("t")
    assert not status.observation.model_ready and "paused" in status.observation.reason
    assert status.unobserved_messages == 18
    await mem.close()


async def test_a_model_settings_table_keeps_each_roles_default_temperature(server, tmp_path):
    """Setting one key of a role's model_settings used to unset that role's temperature
    (0.3 for the Observer, 0 for the Reflector): the provider then chose its own."""
    extra = (
        "[observational_memory.observation.model_settings]\nmax_output_tokens = 4000\n"
        "[observational_memory.reflection.model_settings]\nprovider_options = { top_p = 0.9 }\n"
    )
    path = write_config(tmp_path, f'model = {{ model = "openai/fake", api_base = "{server.base_url}" }}', extra=extra)
    config = load_config(path, env={})
    assert config.observational_memory.observation.model_settings.temperature == pytest.approx(0.3)
    assert config.observational_memory.reflection.model_settings.temperature == 0.0
    mem = await Memory.open(config, db_path=str(tmp_path / "om.db"))
    await mem.append_messages("t", [msg(n) for n in range(6)])
    assert (await mem.reflect("t")).ran
    observer, reflector = server.requests
    assert observer["temperature"] == pytest.approx(0.3) and observer["max_tokens"] == 4000
    assert reflector["temperature"] == 0 and reflector["top_p"] == 0.9
    await mem.close()


async def test_a_temperature_given_in_the_table_wins(server, tmp_path):
    extra = "[observational_memory.observation.model_settings]\ntemperature = 0.7\n"
    path = write_config(tmp_path, f'model = {{ model = "openai/fake", api_base = "{server.base_url}" }}', extra=extra)
    mem = await Memory.open(load_config(path, env={}), db_path=str(tmp_path / "om.db"))
    await mem.append_messages("t", [msg(n) for n in range(6)])
    assert server.requests[0]["temperature"] == pytest.approx(0.7)
    await mem.close()
