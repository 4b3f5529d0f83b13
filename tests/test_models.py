"""Tests of om_mcp.models: config types, the router, and litellm's real HTTP
path against the loopback fake server (no network, no API keys)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel, ValidationError
from support.timeouts import scaled

from om_mcp.models import (
    AUTO,
    DEFAULT_MAX_OUTPUT_TOKENS,
    DEFAULT_MODEL,
    ByInputSize,
    CallPolicy,
    Completion,
    ModelChoice,
    ModelError,
    ModelRouter,
    ModelSelectionError,
    ModelSettings,
    ModelTarget,
    TransientModelError,
    Usage,
    effective_max_output_tokens,
    normalize_choice,
)
from om_mcp.models.litellm_client import load_litellm
from om_mcp.models.router import probe
from om_mcp.testing import ScriptedModel
from om_mcp.testing.fake_server import FakeLLMServer, FakeReply, default_responder

ROOT = Path(__file__).resolve().parents[1]
# A real call through litellm to the fake server: quick, but it is the machine's time (scaled by its factor).
FAST = CallPolicy(
    timeout_seconds=scaled(3.0),
    total_budget_seconds=scaled(6.0),
    backoff_initial_seconds=0.01,
    backoff_max_seconds=0.05,
)
MESSAGES = [
    {"role": "system", "content": "You are the Observer."},
    {"role": "user", "content": "[id:m1] hello\n[id:m2] I moved to Lisbon"},
]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def server():
    # litellm's import (seconds on a loaded machine) happens here, outside the calls' FAST time limits,
    # which hold the HTTP round trip alone.
    load_litellm()
    with FakeLLMServer() as s:
        yield s


@pytest.fixture(autouse=True)
def manual_call():
    """These tests exercise the retry policy, which a manual cycle follows; a background call
    tries each model once (test_a_background_call_tries_each_model_once)."""
    token = probe.set(True)
    yield
    probe.reset(token)


def local(server: FakeLLMServer, name: str = "fake-model", **kw) -> ModelTarget:
    return ModelTarget(model=f"openai/{name}", api_base=server.base_url, **kw)


def models_requested(server: FakeLLMServer) -> list[str]:
    return [r["model"] for r in server.requests]


# --- import cost -----------------------------------------------------------


def test_importing_the_package_does_not_import_litellm():
    code = "import sys, om_mcp.models; assert 'litellm' not in sys.modules, 'litellm imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=scaled(30), cwd=ROOT)


# --- litellm through the fake server ---------------------------------------


@pytest.mark.anyio
@pytest.mark.slow
async def test_litellm_call_through_fake_server(server):
    server.responder = lambda req: FakeReply(default_responder(req), usage={"prompt_tokens": 7, "completion_tokens": 4})
    router = ModelRouter(
        local(server), ModelSettings(temperature=0.3, max_output_tokens=123, provider_options={"top_p": 0.5}), FAST
    )
    result = await router.complete(MESSAGES, input_tokens=20)

    assert result.text.startswith("<observations>")
    assert "observed message m1" in result.text and "observed message m2" in result.text
    assert result.model == "openai/fake-model"
    assert result.attempts == 1
    assert (result.usage.input_tokens, result.usage.output_tokens) == (7, 4)
    assert result.usage.cost is None or isinstance(result.usage.cost, float)
    assert result.usage.provider_metadata.get("finish_reason") == "stop"

    [body] = server.requests
    assert body["model"] == "fake-model"
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 123
    assert body["top_p"] == 0.5
    assert body["messages"][1]["content"] == MESSAGES[1]["content"]
    # No key configured for a local endpoint: a dummy is sent, never a real one.
    assert server.request_headers[0]["authorization"] == "Bearer sk-no-key-required"


@pytest.mark.anyio
async def test_rough_usage_and_image_content_pass_through(server):
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "describe " * 100},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        }
    ]
    result = await ModelRouter(local(server), policy=FAST).complete(messages)
    assert result.usage.input_tokens >= 200  # ~900 chars / 4
    assert server.requests[0]["messages"][0]["content"][1]["type"] == "image_url"


@pytest.mark.anyio
async def test_api_key_from_env(server, monkeypatch):
    monkeypatch.setenv("OM_TEST_KEY", "sk-secret-123")
    await ModelRouter(local(server, api_key_env="OM_TEST_KEY"), policy=FAST).complete(MESSAGES)
    assert server.request_headers[0]["authorization"] == "Bearer sk-secret-123"


@pytest.mark.anyio
async def test_missing_api_key_env_is_a_clear_error(server, monkeypatch):
    monkeypatch.delenv("OM_TEST_MISSING_KEY", raising=False)
    router = ModelRouter(local(server, api_key_env="OM_TEST_MISSING_KEY"), policy=FAST)
    with pytest.raises(ModelError) as info:
        await router.complete(MESSAGES)
    assert "OM_TEST_MISSING_KEY" in str(info.value)
    assert not info.value.transient
    assert server.requests == []


@pytest.mark.anyio
async def test_fake_server_streams_sse(server):
    from om_mcp.models.litellm_client import load_litellm

    litellm = load_litellm()
    server.responder = lambda req: "a streamed reply that is longer than one chunk"
    stream = await litellm.acompletion(
        model="openai/fake-model",
        api_base=server.base_url,
        api_key="x",
        messages=MESSAGES,
        stream=True,
        timeout=5,
        num_retries=0,
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "a streamed reply that is longer than one chunk"
    assert server.requests[0]["stream"] is True


# --- selection by input size ------------------------------------------------


@pytest.mark.anyio
async def test_by_input_size_picks_tier_and_fails_above_largest(server):
    choice = ByInputSize(up_to={"1000": local(server, "big"), "100": local(server, "small")})
    assert choice.thresholds() == [100, 1000]
    router = ModelRouter(choice, policy=FAST)

    await router.complete(MESSAGES, input_tokens=50)
    await router.complete(MESSAGES, input_tokens=100)  # inclusive
    await router.complete(MESSAGES, input_tokens=101)
    assert models_requested(server) == ["small", "small", "big"]

    with pytest.raises(ModelSelectionError) as info:
        await router.complete(MESSAGES, input_tokens=5000)
    assert "5000" in str(info.value) and "1000" in str(info.value)
    assert len(server.requests) == 3  # no request sent
    assert router.describe() == "by size: <=100 openai/small, <=1000 openai/big"


def test_by_input_size_validation():
    class Config(BaseModel):
        model: ModelChoice

    parsed = Config(model={"up_to": {"8000": "google/gemini-2.5-flash", "64000": "openai/gpt-4o"}}).model
    assert isinstance(parsed, ByInputSize)
    assert parsed.resolve(8000) == "gemini/gemini-2.5-flash"
    assert parsed.resolve(8001) == "openai/gpt-4o"

    for bad, words in [
        ({}, "at least one threshold"),
        ({"ten": "a"}, "'ten' is not an integer"),
        ({"1.5": "a"}, "'1.5' is not an integer"),
        ({"0": "a"}, "positive"),
        ({"-3": "a"}, "positive"),
        ({"10": "a", "010": "b"}, "duplicate"),
    ]:
        with pytest.raises(ValidationError) as info:
            Config(model={"up_to": bad})
        assert "up_to" in str(info.value) and words in str(info.value), str(info.value)


# --- retries and fallbacks ---------------------------------------------------


@pytest.mark.anyio
async def test_fallback_after_retrying_http_500(server):
    server.responder = lambda req: (500, "boom") if req["model"] == "first" else "from second"
    choice = [local(server, "first", max_retries=2), local(server, "second", max_retries=2)]
    result = await ModelRouter(choice, policy=FAST).complete(MESSAGES)

    assert result.text == "from second"
    assert result.model == "openai/second"
    assert models_requested(server) == ["first"] * 3 + ["second"]  # 1 try + 2 retries each
    assert result.attempts == 4


@pytest.mark.anyio
async def test_a_background_call_tries_each_model_once(server):
    server.responder = lambda req: (500, "boom") if req["model"] == "first" else "from second"
    choice = [local(server, "first", max_retries=2), local(server, "second", max_retries=2)]
    token = probe.set(False)
    try:
        result = await ModelRouter(choice, policy=FAST).complete(MESSAGES)
    finally:
        probe.reset(token)
    assert result.text == "from second" and models_requested(server) == ["first", "second"]


@pytest.mark.anyio
async def test_disabled_entries_are_skipped(server):
    choice = [local(server, "off", enabled=False), local(server, "on")]
    router = ModelRouter(choice, policy=FAST)
    await router.complete(MESSAGES)
    assert models_requested(server) == ["on"]
    assert router.describe() == "openai/off (disabled) -> openai/on"


@pytest.mark.anyio
async def test_rate_limit_is_retried(server):
    replies = iter([(429, "slow down"), (503, "busy"), "ok"])
    server.responder = lambda req: next(replies)
    result = await ModelRouter(local(server, max_retries=2), policy=FAST).complete(MESSAGES)
    assert result.text == "ok" and result.attempts == 3


@pytest.mark.anyio
async def test_bad_request_is_not_retried(server):
    server.responder = lambda req: (400, "bad request: unknown field")
    router = ModelRouter(local(server, max_retries=3), policy=FAST)
    with pytest.raises(ModelError) as info:
        await router.complete(MESSAGES)
    assert len(server.requests) == 1
    err = info.value
    assert not err.transient and err.status_code == 400 and err.attempts == 1
    assert "unknown field" in err.last_error


@pytest.mark.anyio
async def test_bad_request_moves_to_next_entry(server):
    server.responder = lambda req: (401, "no such key") if req["model"] == "first" else "second ok"
    choice = [local(server, "first", max_retries=3), local(server, "second")]
    result = await ModelRouter(choice, policy=FAST).complete(MESSAGES)
    assert result.text == "second ok"
    assert models_requested(server) == ["first", "second"]


@pytest.mark.anyio
async def test_all_entries_fail_with_last_error(server):
    server.responder = lambda req: (500, f"down: {req['model']}")
    choice = [local(server, "a", max_retries=0), local(server, "b", max_retries=1)]
    with pytest.raises(ModelError) as info:
        await ModelRouter(choice, policy=FAST).complete(MESSAGES)
    assert info.value.transient
    assert "down: b" in info.value.last_error
    assert info.value.attempts == 3


# --- time limits -------------------------------------------------------------


@pytest.mark.anyio
async def test_timeout_per_attempt(server):
    server.delay = 3.0
    policy = CallPolicy(
        timeout_seconds=0.3, total_budget_seconds=5.0, backoff_initial_seconds=0.01, backoff_max_seconds=0.01
    )
    with pytest.raises(ModelError) as info:  # uncut, the first attempt would have its answer at 3 s
        await ModelRouter(local(server, max_retries=1), policy=policy).complete(MESSAGES)
    assert info.value.transient and info.value.attempts == 2
    assert len(server.requests) == 2


@pytest.mark.anyio
async def test_total_budget_is_respected(server):
    server.delay = 3.0
    policy = CallPolicy(
        timeout_seconds=0.4, total_budget_seconds=1.0, backoff_initial_seconds=0.05, backoff_max_seconds=0.1
    )
    choice = [local(server, "a", max_retries=10), local(server, "b", max_retries=10)]
    with pytest.raises(ModelError) as info:
        await ModelRouter(choice, policy=policy).complete(MESSAGES)
    # 22 attempts of 0.4 s without the budget; at most two whole ones and the remnant with it
    # (fewer on a loaded machine, never more)
    assert 1 <= info.value.attempts <= 4 and len(server.requests) <= info.value.attempts


@pytest.mark.anyio
async def test_scripted_model_retries_and_records_calls():
    model = ScriptedModel([TransientModelError("flaky"), "ok"])
    router = ModelRouter("openai/x", ModelSettings(temperature=0.0), FAST, client=model)
    result = await router.complete(MESSAGES)
    assert result.text == "ok" and result.attempts == 2
    assert [c.target.model for c in model.calls] == ["openai/x", "openai/x"]
    assert model.calls[0].settings.temperature == 0.0
    assert model.calls[0].messages == MESSAGES


@pytest.mark.anyio
async def test_scripted_callable_and_slow_model():
    echo = ScriptedModel(lambda messages, target: f"{target.model}:{len(messages)}")
    result = await ModelRouter("google/gemini-2.5-pro", client=echo).complete(MESSAGES)
    assert result.text == "gemini/gemini-2.5-pro:2"

    slow = ScriptedModel(["late"], delay=5.0)
    policy = CallPolicy(
        timeout_seconds=0.2, total_budget_seconds=0.5, backoff_initial_seconds=0.01, backoff_max_seconds=0.01
    )
    with pytest.raises(ModelError) as info:
        await ModelRouter(ModelTarget(model="m", max_retries=5), policy=policy, client=slow).complete(MESSAGES)
    assert info.value.transient and 1 <= info.value.attempts <= 3 and len(slow.calls) == info.value.attempts


@pytest.mark.anyio
async def test_scripted_completion_passes_through():
    done = Completion(text="t", model="m", usage=Usage(input_tokens=3, output_tokens=1, cost=0.5))
    result = await ModelRouter("m", client=ScriptedModel([done])).complete(MESSAGES)
    assert result.usage.cost == 0.5 and result.attempts == 1


# --- settings types ----------------------------------------------------------


def test_model_name_mapping():
    assert ModelTarget(model="google/gemini-2.5-pro").model == "gemini/gemini-2.5-pro"
    assert ModelTarget(model="default").model == DEFAULT_MODEL == "gemini/gemini-2.5-flash"
    assert ModelTarget(model="openai/gpt-4o").model == "openai/gpt-4o"
    assert normalize_choice(["google/a", "anthropic/b"])[0].model == "gemini/a"
    assert normalize_choice(None)[0].model == DEFAULT_MODEL


def test_settings_validation_names_the_field():
    cases = [
        (lambda: ModelTarget(model="x", max_retrys=2), "max_retrys"),
        (lambda: ModelTarget(model="x", max_retries=-1), "max_retries"),
        (lambda: ModelTarget(model=""), "model"),
        (lambda: ModelSettings(temperature=-1), "temperature"),
        (lambda: ModelSettings(max_output_tokens=0), "max_output_tokens"),
        (lambda: ModelSettings(provider_options={"timeout": 1}), "timeout"),
        (lambda: CallPolicy(timeout_seconds=0), "timeout_seconds"),
        (lambda: CallPolicy(backoff_initial_seconds=5, backoff_max_seconds=1), "backoff_max_seconds"),
        (lambda: CallPolicy(total_budget=3), "total_budget"),
    ]
    for build, field in cases:
        with pytest.raises(ValidationError) as info:
            build()
        assert field in str(info.value), str(info.value)

    class Config(BaseModel):
        model: ModelChoice

    with pytest.raises(ValidationError) as info:
        Config(model=5)
    assert "model choice" in str(info.value)
    with pytest.raises(ValidationError) as info:
        Config(model=[])
    assert "model" in str(info.value)


def test_default_max_output_tokens_rule():
    unset = ModelSettings()
    by_size = ByInputSize(up_to={"10": "openai/gpt-4o"})
    for choice in (None, "default", "google/gemini-2.5-flash", ModelTarget(model="default"), by_size):
        assert effective_max_output_tokens(choice, unset) == DEFAULT_MAX_OUTPUT_TOKENS, choice
    for choice in ("openai/gpt-4o", ["default", "openai/gpt-4o"], ModelTarget(model="ollama_chat/x")):
        assert effective_max_output_tokens(choice, unset) is None, choice
    assert effective_max_output_tokens("default", ModelSettings(max_output_tokens=50)) == 50
    assert ModelRouter("openai/gpt-4o", client=ScriptedModel([])).settings.max_output_tokens is None
    assert ModelRouter(None, client=ScriptedModel([])).settings.max_output_tokens == 100_000


# --- the fake server as a process -------------------------------------------


def test_fake_server_runs_as_a_process(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "om_mcp.testing.fake_server", "--port", "0", "--delay", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        line = proc.stdout.readline()
        base_url = line.strip().rsplit(" ", 1)[-1]
        assert base_url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(base_url + "/models", timeout=5) as r:
            assert json.load(r)["data"][0]["id"] == "fake-model"
        request = urllib.request.Request(
            base_url + "/chat/completions",
            data=json.dumps({"model": "m", "messages": MESSAGES}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as r:
            body = json.load(r)
        text = body["choices"][0]["message"]["content"]
        assert "observed message m1" in text and "observed message m2" in text
        assert body["usage"]["prompt_tokens"] > 0
    finally:
        proc.terminate()
        proc.wait(timeout=scaled(5))


# --- which failures are worth retrying ----------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 401, 403, 404])
async def test_permanent_statuses_are_not_retried(server, status):
    server.responder = lambda req: (status, "no") if req["model"] == "first" else "second ok"
    choice = [local(server, "first", max_retries=3), local(server, "second")]
    result = await ModelRouter(choice, policy=FAST).complete(MESSAGES)
    assert result.text == "second ok"
    assert models_requested(server) == ["first", "second"]


@pytest.mark.anyio
async def test_a_client_bug_fails_the_call_cleanly_without_retries():
    model = ScriptedModel(lambda messages, target: 1 / 0)
    with pytest.raises(ModelError) as info:
        await ModelRouter(ModelTarget(model="m", max_retries=3), policy=FAST, client=model).complete(MESSAGES)
    assert "ZeroDivisionError" in str(info.value)
    assert not info.value.transient and len(model.calls) == 1


@pytest.mark.anyio
async def test_warm_up_does_not_eat_the_call_budget():
    # A client's one-time setup (litellm's import takes seconds) runs outside the budget.
    class SlowToStart(ScriptedModel):
        async def warm_up(self) -> None:
            await anyio.sleep(0.6)

    policy = CallPolicy(
        timeout_seconds=0.3, total_budget_seconds=0.4, backoff_initial_seconds=0.01, backoff_max_seconds=0.01
    )
    result = await ModelRouter("m", policy=policy, client=SlowToStart(["ok"])).complete(MESSAGES)
    assert result.text == "ok"


def test_auto_is_kept_as_a_model_name():
    assert ModelTarget(model="auto").model == AUTO == "auto"
    assert ModelTarget(model=" google/gemini-2.5-pro ").model == "gemini/gemini-2.5-pro"
