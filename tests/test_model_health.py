"""Model health: the circuit breaker, readiness at start, `model = "auto"`, client
selection, and the router skipping and recording through a health book."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from om_mcp.models import (
    CallPolicy,
    ModelError,
    ModelRouter,
    ModelSettings,
    ModelTarget,
    ModelUnavailable,
    TransientModelError,
    is_transient,
    readiness,
)
from om_mcp.models import health as breaker
from om_mcp.models.auto import CLAUDE_CLI_MODEL, NO_MODEL_REASON, SAMPLING_MODEL, resolve_auto
from om_mcp.models.claude_login import NOT_LOGGED_IN, Login, claude_login
from om_mcp.models.clients import Clients
from om_mcp.models.health import ModelHealth
from om_mcp.models.router import probe
from om_mcp.store import ModelHealth as StoredHealth
from om_mcp.testing import ScriptedModel

NOW = 1_800_000_000.0
LOGGED_IN = Login(True, "claude.ai")
TARGET = ModelTarget(model="openai/gpt-4o-mini")
FAST = CallPolicy(timeout_seconds=2.0, total_budget_seconds=4.0, backoff_initial_seconds=0.01, backoff_max_seconds=0.02)
MESSAGES = [{"role": "user", "content": "hello"}]


class MemoryBook:
    """A HealthBook kept in a dict, as the engine keeps it in the database."""

    def __init__(self) -> None:
        self.rows: dict[str, ModelHealth] = {}
        self.puts = 0

    async def get(self, model: str) -> ModelHealth | None:
        return self.rows.get(model)

    async def put(self, health: ModelHealth) -> None:
        self.rows[health.model] = health
        self.puts += 1


# --------------------------------------------------------------------------------------
# The breaker's decisions
# --------------------------------------------------------------------------------------


def test_no_state_or_ok_state_allows_a_call():
    assert breaker.allowed(None, TARGET) == (True, "")
    assert breaker.allowed(ModelHealth(model=TARGET.model), TARGET) == (True, "")


def test_transient_failures_back_off_exponentially_up_to_a_cap():
    health = None
    delays = []
    for _ in range(10):
        health = breaker.after_failure(health, TARGET, "HTTP 503", transient=True, now=NOW)
        delays.append(health.next_attempt_at - NOW)
    assert delays[:4] == [30.0, 60.0, 120.0, 240.0]
    assert delays[-1] == breaker.BACKOFF_MAX_SECONDS == 1800.0
    assert health.state == "backoff" and health.failures == 10
    assert health.config_hash is None


def test_backoff_blocks_until_the_next_attempt_time():
    health = breaker.after_failure(None, TARGET, "timed out", transient=True, now=NOW)
    ok, why = breaker.allowed(health, TARGET, now=NOW + 10)
    assert not ok
    assert TARGET.model in why and "is failing (1 time in a row)" in why and "next attempt in 20s" in why
    assert "timed out" not in why  # whichever tenant's cycle is held records this: our words only
    assert breaker.allowed(health, TARGET, now=NOW + 30) == (True, "")


def test_a_permanent_failure_pauses_until_the_configuration_changes(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-revoked-1234567890")
    health = breaker.after_failure(None, TARGET, "AuthenticationError: bad key", transient=False, now=NOW)
    assert health.state == "paused" and health.next_attempt_at == 0.0
    assert health.config_hash == breaker.fingerprint(TARGET)
    ok, why = breaker.allowed(health, TARGET, now=NOW + 10 * 86400)  # time alone does not lift it
    assert not ok and "paused" in why and "doctor --model" in why and "bad key" not in why
    # A new key in the environment is a new configuration: worth one more try.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fresh-0987654321")
    assert breaker.allowed(health, TARGET, now=NOW) == (True, "")
    # So is another endpoint.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-revoked-1234567890")
    moved = ModelTarget(model=TARGET.model, api_base="http://127.0.0.1:9/v1")
    assert breaker.allowed(health, moved, now=NOW) == (True, "")


def test_what_a_held_cycle_records_never_quotes_what_the_model_said():
    """The breaker is the whole server's; its text may quote another tenant's messages."""
    health = None
    for n in range(breaker.UNUSABLE_BEFORE_PAUSE):
        said = f"no observations (it answered “the code is BOBSECRET-{n}”)"
        health = breaker.after_failure(health, TARGET, said, transient=True, unusable=True, now=NOW)
        ok, why = breaker.allowed(health, TARGET, now=NOW + 1)
        assert not ok and "BOBSECRET" not in why and f"answered with nothing usable {n + 1} time" in why
    assert health.state == "paused" and "BOBSECRET-2" in health.last_error  # kept for the operator
    assert "BOBSECRET" not in breaker.summary(health) and "BOBSECRET" in breaker.pause_reason(health)
    assert "BOBSECRET" not in breaker.pause_reason(health, detail=False)


def test_fingerprint_reads_the_configured_key_variable(monkeypatch):
    target = ModelTarget(model="openai/x", api_key_env="MY_KEY")
    monkeypatch.setenv("MY_KEY", "one")
    first = breaker.fingerprint(target)
    monkeypatch.setenv("OPENAI_API_KEY", "unrelated change")
    assert breaker.fingerprint(target) == first
    monkeypatch.setenv("MY_KEY", "two")
    assert breaker.fingerprint(target) != first


def test_failure_text_is_one_short_line_and_stamped():
    health = breaker.after_failure(None, TARGET, "line one\n  line two\t" + "x" * 1000, transient=True, now=NOW)
    assert health.last_error.startswith("line one line two x")
    assert len(health.last_error) == breaker.ERROR_CHARS
    assert health.last_failure_at.startswith("2027-01-15T")
    assert health.model == TARGET.model


def test_success_closes_the_breaker_and_writes_only_when_needed():
    assert breaker.after_success(None, TARGET) is None
    assert breaker.after_success(ModelHealth(model=TARGET.model), TARGET) is None
    failing = breaker.after_failure(None, TARGET, "503", transient=True, now=NOW)
    assert breaker.after_success(failing, TARGET) == ModelHealth(model=TARGET.model)
    paused = breaker.after_failure(None, TARGET, "401", transient=False, now=NOW)
    closed = breaker.after_success(paused, TARGET)
    assert closed.state == "ok" and closed.failures == 0 and closed.last_error is None


# --------------------------------------------------------------------------------------
# Which failures pause a model and which only back it off
# --------------------------------------------------------------------------------------


def _litellm_like(name: str, status: int | None = None) -> Exception:
    error = type(name, (Exception,), {})(f"{name} happened")
    if status is not None:
        error.status_code = status
    return error


@pytest.mark.parametrize(
    "name, status, transient",
    [
        ("AuthenticationError", 401, False),
        ("NotFoundError", 404, False),
        ("BadRequestError", 400, False),
        # The class wins over a made-up status: a too-long prompt never fits on a retry.
        ("ContextWindowExceededError", 500, False),
        ("ContentPolicyViolationError", None, False),
        ("PermissionDeniedError", 403, False),
        ("RateLimitError", 429, True),
        ("InternalServerError", 500, True),
        ("ServiceUnavailableError", 503, True),
        ("Timeout", 408, True),
        ("APIConnectionError", 500, True),
        ("APIConnectionError", None, True),
        ("SomethingElse", None, False),  # unknown errors are not retried
        ("SomethingElse", 502, True),
    ],
)
def test_litellm_errors_map_to_transient_or_permanent(name, status, transient):
    from om_mcp.models.litellm_client import _model_error

    error = _model_error(_litellm_like(name, status), ModelTarget(model="openai/x"))
    assert error.transient is transient
    assert error.status_code == status
    assert error.model == "openai/x"
    assert error.message.startswith(name) and "litellm." not in error.message


def test_is_transient():
    assert is_transient(TimeoutError()) and is_transient(ConnectionRefusedError())
    assert is_transient(TransientModelError("flaky"))
    assert not is_transient(ModelError("bad key"))
    assert not is_transient(ValueError("bug"))
    for status, expected in [
        (408, True),
        (425, True),
        (429, True),
        (500, True),
        (599, True),
        (404, False),
        (400, False),
        (600, False),
    ]:
        assert is_transient(_litellm_like("E", status)) is expected, status


# --------------------------------------------------------------------------------------
# Readiness
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "   ",
        "<your-api-key>",
        "${OPENAI_API_KEY}",
        "$OPENAI_API_KEY",
        "xxxx",
        "your-key-here",
        "YOUR_API_KEY",
        "sk-...",
        "sk-",
        "sk-xxxxxxxx",
        "...",
        "changeme",
        "replace-me",
        "none",
        "NULL",
        "your-placeholder",
        "paste-key-here",
        "dummy",
    ],
)
def test_placeholders_are_not_keys(value):
    assert not readiness.is_real_key(value)


@pytest.mark.parametrize("value", ["sk-proj-4f9aQ2xK8mWq", "AIzaSyD-9tSrke72PouQMnMX", "gsk_abc123def456ghi"])
def test_real_looking_keys(value):
    assert readiness.is_real_key(value)


def test_key_variables():
    assert readiness.key_variables(ModelTarget(model="gemini/gemini-2.5-flash")) == ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    assert readiness.key_variables(ModelTarget(model="openai/x", api_key_env="MINE")) == ("MINE",)
    assert readiness.key_variables(ModelTarget(model="ollama_chat/llama3")) == ()
    assert readiness.key_variables(ModelTarget(model="noprovider")) == ()


@pytest.mark.slow
def test_check_by_key_endpoint_and_provider():
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-api03-realkey123",
        "OPENAI_API_KEY": "<your key>",
        "GOOGLE_API_KEY": "AIzaSyD-realkey12345",
    }
    assert readiness.check(ModelTarget(model="anthropic/claude-haiku-4-5"), env).ready
    not_ready = readiness.check(ModelTarget(model="openai/gpt-4o"), env)
    assert not not_ready.ready and "OPENAI_API_KEY" in not_ready.reason and "OM_MODEL" in not_ready.reason
    assert readiness.check(ModelTarget(model="gemini/gemini-2.5-flash"), env).ready  # any of its variables
    local = readiness.check(ModelTarget(model="openai/x", api_base="http://127.0.0.1:8080/v1"), {})
    assert local.ready and "127.0.0.1:8080" in local.reason
    for keyless in ("ollama_chat/llama3", SAMPLING_MODEL):
        assert readiness.check(ModelTarget(model=keyless), {}).ready, keyless
    unchecked = readiness.check(ModelTarget(model="replicate/meta/llama-3-8b"), {})  # litellm knows it; we know no key
    assert unchecked.ready and "not checked" in unchecked.reason
    for nonsense in ("nonsense", "someprovider/model"):
        unknown = readiness.check(ModelTarget(model=nonsense), {})
        assert not unknown.ready and f"litellm does not know the model {nonsense!r}" in unknown.reason
    bare = readiness.check(ModelTarget(model="gpt-4o-mini"), {})  # litellm routes it to openai
    assert not bare.ready and "OPENAI_API_KEY" in bare.reason


def test_check_with_a_named_key_variable():
    target = ModelTarget(model="openai/x", api_key_env="TEAM_KEY", api_base="http://127.0.0.1:1/v1")
    missing = readiness.check(target, {})
    assert not missing.ready and "TEAM_KEY" in missing.reason  # the named key is required even with api_base
    assert readiness.check(target, {"TEAM_KEY": "sk-team-realkey12345"}).ready


def test_check_all_takes_the_first_ready_enabled_target():
    env = {"OPENAI_API_KEY": "sk-proj-realkey12345"}
    targets = [ModelTarget(model="anthropic/a"), ModelTarget(model="openai/b")]
    assert readiness.check_all(targets, env).reason == "openai/b"
    none_ready = readiness.check_all(targets, {})
    assert not none_ready.ready and "ANTHROPIC_API_KEY" in none_ready.reason  # the first one's reason
    disabled = [ModelTarget(model="openai/b", enabled=False)]
    assert readiness.check_all(disabled, env) == readiness.Readiness(False, "no enabled model is configured")


# --------------------------------------------------------------------------------------
# model = "auto"
# --------------------------------------------------------------------------------------


def no_claude(name: str) -> str | None:
    return None


def test_auto_prefers_a_provider_key_in_order():
    choice = resolve_auto(
        {"OPENAI_API_KEY": "sk-proj-realkey12345", "ANTHROPIC_API_KEY": "sk-ant-api03-realkey123"}, which=no_claude
    )
    assert choice.models == ("anthropic/claude-haiku-4-5",)
    assert choice.targets[0]["api_key_env"] == "ANTHROPIC_API_KEY" and "ANTHROPIC_API_KEY" in choice.reason
    assert resolve_auto({"GOOGLE_API_KEY": "AIzaSyD-realkey12345"}, which=no_claude).models == (
        "gemini/gemini-2.5-flash",
    )


def test_auto_skips_placeholder_keys():
    choice = resolve_auto({"ANTHROPIC_API_KEY": "<key>", "OPENAI_API_KEY": "sk-proj-realkey12345"}, which=no_claude)
    assert choice.models == ("openai/gpt-4o-mini",)


def test_auto_uses_the_claude_command_then_sampling():
    found = resolve_auto(
        {}, which=lambda name: "/usr/local/bin/claude" if name == "claude" else None, login=lambda *_: LOGGED_IN
    )
    assert found.models == (CLAUDE_CLI_MODEL, SAMPLING_MODEL)
    assert "claude" in found.reason


def test_an_installed_claude_that_is_not_logged_in_is_no_model():
    out = resolve_auto({}, which=lambda name: "/usr/local/bin/claude", login=lambda *_: Login(False, NOT_LOGGED_IN))
    assert out.models == (SAMPLING_MODEL,)
    assert out.reason.startswith("claude is installed but not logged in: run `claude auth login`")
    logged_out = Login(False, NOT_LOGGED_IN)
    explicit = readiness.check(
        ModelTarget(model=CLAUDE_CLI_MODEL), {}, which=lambda _: "/x/claude", login=lambda *_: logged_out
    )
    assert not explicit.ready and "run `claude auth login`" in explicit.reason
    assert readiness.check(
        ModelTarget(model=CLAUDE_CLI_MODEL), {}, which=lambda _: "/x/claude", login=lambda *_: LOGGED_IN
    ).ready
    missing = readiness.check(ModelTarget(model=CLAUDE_CLI_MODEL), {}, which=lambda _: None)
    assert not missing.ready and "not on PATH" in missing.reason


def fake_claude(folder: Path, logged_in: bool) -> str:
    """A `claude` that answers `auth status --json` the way Claude Code 2.1.197 does."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "claude"
    answer = json.dumps({"loggedIn": logged_in, "authMethod": "claude.ai" if logged_in else "none"})
    script.write_text(f"#!/bin/sh\necho '{answer}'\nexit {0 if logged_in else 1}\n")
    script.chmod(0o755)
    return str(script)


