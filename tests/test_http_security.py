"""Streamable HTTP facing a network: bearer tokens bound to resources (both protocol eras),
protected-resource metadata, session ownership and idle expiry, the rate limit,
Host/Origin checks, the non-loopback bind refusal, body limit and legacy logging/setLevel.

Servers run in-process (uvicorn on a free loopback port); the bind refusal runs the CLI. The
shares of connections and sessions are tried in test_http_slots.py.
"""

from __future__ import annotations

import json
import subprocess
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from support.mcp import call, fail, ok
from support.processes import PYTHON, REPO, clean_env
from support.timeouts import scaled

from om_mcp.config import ConfigError, hash_token, load_config
from om_mcp.server import build_server
from om_mcp.server.http import bind_refusal, build_http_app
from om_mcp.server.http.ratelimit import RateLimiter
from om_mcp.server.http.run import uvicorn_config
from om_mcp.server.http.tokens import create_token
from om_mcp.testing.ports import free_port

pytestmark = pytest.mark.anyio

ALICE, BOB, ADMIN = "om_alice-token-0123456789abcdef", "om_bob-token-0123456789abcdef", "om_admin-token-0123456789ab"
TOKENS = [
    {"name": "alice", "hash": hash_token(ALICE), "resources": ["alice"]},
    {"name": "bob", "hash": hash_token(BOB), "resources": ["bob"]},
    {"name": "admin", "hash": hash_token(ADMIN), "resources": ["*"]},
]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@asynccontextmanager
async def serving(make_config, host: str = "127.0.0.1", **server: Any) -> AsyncIterator[str]:
    """An om-mcp HTTP app on a free loopback port; yields the MCP URL. `host` is the
    configured bind address (the app's policy follows it); uvicorn listens on loopback."""
    port = free_port()
    config = make_config(server={"transport": "http", "host": host, "port": port, **server})
    app = build_http_app(build_server(config), config)
    web = uvicorn.Server(uvicorn_config(app, config, host="127.0.0.1", lifespan="on"))  # as `serve` runs it
    async with anyio.create_task_group() as group:
        group.start_soon(web.serve)
        with anyio.fail_after(scaled(20)):
            while not web.started:
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            web.should_exit = True


def bearer(server: Any = None, **extra: Any) -> dict[str, Any]:
    return {"auth": {"tokens": TOKENS}, **({"http": server} if server else {}), **extra}


@asynccontextmanager
async def connect(url: str, token: str | None, mode: str = "auto") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=scaled(30)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client


async def post(
    url: str, body: Any, token: str | None = None, session: str | None = None, **headers: str
) -> httpx2.Response:
    sent = dict(ACCEPT, **headers)
    if token:
        sent["Authorization"] = f"Bearer {token}"
    if session:
        sent["Mcp-Session-Id"] = session
        sent["Mcp-Protocol-Version"] = "2025-11-25"
    async with httpx2.AsyncClient(timeout=scaled(30)) as http:
        return await http.post(url, content=body if isinstance(body, bytes) else json.dumps(body), headers=sent)


async def open_session(url: str, token: str | None = None) -> str:
    response = await post(url, INIT, token)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    initialized = await post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token, session)
    assert initialized.status_code == 202
    return session


def note(i: int, text: str) -> dict[str, str]:
    return {"id": f"m{i}", "role": "user", "content": text}


# -- authentication and metadata ------------------------------------------------------------


async def test_no_token_gets_401_pointing_at_the_metadata(make_config):
    async with serving(make_config, **bearer()) as url:
        response = await post(url, INIT)
        assert response.status_code == 401
        challenge = response.headers["www-authenticate"]
        metadata_url = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        assert challenge.startswith("Bearer ") and f'resource_metadata="{metadata_url}"' in challenge
        assert (await post(url, INIT, token="om_not-a-real-token-000000")).status_code == 401
        sessionless = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert (await post(url, sessionless, **{"Mcp-Protocol-Version": "2026-07-28"})).status_code == 401
        async with httpx2.AsyncClient() as http:
            metadata = (await http.get(metadata_url)).json()
        assert metadata["resource"] == url
        assert metadata["bearer_methods_supported"] == ["header"]
        with pytest.raises(ExceptionGroup) as refused:  # the SDK client surfaces the 401 as an exception group
            async with connect(url, None):
                pass
        assert refused.group_contains(MCPError, depth=None)


