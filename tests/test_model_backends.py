"""Model backends that need no API key: `claude -p` (against a fake `claude`
executable), MCP sampling (through the in-process client), and "auto".

The fake `claude` prints what Claude Code 2.1.197 printed for the same case
(success, "Not logged in", HTTP 401/500 from the API, connection refused).
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CreateMessageResult, ErrorData, TextContent

from om_mcp.config.models import CallPolicy, ModelSettings, ModelTarget
from om_mcp.hosts.common import HOOKS_ENV
from om_mcp.models.auto import CLAUDE_CLI_MODEL, NO_MODEL_REASON, is_real_key, resolve_auto
from om_mcp.models.claude_cli import HOOKS_ENV as CLI_HOOKS_ENV
from om_mcp.models.claude_cli import MAX_ARG_CHARS, ClaudeCliClient, cli_model, split_prompt
from om_mcp.models.claude_login import Login
from om_mcp.models.clients import Clients, backend_of
from om_mcp.models.errors import ModelError
from om_mcp.models.router import ModelRouter, probe
from om_mcp.models.sampler import NO_CLIENT, NoSampler
from om_mcp.models.sampler import Sampler as SamplerProtocol
from om_mcp.server.sampling import SamplingBroker
from om_mcp.testing import ScriptedModel


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --------------------------------------------------------------------------------------
# claude -p
# --------------------------------------------------------------------------------------

SUCCESS = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "api_error_status": None,
    "duration_ms": 58,
    "num_turns": 1,
    "result": "REPLY",
    "stop_reason": "end_turn",
    "session_id": "964905f2",
    "total_cost_usd": 0.000037,
    "usage": {"input_tokens": 12, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 5, "output_tokens": 7},
    "modelUsage": {"claude-haiku-4-5-20251001": {"inputTokens": 12, "outputTokens": 7, "costUSD": 0.000037}},
}


def _error(result: str, status: int | None) -> dict:
    return {
        **SUCCESS,
        "is_error": True,
        "api_error_status": status,
        "result": result,
        "total_cost_usd": 0,
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "modelUsage": {},
    }


FAKE_CLAUDE = textwrap.dedent(
    """\
    #!{python}
    import json, os, subprocess, sys, time
    argv = sys.argv[1:]
    stdin = sys.stdin.read()
    mode = os.environ.get("FAKE_CLAUDE_MODE", "ok")
    record = {{"argv": argv, "stdin": stdin, "cwd": os.getcwd(), "pid": os.getpid(),
              "env": {{k: v for k, v in os.environ.items() if k.startswith(("CLAUDE", "OM_", "MAX_"))}}}}
    if "--system-prompt-file" in argv:
        record["system_file"] = open(argv[argv.index("--system-prompt-file") + 1]).read()
    if mode == "hang":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        record["child"] = child.pid
    with open(os.environ["FAKE_CLAUDE_LOG"], "w") as f:
        json.dump(record, f)
    replies = json.loads(os.environ["FAKE_CLAUDE_REPLIES"])
    if mode == "hang":
        time.sleep(120)
    elif mode == "badflag":
        print("error: unknown option '--strict-mcp-config'", file=sys.stderr)
        sys.exit(1)
    elif mode == "garbage":
        print("Segmentation fault")
        sys.exit(139)
    else:
        reply = replies[mode]
        print(json.dumps(reply))
        sys.exit(1 if reply.get("is_error") else 0)
    """
)


@pytest.fixture
def fake_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "claude"
    script.write_text(FAKE_CLAUDE.format(python=sys.executable))
    script.chmod(0o755)
    log = tmp_path / "claude-call.json"
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(log))
    monkeypatch.setenv(
        "FAKE_CLAUDE_REPLIES",
        json.dumps(
            {
                "ok": SUCCESS,
                "not_logged_in": _error("Not logged in · Please run /login", None),
                "bad_key": _error("Invalid API key · Fix external API key", 401),
                "server_error": _error(
                    "API Error: 500 Internal server error. This is a server-side issue, usually temporary", 500
                ),
                "overloaded": _error("API Error: 529 Overloaded", 529),
                "no_connection": _error("API Error: Unable to connect to API (ConnectionRefused)", None),
                "refused": _error("Claude refused to answer", None),
            }
        ),
    )

    def call() -> dict:
        return json.loads(log.read_text())

    return call


PROMPT = [
    {"role": "system", "content": "You are the Observer."},
    {
        "role": "user",
        "content": [{"type": "text", "text": "Messages to observe:"}, {"type": "text", "text": "User: hi"}],
    },
]


async def _complete(model: str = "claude-cli/haiku", timeout: float = 30.0, settings: ModelSettings | None = None):
    return await ClaudeCliClient().complete(PROMPT, ModelTarget(model=model), settings or ModelSettings(), timeout)


@pytest.mark.anyio
async def test_claude_cli_runs_a_bare_headless_session(fake_claude, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "ok")
    completion = await _complete(settings=ModelSettings(max_output_tokens=4000))
    assert completion.text == "REPLY" and completion.model == "claude-cli/haiku"
    assert completion.usage.input_tokens == 20 and completion.usage.output_tokens == 7
    assert completion.usage.cost == pytest.approx(0.000037)
    assert completion.usage.provider_metadata["response_models"] == ["claude-haiku-4-5-20251001"]
    call = fake_claude()
    argv = call["argv"]
    assert argv[0] == "-p" and call["stdin"] == "Messages to observe:\nUser: hi"
    assert argv[argv.index("--output-format") + 1] == "json"
    assert argv[argv.index("--model") + 1] == "haiku"
    assert argv[argv.index("--tools") + 1] == ""  # no tools at all
    assert "--strict-mcp-config" in argv and "--mcp-config" not in argv  # no MCP servers
    assert "--no-session-persistence" in argv
    assert json.loads(argv[argv.index("--settings") + 1]) == {"disableAllHooks": True}
    assert argv[argv.index("--system-prompt") + 1] == "You are the Observer."
    env = call["env"]
    assert env[HOOKS_ENV] == "off" and env["CLAUDE_CODE_DISABLE_CLAUDE_MDS"] == "1"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "0" and env["MAX_THINKING_TOKENS"] == "0"
    assert env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "4000"
    assert Path(call["cwd"]).name.startswith("om-mcp-claude-") and not Path(call["cwd"]).exists()


@pytest.mark.anyio
async def test_claude_cli_long_system_prompt_goes_through_a_file(fake_claude, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "ok")
    big = "rule\n" * (MAX_ARG_CHARS // 4)
    await ClaudeCliClient().complete(
        [{"role": "system", "content": big}, {"role": "user", "content": "x"}],
        ModelTarget(model="claude-cli"),
        ModelSettings(),
        30,
    )
    call = fake_claude()
    assert "--system-prompt" not in call["argv"] and call["system_file"] == big.strip()
    assert "--model" not in call["argv"]  # bare "claude-cli": the CLI's default model


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("mode", "transient", "status", "words"),
    [
        ("not_logged_in", False, None, "log in"),
        ("bad_key", False, 401, "Invalid API key"),
        ("refused", False, None, "refused"),
        ("server_error", True, 500, "500"),
        ("overloaded", True, 529, "Overloaded"),
        ("no_connection", True, None, "Unable to connect"),
        ("badflag", False, None, "unknown option"),
        ("garbage", False, None, "Segmentation fault"),
    ],
)
async def test_claude_cli_failures_are_mapped(fake_claude, monkeypatch, mode, transient, status, words) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_MODE", mode)
    with pytest.raises(ModelError) as caught:
        await _complete()
    assert caught.value.transient is transient and caught.value.status_code == status
    assert words in caught.value.message and "\n" not in caught.value.message


@pytest.mark.anyio
async def test_claude_cli_timeout_kills_the_process_group(fake_claude, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "hang")
    with pytest.raises(ModelError) as caught:
        await _complete(timeout=3.0)
    assert caught.value.transient and "timed out" in caught.value.message
    call = fake_claude()
    for pid in (call["pid"], call["child"]):  # the CLI and what it started are gone
        with pytest.raises(ProcessLookupError):
            _wait_gone(pid)


def _wait_gone(pid: int) -> None:
    import time

    for _ in range(100):  # the kernel reaps the killed child asynchronously
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        os.kill(pid, 0)  # raises ProcessLookupError once it is gone
        time.sleep(0.05)


@pytest.mark.anyio
async def test_claude_cli_missing_is_a_permanent_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ModelError) as caught:
        await _complete()
    assert not caught.value.transient and "not on PATH" in caught.value.message


def test_claude_cli_model_strings_and_prompt_shape() -> None:
    assert cli_model("claude-cli/haiku") == "haiku" and cli_model("claude-cli") is None
    assert cli_model("claude-cli/claude-haiku-4-5-20251001") == "claude-haiku-4-5-20251001"
    with pytest.raises(ModelError):
        cli_model("claude-cli/")
    system, prompt = split_prompt(
        [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
        ]
    )
    assert system and prompt == "User: a\n\nAssistant: b\n\nUser: [image_url omitted]"
    assert CLI_HOOKS_ENV == HOOKS_ENV


@pytest.mark.anyio
async def test_router_retries_transient_cli_failures_through_the_clients(fake_claude, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "server_error")
    router = ModelRouter(
        ModelTarget(model="claude-cli/haiku", max_retries=1),
        policy=CallPolicy(backoff_initial_seconds=0, backoff_max_seconds=0),
        clients=Clients(litellm=ScriptedModel(["never used"])),
    )
    with pytest.raises(ModelError) as caught:
        await router.complete(PROMPT)
    assert caught.value.attempts == 1 and caught.value.transient  # a background call tries once
    token = probe.set(True)  # a manual cycle retries as configured
    try:
        with pytest.raises(ModelError) as caught:
            await router.complete(PROMPT)
    finally:
        probe.reset(token)
    assert caught.value.attempts == 2
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "ok")
    assert (await router.complete(PROMPT)).text == "REPLY"


@pytest.mark.anyio
async def test_clients_route_by_model_string() -> None:
    assert [
        backend_of(m)
        for m in ("claude-cli/haiku", "claude-cli", "sampling", "sampling/fast", "gemini/x", "samplingx/y")
    ] == ["claude-cli", "claude-cli", "sampling", "sampling", "litellm", "litellm"]
    clients = Clients(SamplingBroker(), litellm=ScriptedModel(["from litellm"]), claude_cli=ScriptedModel(["from cli"]))

    async def ask(model: str) -> str:
        target = ModelTarget(model=model)
        return (await clients.for_target(target).complete(PROMPT, target, ModelSettings(), 5)).text

    assert await ask("gemini/x") == "from litellm"
    assert await ask("claude-cli/haiku") == "from cli"
    with pytest.raises(ModelError, match="no connected client"):
        await ask("sampling")


@pytest.mark.anyio
async def test_without_a_server_the_sampling_target_says_what_to_do() -> None:
    """Models know sampling only as the `Sampler` protocol: the MCP server's broker is one, and a
    process that serves no client (the CLI, the hooks' worker) gets `NoSampler`."""
    assert isinstance(SamplingBroker(), SamplerProtocol) and isinstance(NoSampler(), SamplerProtocol)
    clients = Clients()
    assert isinstance(clients.sampler, NoSampler) and not clients.sampler.available
    target = ModelTarget(model="sampling/fast")
    with pytest.raises(ModelError) as caught:
        await clients.for_target(target).complete(PROMPT, target, ModelSettings(), 5)
    assert caught.value.message == NO_CLIENT and not caught.value.transient and caught.value.model == "sampling/fast"


# --------------------------------------------------------------------------------------
# MCP sampling
# --------------------------------------------------------------------------------------


def _server(broker: SamplingBroker) -> MCPServer:
    server = MCPServer("sampling-test")

    @server.tool()
    async def hello(ctx: Context) -> str:
        return "registered" if broker.register(ctx.session, ctx.client_capabilities) else "not registered"

    return server


class Sampler:
    def __init__(self, reply: str = "observed!", error: bool = False) -> None:
        self.calls: list = []
        self.reply, self.error = reply, error

    async def __call__(self, context, params):
        self.calls.append(params)
        if self.error:
            return ErrorData(code=-1, message="User rejected sampling request")
        return CreateMessageResult(
            role="assistant", model="host-model-1", content=TextContent(type="text", text=self.reply)
        )


@pytest.mark.anyio
async def test_sampling_outside_a_request_on_a_legacy_connection() -> None:
    broker = SamplingBroker()
    sampler = Sampler()
    client = broker
    async with Client(_server(broker), mode="legacy", sampling_callback=sampler) as mcp_client:
        assert (await mcp_client.call_tool("hello", {})).content[0].text == "registered"
        await mcp_client.call_tool("hello", {})  # a second request of the same client is one entry
        assert broker.status() == "1 connected client(s) offer sampling"
        # a background cycle: no request in flight
        completion = await client.complete(
            PROMPT + [{"role": "assistant", "content": "previous"}],
            ModelTarget(model="sampling/claude-haiku"),
            ModelSettings(max_output_tokens=500, temperature=0.2),
            10,
        )
    assert completion.text == "observed!" and completion.model == "sampling/claude-haiku"
    assert completion.usage.provider_metadata["response_model"] == "host-model-1"
    (params,) = sampler.calls
    assert params.system_prompt == "You are the Observer."
    assert [(m.role, m.content.text) for m in params.messages] == [
        ("user", "Messages to observe:"),
        ("user", "User: hi"),
        ("assistant", "previous"),
    ]
    assert params.max_tokens == 500 and params.temperature == 0.2
    assert [h.name for h in params.model_preferences.hints] == ["claude-haiku"]
    # the client is gone: the cycle fails with a status that says why, and the entry is dropped
    with pytest.raises(ModelError) as caught:
        await client.complete(PROMPT, ModelTarget(model="sampling"), ModelSettings(), 10)
    assert caught.value.message == NO_CLIENT and not caught.value.transient and not broker.available


@pytest.mark.anyio
async def test_sampling_is_not_offered_by_modern_or_incapable_clients() -> None:
    broker = SamplingBroker()
    async with Client(_server(broker), sampling_callback=Sampler()) as modern:  # 2026-07-28: no back-channel
        assert modern.protocol_version == "2026-07-28"
        assert (await modern.call_tool("hello", {})).content[0].text == "not registered"
    async with Client(_server(broker), mode="legacy") as plain:  # no sampling capability
        assert (await plain.call_tool("hello", {})).content[0].text == "not registered"
        with pytest.raises(ModelError, match="no connected client offers sampling"):
            await broker.complete(PROMPT, ModelTarget(model="sampling"), ModelSettings(), 5)


@pytest.mark.anyio
async def test_a_refused_sampling_request_is_retried_later() -> None:
    broker = SamplingBroker()
    async with Client(_server(broker), mode="legacy", sampling_callback=Sampler(error=True)) as mcp_client:
        await mcp_client.call_tool("hello", {})
        with pytest.raises(ModelError) as caught:
            await broker.complete(PROMPT, ModelTarget(model="sampling"), ModelSettings(), 10)
    # One refusal (a person declined) backs off; it does not pause sampling for good.
    assert caught.value.transient and "User rejected" in caught.value.message


# --------------------------------------------------------------------------------------
# auto
# --------------------------------------------------------------------------------------

REAL = "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"


def test_auto_prefers_a_provider_key() -> None:
    choice = resolve_auto({"ANTHROPIC_API_KEY": "sk-ant-api03-" + "a" * 40}, lambda _: "/usr/bin/claude")
    assert choice.targets == ({"model": "anthropic/claude-haiku-4-5", "api_key_env": "ANTHROPIC_API_KEY"},)
    assert "ANTHROPIC_API_KEY" in choice.reason
    both = resolve_auto({"OPENAI_API_KEY": "sk-proj-" + "b" * 40, "GEMINI_API_KEY": REAL}, lambda _: None)
    assert both.targets == ({"model": "gemini/gemini-2.5-flash", "api_key_env": "GEMINI_API_KEY"},)
    google = resolve_auto({"GOOGLE_API_KEY": REAL, "GEMINI_API_KEY": "your-key-here"}, lambda _: None)
    assert google.targets == ({"model": "gemini/gemini-2.5-flash", "api_key_env": "GOOGLE_API_KEY"},)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "your-key-here",
        "YOUR_API_KEY",
        "sk-...",
        "sk-xxxxxxxxxxxxxxxx",
        "<key>",
        "<your-openai-key>",
        "changeme",
        "${OPENAI_API_KEY}",
        "xxxxxxxxxxxxxxxxxxxx",
        "sk-",
        "short",
        "'  '",
        "paste your key here",
    ],
)
def test_placeholders_are_not_keys(value: str) -> None:
    assert not is_real_key(value)
    assert resolve_auto({"OPENAI_API_KEY": value}, lambda _: None).models == ("sampling",)


def test_auto_falls_back_to_the_cli_then_sampling_then_explains() -> None:
    seen: list[str] = []

    def which(name: str) -> str | None:
        seen.append(name)
        return "/home/u/.local/bin/claude"

    cli = resolve_auto({"OPENAI_API_KEY": "sk-..."}, which, login=lambda *_: Login(True, "claude.ai"))
    assert cli.models == (CLAUDE_CLI_MODEL, "sampling") and seen == ["claude"]
    assert "/home/u/.local/bin/claude" in cli.reason
    # Sampling alone: it works only while a client offers it, so the reason says how to fix things.
    none = resolve_auto({}, lambda _: None)
    assert none.models == ("sampling",) and none.reason == NO_MODEL_REASON and "GEMINI_API_KEY" in none.reason
    assert is_real_key(REAL) and is_real_key("sk-ant-api03-" + "Z" * 40)