def test_the_login_is_asked_of_the_cli_and_cached(tmp_path):
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    out = claude_login(fake_claude(tmp_path / "out", False), env)
    assert out == Login(False, NOT_LOGGED_IN)
    claude = fake_claude(tmp_path / "in", True)
    assert claude_login(claude, env) == Login(True, "claude.ai")
    Path(claude).write_text("#!/bin/sh\nexit 3\n")  # same size and time would hit the cache; this is not
    os.utime(claude, ns=(1, 1))
    assert not claude_login(claude, env).logged_in
    old = fake_claude(tmp_path / "old", True)
    Path(old).write_text("#!/bin/sh\necho 'unknown command auth' >&2\nexit 1\n")
    assert "update Claude Code" in claude_login(old, env).detail


def test_auto_with_nothing_falls_back_to_sampling_and_says_how_to_fix_it():
    choice = resolve_auto({}, which=no_claude)
    assert choice.models == (SAMPLING_MODEL,)
    assert choice.reason == NO_MODEL_REASON and "ANTHROPIC_API_KEY" in choice.reason


# --------------------------------------------------------------------------------------
# Which client calls which target
# --------------------------------------------------------------------------------------


def test_clients_by_kind_of_target():
    clients = Clients()
    assert type(clients.for_target(ModelTarget(model="sampling"))).__name__ == "NoSampler"  # no server here
    litellm_client = clients.for_target(ModelTarget(model="openai/x"))
    assert type(litellm_client).__name__ == "LiteLLMClient"
    assert clients.for_target(ModelTarget(model="gemini/y")) is litellm_client  # made once


