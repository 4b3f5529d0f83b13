"""Tenants apart in what is not a thread's own: the model's health, the server's spend, and
legacy subscriptions, tried by one token against another over real HTTP.

Before: the model-health status quoted the model's unusable answer, which quoted bob's messages,
and it is one for the whole server, so bob's words appeared in alice's `get_context(include_status)`
and status resource; and a legacy `resources/subscribe` was never checked, so alice heard every
append to bob's thread. The model is the scripted OpenAI-compatible server (litellm's real path).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ResourceUpdatedNotification
from support.mcp import ok, read_json
from test_http_security import ADMIN, ALICE, BOB, bearer, connect, note, serving

from om_mcp.models import health
from om_mcp.models.litellm_client import load_litellm
from om_mcp.testing.fake_server import FakeLLMServer, default_responder, request_text

pytestmark = pytest.mark.anyio

SECRET = "BOBSECRET-4471"


@pytest.fixture(scope="module", autouse=True)
def litellm_imported() -> None:
    load_litellm()


def refuses_bob(request: dict[str, Any]) -> str:
    """An Observer that refuses bob's conversation, quoting it, and observes anyone else's."""
    text = request_text(request)
    if SECRET in text:
        return f"I can't help with that: the user asked me to keep the launch code {SECRET} for the payroll move."
    return default_responder(request)


def observing(make_config: Any, api_base: str) -> Any:
    """`make_config` with observation on, through the scripted server."""
    om = {
        "model": {"model": "openai/fake", "api_base": api_base},
        "scope": "thread",
        "observation": {"message_tokens": 5000},  # only the manual runs below call the model
        "call_policy": {"timeout_seconds": 10, "total_budget_seconds": 20},
    }
    return lambda **options: make_config(observational_memory=om, **options)


async def test_the_models_failure_text_and_the_spend_are_the_admins_alone(make_config):
    with FakeLLMServer(refuses_bob) as fake:
        async with serving(observing(make_config, fake.base_url), **bearer()) as url:
            async with connect(url, BOB) as bob:
                await ok(bob, "append_messages", thread_id="tb", messages=[note(1, f"the launch code is {SECRET}")])
                for _ in range(health.UNUSABLE_BEFORE_PAUSE):
                    assert not (await ok(bob, "observe", thread_id="tb"))["ran"]
                bobs_own = await read_json(bob, "om://threads/tb/status")
            async with connect(url, ALICE) as alice:
                appended = await ok(
                    alice, "append_messages", thread_id="ta", messages=[note(1, "alice's note")], include_status=True
                )
                context = await ok(alice, "get_context", thread_id="ta", include_status=True)
                status = await read_json(alice, "om://threads/ta/status")
                events = (await alice.read_resource("om://threads/ta/events")).contents[0].text
                base = url.removesuffix("/mcp")
                async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=30) as http:
                    page = [(await http.get(f"{base}{path}")).text for path in ("/api/info", "/api/threads/ta")]
                seen = json.dumps([appended, context, status, events, page])
                assert SECRET not in seen and "payroll" not in seen, seen
                # what alice is told is still true: the model is paused, in our words
                assert status["observation"]["model_ready"] is False
                assert "answered with nothing usable 3 times in a row" in status["observation"]["reason"]
                assert context["status"]["model_ready"] is False and "nothing usable" in context["status"]["reason"]
                assert "today" not in status["spend"] and "this_month" not in status["spend"]
                assert "today" not in json.loads(page[1])["spend"]
            async with connect(url, ADMIN) as admin:
                operator = await read_json(admin, "om://threads/ta/status")
            assert SECRET in operator["observation"]["reason"] and SECRET in operator["observation"]["last_failure"]
            assert "today" in operator["spend"] and "this_month" in operator["spend"]
    # bob's token is bound too: the shared breaker's text is the operator's, even about bob's words
    assert SECRET not in json.dumps(bobs_own)


class Heard:
    def __init__(self) -> None:
        self.uris: list[str] = []

    async def handler(self, message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))


@asynccontextmanager
async def legacy(url: str, token: str, heard: Heard) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode="legacy", message_handler=heard.handler) as client:
            yield client


async def subscribe(client: Client, uri: str) -> str | None:
    """None when subscribed, else the refusal's text."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resources/subscribe is deprecated in 2026-07-28
        try:
            await client.subscribe_resource(uri)
        except MCPError as error:
            return str(error)
    return None


async def test_a_legacy_subscription_to_what_the_token_may_not_read_is_refused(make_config):
    async with serving(make_config, **bearer()) as url:
        async with connect(url, BOB) as bob:
            await ok(bob, "append_messages", thread_id="tb", messages=[note(1, "bob's plan")])
        heard = Heard()
        async with legacy(url, ALICE, heard) as alice:
            await ok(alice, "append_messages", thread_id="ta", messages=[note(1, "alice's note")])
            refusals = {
                uri: await subscribe(alice, uri)
                for uri in (
                    "om://threads/tb/status",
                    "om://threads/tb/messages",
                    "om://threads/nobody/status",
                    "om://resources/bob/threads",
                    "om://resources/*/threads",
                    "file:///etc/passwd",
                )
            }
            assert refusals["om://threads/tb/status"] == "unknown thread 'tb'"
            assert refusals["om://threads/nobody/status"] == "unknown thread 'nobody'"  # bob's reads as nobody's
            assert "resource 'bob' is not allowed for this token" in refusals["om://resources/bob/threads"]
            assert all(refusals.values()), refusals
            assert await subscribe(alice, "om://threads/ta/status") is None
            assert await subscribe(alice, "om://resources/alice/threads") is None
            async with connect(url, BOB) as bob:
                await ok(bob, "append_messages", thread_id="tb", messages=[note(2, "bob again")])
                await ok(bob, "update_thread", thread_id="tb", title="renamed")
            await ok(alice, "append_messages", thread_id="ta", messages=[note(2, "mine")])
            with anyio.fail_after(30):
                while "om://threads/ta/status" not in heard.uris:
                    await anyio.sleep(0.02)
            await ok(alice, "get_context", thread_id="ta")  # one more round trip: anything of bob's came first
        assert not [uri for uri in heard.uris if "tb" in uri or "bob" in uri], heard.uris
        heard = Heard()
        async with legacy(url, ADMIN, heard) as admin:  # "*" may subscribe to anything it may read
            assert await subscribe(admin, "om://threads/tb/status") is None