async def test_metadata_names_the_configured_url_and_authorization_servers(make_config):
    extra = {"resource_url": "https://memory.example.com/mcp", "authorization_servers": ["https://id.example.com"]}
    async with serving(make_config, auth={"tokens": TOKENS, **extra}) as url:
        challenge = (await post(url, INIT)).headers["www-authenticate"]
        assert 'resource_metadata="https://memory.example.com/.well-known/oauth-protected-resource/mcp"' in challenge
        async with httpx2.AsyncClient() as http:
            metadata = (await http.get(url.replace("/mcp", "/.well-known/oauth-protected-resource"))).json()
        assert metadata["resource"] == "https://memory.example.com/mcp"
        assert metadata["authorization_servers"] == ["https://id.example.com"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.slow
async def test_a_token_for_one_resource_cannot_touch_another(make_config, mode):
    """alice's token: her own threads work; bob's threads and resource are refused, for reads,
    writes and resources, in the 2026-07-28 (sessionless) and the legacy era."""
    async with serving(make_config, **bearer()) as url:
        async with connect(url, BOB, mode) as bob:
            await ok(bob, "append_messages", thread_id="tb", messages=[note(1, "bob's secret plan")])
        async with connect(url, ALICE, mode) as alice:
            assert alice.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            # no resource_id: a new thread goes to the token's one resource
            out = await ok(alice, "append_messages", thread_id="ta", messages=[note(1, "alice's note")])
            assert out["stored"] == 1
            assert "ta" in (await alice.read_resource("om://resources/alice/threads")).contents[0].text
            for tool, arguments in [  # another tenant's thread is a thread that does not exist
                ("get_context", {"thread_id": "tb"}),
                ("recall", {"thread_id": "tb", "mode": "search", "query": "secret"}),
                ("update_thread", {"thread_id": "tb", "title": "mine now"}),
                ("delete_thread", {"thread_id": "tb"}),
            ]:
                text = await fail(alice, tool, **arguments)
                assert text == "thread_id: unknown thread 'tb'", (tool, text)
            # named as another thread to read: the words a thread nobody holds gets there
            text = await fail(alice, "recall", thread_id="ta", target_thread_id="tb")
            assert text == "target_thread_id: unknown thread 'tb'"
            assert await fail(alice, "recall", thread_id="ta", target_thread_id="tz") == text.replace("tb", "tz")
            for tool, arguments in [  # and its id cannot be claimed
                ("append_messages", {"thread_id": "tb", "messages": [note(2, "alice was here")]}),
                ("update_working_memory", {"thread_id": "tb", "memory": "# overwritten"}),
            ]:
                text = await fail(alice, tool, **arguments)
                assert text.startswith("thread_id: 'tb' is already in use on this server"), (tool, text)
                assert "bob" not in text
            text = await fail(alice, "append_messages", thread_id="new", resource_id="bob", messages=[note(3, "x")])
            assert "resource 'bob' is not allowed for this token (it may use: alice)" in text
            for uri in [
                "om://threads/tb/messages",
                "om://threads/tb/working-memory",
                "om://threads/tb/status",
                "om://threads/tb/observations",
                "om://threads/tb/events",
            ]:
                with pytest.raises(MCPError, match="unknown thread 'tb'"):
                    await alice.read_resource(uri)
            for uri in [
                "om://resources/bob/threads",
                "om://resources/bob/working-memory",
                "om://resources/bob/observations",
            ]:
                with pytest.raises(MCPError, match="resource 'bob' is not allowed"):
                    await alice.read_resource(uri)
        async with connect(url, ADMIN, mode) as admin:
            context = await ok(admin, "get_context", thread_id="tb")
            assert [m["id"] for m in context["messages"]] == ["m1"]  # nothing of alice's got in
            threads = await call(admin, "recall", thread_id="tb", mode="threads")
            assert "mine now" not in json.dumps(threads)
            assert await ok(admin, "get_context", thread_id="ta")  # "*" reaches every resource


async def test_om_http_token_is_one_token_for_everything(tmp_path):
    config = load_config(env={"OM_HTTP_TOKEN": "a-long-enough-plain-token", "OM_DB_PATH": str(tmp_path / "x.db")})
    assert config.server.auth.mode == "bearer"
    [entry] = config.server.auth.tokens
    assert entry.hash == hash_token("a-long-enough-plain-token") and entry.resources == ["*"]
    assert "a-long-enough-plain-token" not in config.model_dump_json()


def test_tokens_from_environment_and_their_errors():
    value = json.dumps([{"hash": hash_token(ALICE), "resources": ["alice"], "name": "a"}])
    config = load_config(env={"OM_SERVER__AUTH__TOKENS": value})
    assert config.server.auth.mode == "bearer" and config.server.auth.tokens[0].resources == ["alice"]
    for env, key in [
        ({"OM_SERVER__AUTH__TOKENS": json.dumps([{"hash": ALICE, "resources": ["a"]}])}, "server.auth.tokens.0.hash"),
        (
            {"OM_SERVER__AUTH__TOKENS": json.dumps([{"hash": hash_token(ALICE), "resources": []}])},
            "server.auth.tokens.0.resources",
        ),
        ({"OM_SERVER__AUTH__MODE": "bearer"}, "server.auth"),
        ({"OM_HTTP_TOKEN": "short"}, "server.auth"),
        ({"OM_HTTP_TOKEN": "a-long-enough-plain-token", "OM_SERVER__AUTH__MODE": "none"}, "server.auth"),
        ({"OM_SERVER__HTTP__MAX_SESSIONS": "0"}, "server.http.max_sessions"),
        ({"OM_SERVER__HTTP__SESSION_IDLE": "5"}, "server.http.session_idle"),
    ]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            load_config(env=env)


def test_token_create_prints_the_token_once_and_a_loadable_config(tmp_path, capsys):
    from om_mcp.commands import token

    assert token.main(["create", "--resource", "alice", "--resource", "team-x", "--name", "laptop"]) == 0
    out = capsys.readouterr().out
    secret = out.splitlines()[0]
    assert secret.startswith("om_") and out.count(secret) == 1
    toml = out[out.index("[server.auth]") : out.index("or set the environment")]
    (tmp_path / "om.toml").write_text(toml)
    config = load_config(tmp_path / "om.toml", env={})
    [entry] = config.server.auth.tokens
    assert entry.hash == hash_token(secret) and entry.resources == ["alice", "team-x"] and entry.name == "laptop"
    assert token.main(["create", "--resource", ""]) == 2
    assert "--resource" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--resource"):
        create_token([])


# -- sessions -----------------------------------------------------------------------------


async def test_another_tokens_session_id_is_404(make_config):
    async with serving(make_config, **bearer()) as url:
        session = await open_session(url, ALICE)
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert (await post(url, listing, BOB, session)).status_code == 404
        async with httpx2.AsyncClient() as http:
            headers = {
                "Authorization": f"Bearer {BOB}",
                "Mcp-Session-Id": session,
                "Mcp-Protocol-Version": "2025-11-25",
                "Accept": "text/event-stream",
            }
            assert (await http.delete(url, headers=headers)).status_code == 404
            assert (await http.get(url, headers=headers)).status_code == 404
        own = await post(url, listing, ALICE, session)
        assert own.status_code == 200 and "append_messages" in own.text  # bob's DELETE changed nothing


async def test_sessions_without_auth_are_unguessable(make_config):
    async with serving(make_config) as url:
        first, second = await open_session(url), await open_session(url)
        assert first != second and len(first) >= 32 and int(first, 16)
        assert (await post(url, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, session="0" * 32)).status_code == 404


@pytest.mark.slow
async def test_idle_sessions_expire(make_config):
    # Idle for less than this between two requests stays open, even on a loaded machine (at 0.3 s, a loaded
    # machine's first ping came after the session had already expired).
    idle = scaled(0.5)
    async with serving(make_config, http={"session_idle_seconds": idle}) as url:
        session = await open_session(url)
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert (await post(url, ping, session=session)).status_code == 200
        await anyio.sleep(3 * idle)  # a request in flight (even a ping) would keep it alive
        assert (await post(url, ping, session=session)).status_code == 404


# -- rate limit ---------------------------------------------------------------------------


async def test_rate_limit_per_token_answers_429_with_retry_after(make_config):
    async with serving(make_config, **bearer({"rate_limit_per_minute": 3})) as url:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        codes = [(await post(url, ping, ALICE, **{"Mcp-Protocol-Version": "2026-07-28"})).status_code for _ in range(3)]
        assert 429 not in codes
        limited = await post(url, ping, ALICE, **{"Mcp-Protocol-Version": "2026-07-28"})
        assert limited.status_code == 429
        # One request comes back every 60/3 s, less the time the three took on this machine's clock (the exact
        # figure on an injected clock: test_token_bucket_refills_at_the_configured_rate below).
        assert 1 <= int(limited.headers["retry-after"]) <= 20
        assert "rate limit of 3 requests per minute reached for token 'alice'" in limited.text
        other = await post(url, ping, BOB, **{"Mcp-Protocol-Version": "2026-07-28"})
        assert other.status_code != 429  # a bucket per token


@pytest.mark.slow
async def test_without_auth_the_limit_is_per_address_on_a_public_bind_and_off_on_loopback(make_config):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    modern = {"Mcp-Protocol-Version": "2026-07-28"}
    async with serving(make_config, host="0.0.0.0", http={"rate_limit_per_minute": 2}) as url:
        codes = [(await post(url, ping, **modern)).status_code for _ in range(3)]
        assert 429 not in codes[:2] and codes[2] == 429  # (the bare ping itself is a 400: no _meta envelope)
    async with serving(make_config, http={"rate_limit_per_minute": 2}) as url:
        assert 429 not in [(await post(url, ping, **modern)).status_code for _ in range(4)]


def test_token_bucket_refills_at_the_configured_rate():
    now = [0.0]
    limiter = RateLimiter(60, clock=lambda: now[0])
    assert all(limiter.take("a") == 0.0 for _ in range(60))
    assert limiter.take("a") == pytest.approx(1.0)
    now[0] = 2.5
    assert limiter.take("a") == 0.0 and limiter.take("a") == 0.0
    assert limiter.take("a") > 0 and limiter.retry_after(0.2) == 1
    three = RateLimiter(3, clock=lambda: now[0])  # 3 a minute: one comes back every 20 s
    assert [three.take("b") for _ in range(3)] == [0.0] * 3 and three.retry_after(three.take("b")) == 20


# -- Host, Origin, bind address, body size ---------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
async def test_foreign_host_and_origin_are_refused_without_auth(make_config, host):
    """0.0.0.0 (as with --insecure) keeps the checks: a rebinding page gets nothing written."""
    async with serving(make_config, host=host) as url:
        write = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "append_messages", "arguments": {"thread_id": "t", "messages": [note(1, "x")]}},
        }
        assert (await post(url, INIT, Host="evil.example:8765")).status_code == 421
        assert (await post(url, INIT, Origin="http://evil.example")).status_code == 403
        modern = {"Mcp-Protocol-Version": "2026-07-28"}
        assert (await post(url, write, Host="evil.example", Origin="http://evil.example", **modern)).status_code == 421
        assert (await post(url, INIT, Origin="http://localhost:3000")).status_code == 200
        async with connect(url, None) as client:
            context = await ok(client, "get_context", thread_id="t")
            assert not context.get("messages")