@pytest.mark.anyio
async def test_sampling_without_a_connected_client_is_unavailable():
    client = Clients().for_target(ModelTarget(model="sampling"))
    with pytest.raises(ModelUnavailable) as info:
        await client.complete(MESSAGES, ModelTarget(model="sampling"), ModelSettings(), 1.0)
    assert "sampling" in str(info.value)


# --------------------------------------------------------------------------------------
# The router and the health book
# --------------------------------------------------------------------------------------


def router(choice, model: ScriptedModel, book: MemoryBook) -> ModelRouter:
    return ModelRouter(choice, policy=FAST, client=model, health=book)


@pytest.mark.anyio
async def test_a_success_with_a_healthy_model_writes_nothing():
    book = MemoryBook()
    await router("openai/a", ScriptedModel(["ok"]), book).complete(MESSAGES)
    assert book.rows == {} and book.puts == 0


@pytest.mark.anyio
async def test_a_transient_failure_opens_the_breaker_and_the_next_call_is_skipped():
    book = MemoryBook()
    model = ScriptedModel([TransientModelError("HTTP 503"), "never"])
    target = ModelTarget(model="openai/a", max_retries=1)
    with pytest.raises(ModelError) as info:
        await router(target, model, book).complete(MESSAGES)
    assert info.value.transient and len(model.calls) == 1  # a background call leaves retrying to the breaker
    health = book.rows["openai/a"]
    assert health.state == "backoff" and health.failures == 1 and "503" in health.last_error

    with pytest.raises(ModelUnavailable) as info:
        await router(target, model, book).complete(MESSAGES)
    assert "openai/a" in str(info.value) and "next attempt in" in str(info.value)
    assert len(model.calls) == 1  # no call was made