async def test_configured_host_names_are_allowed_with_auth_on_a_public_address(make_config):
    async with serving(make_config, host="0.0.0.0", **bearer({"allowed_hosts": ["memory.example.com"]})) as url:
        assert (await post(url, INIT, ALICE, Host="memory.example.com")).status_code == 200
        assert (await post(url, INIT, ALICE, Host="evil.example")).status_code == 421


@pytest.mark.slow
def test_non_loopback_bind_without_auth_is_refused(tmp_path):
    result = subprocess.run(
        [PYTHON, "-m", "om_mcp", "serve", "--transport", "http", "--host", "0.0.0.0", "--db", str(tmp_path / "n.db")],
        env=clean_env(tmp_path),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "--insecure" in result.stderr, result.stderr
    assert result.stdout == "" and not (tmp_path / "n.db").exists()


def test_bind_policy():
    def config(host: str, **extra: Any):
        return load_config(env={}, overrides={"server.host": host, **extra})

    assert bind_refusal(config("127.0.0.1")) is None and bind_refusal(config("::1")) is None
    assert bind_refusal(config("localhost")) is None
    assert "--insecure" in bind_refusal(config("0.0.0.0"))
    assert "--insecure" in bind_refusal(config("my-laptop.lan"))
    assert bind_refusal(config("0.0.0.0"), insecure=True) is None
    assert bind_refusal(config("0.0.0.0", **{"server.auth.tokens": TOKENS})) is None


async def test_oversized_body_is_413(make_config):
    async with serving(make_config) as url:
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * (5 * 1024 * 1024) + b'"}}'
        assert (await post(url, body)).status_code == 413


# -- logging/setLevel -----------------------------------------------------------------------


async def test_legacy_logging_set_level_is_answered_over_http(make_config):
    """The MCP conformance scenario `logging-set-level`: {} back, and the capability advertised."""
    async with serving(make_config) as url:
        response = await post(url, INIT)
        assert "logging" in response.text
        session = await open_session(url)
        answer = await post(
            url, {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "info"}}, session=session
        )
        assert answer.status_code == 200
        assert '"result":{}' in answer.text.replace(" ", "") and "error" not in answer.text


async def test_the_level_a_legacy_client_sets_filters_event_notifications():
    from support.engine import Script, config, msg

    from om_mcp.engine.memory import Memory

    cfg = config()
    memory = await Memory.open(cfg, db_path=":memory:", client=Script().model)
    logs: list[Any] = []

    async def on_log(params):
        logs.append(params)

    try:
        async with Client(build_server(cfg, memory=memory), mode="legacy", logging_callback=on_log) as client:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await ok(client, "append_messages", thread_id="t", messages=[msg(0), msg(1)])
                await client.set_logging_level("info")
                assert (await ok(client, "observe", thread_id="t"))["ran"]
                assert any(isinstance(p.data, dict) and p.data.get("type") for p in logs), "events come at info"
                logs.clear()
                await client.set_logging_level("error")
                await ok(client, "append_messages", thread_id="t", messages=[msg(2), msg(3)])
                assert (await ok(client, "observe", thread_id="t"))["ran"]
                assert logs == []
    finally:
        await memory.close()