@pytest.mark.anyio
async def test_a_permanent_failure_pauses_the_model_without_retries():
    book = MemoryBook()
    model = ScriptedModel([ModelError("AuthenticationError: invalid key", transient=False)])
    with pytest.raises(ModelError):
        await router(ModelTarget(model="openai/a", max_retries=3), model, book).complete(MESSAGES)
    assert len(model.calls) == 1
    assert book.rows["openai/a"].state == "paused"
    with pytest.raises(ModelUnavailable) as info:
        await router("openai/a", model, book).complete(MESSAGES)
    assert "paused after a permanent error" in str(info.value) and "doctor --model" in str(info.value)
    assert "invalid key" not in str(info.value)  # a held cycle of any tenant records this: the state, not the text


@pytest.mark.anyio
async def test_an_open_breaker_moves_on_to_the_next_model():
    book = MemoryBook()
    book.rows["openai/a"] = breaker.after_failure(None, ModelTarget(model="openai/a"), "down", transient=True)
    model = ScriptedModel(lambda messages, target: f"answered by {target.model}")
    result = await router(["openai/a", "openai/b"], model, book).complete(MESSAGES)
    assert result.text == "answered by openai/b"
    assert [c.target.model for c in model.calls] == ["openai/b"]
    assert "openai/b" not in book.rows  # healthy all along: nothing written


@pytest.mark.anyio
async def test_every_model_skipped_raises_unavailable_naming_each():
    book = MemoryBook()
    for name in ("openai/a", "openai/b"):
        book.rows[name] = breaker.after_failure(None, ModelTarget(model=name), f"{name} down", transient=True)
    model = ScriptedModel(["never"])
    with pytest.raises(ModelUnavailable) as info:
        await router(["openai/a", "openai/b"], model, book).complete(MESSAGES)
    assert "openai/a is failing" in str(info.value) and "openai/b is failing" in str(info.value)
    assert "down" not in str(info.value)
    assert isinstance(info.value, ModelError) and model.calls == []


@pytest.mark.anyio
async def test_a_success_after_the_backoff_closes_the_breaker():
    book = MemoryBook()
    failing = breaker.after_failure(None, ModelTarget(model="openai/a"), "down", transient=True)
    book.rows["openai/a"] = replace(failing, next_attempt_at=0.0)  # the wait is over
    result = await router("openai/a", ScriptedModel(["ok"]), book).complete(MESSAGES)
    assert result.text == "ok"
    assert book.rows["openai/a"] == ModelHealth(model="openai/a")


@pytest.mark.anyio
async def test_failures_count_up_across_calls():
    book = MemoryBook()
    target = ModelTarget(model="openai/a", max_retries=0)
    for expected in (1, 2):
        if expected == 2:
            book.rows["openai/a"].next_attempt_at = 0.0  # let the second call through
        with pytest.raises(ModelError):
            await router(target, ScriptedModel([TransientModelError("503")]), book).complete(MESSAGES)
        assert book.rows["openai/a"].failures == expected


@pytest.mark.anyio
async def test_an_explicit_probe_tries_a_model_whose_breaker_is_open():
    book = MemoryBook()
    book.rows["openai/a"] = breaker.after_failure(None, ModelTarget(model="openai/a"), "401", transient=False)
    model = ScriptedModel(["back"])
    token = probe.set(True)
    try:
        result = await router("openai/a", model, book).complete(MESSAGES)
    finally:
        probe.reset(token)
    assert result.text == "back" and len(model.calls) == 1
    assert book.rows["openai/a"].state == "ok"


def test_the_breaker_decides_over_the_stored_row_itself():
    """One type for one thing: the breaker's rules take the store's row, no twin copied field by field."""
    assert ModelHealth is StoredHealth
