"""The om:// resources through an in-process MCP client, and the resource-updated
notifications in both protocol eras (a legacy session's push, a 2026-07-28 listen stream)."""

from __future__ import annotations

import warnings
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import ResourceUpdatedNotification
from support.mcp import connect, ok, read_json
from support.timeouts import scaled

from om_mcp.config.working_memory import DEFAULT_TEMPLATE

# On SQLite: what the engine relies on of each backend is tests/test_store_conformance.py's.
pytestmark = pytest.mark.anyio

ERAS = pytest.mark.parametrize("mode", ["auto", "legacy"])

TEMPLATES = {
    "om://resources/{resource_id}/threads",
    "om://resources/{resource_id}/working-memory",
    "om://resources/{resource_id}/observations",
    "om://resources/{resource_id}/observations/history",
    "om://threads/{thread_id}/messages",
    "om://threads/{thread_id}/observations",
    "om://threads/{thread_id}/observations/history",
    "om://threads/{thread_id}/events",
    "om://threads/{thread_id}/status",
    "om://threads/{thread_id}/working-memory",
}

FILLED = "# About the User\n- First name: Ada"


def msg(id: str, content: Any, role: str = "user", **extra: Any) -> dict:
    return {"id": id, "role": role, "content": content, **extra}


@ERAS
async def test_resource_templates_are_listed(server, mode):
    async with connect(server, mode) as client:
        templates = (await client.list_resource_templates()).resource_templates
    assert {t.uri_template for t in templates} == TEMPLATES
    assert all(t.mime_type == "application/json" and t.description for t in templates)


@ERAS
async def test_resources(server, mode):
    async with connect(server, mode) as client:
        await ok(
            client,
            "append_messages",
            thread_id="t1",
            resource_id="ann",
            messages=[msg(f"m{i}", f"note {i}", created_at=f"2024-05-01T10:{i:02d}:00+02:00") for i in range(25)],
            thread_metadata={"title": "Notes", "project": "apollo"},
        )
        await ok(client, "append_messages", thread_id="t2", resource_id="ann", messages=[msg("x", "other")])

        threads = await read_json(client, "om://resources/ann/threads")
        assert [t["id"] for t in threads] == ["t2", "t1"]  # newest first
        by_id = {t["id"]: t for t in threads}
        assert {i: t["message_count"] for i, t in by_id.items()} == {"t1": 25, "t2": 1}
        assert by_id["t1"]["title"] == "Notes" and by_id["t1"]["metadata"] == {"project": "apollo"}
        assert all(t["resource_id"] == "ann" and t["created_at"] and t["updated_at"] for t in threads)

        # the newest messages, oldest first, as stored (time zone kept)
        recent = await read_json(client, "om://threads/t1/messages")
        assert [m["id"] for m in recent] == [f"m{i}" for i in range(5, 25)]
        assert recent[0] == {
            "id": "m5",
            "thread_id": "t1",
            "role": "user",
            "created_at": "2024-05-01T10:05:00+02:00",
            "parts": [{"type": "text", "text": "note 5"}],
        }

        view = await read_json(client, "om://threads/t1/working-memory")
        assert view["resource_id"] == "ann" and view["thread_id"] == "t1"
        assert (view["mode"], view["scope"], view["memory"]) == ("template", "resource", DEFAULT_TEMPLATE)
        await ok(client, "update_working_memory", thread_id="t1", memory=FILLED)
        assert await read_json(client, "om://resources/ann/working-memory") == {"resource_id": "ann", "memory": FILLED}
        assert (await read_json(client, "om://threads/t2/working-memory"))["memory"] == FILLED
        assert (await read_json(client, "om://resources/nobody/working-memory"))["memory"] is None
        assert await read_json(client, "om://resources/nobody/threads") == []

        status = await read_json(client, "om://threads/t1/status")
        assert (status["thread_id"], status["resource_id"], status["message_count"]) == ("t1", "ann", 25)
        assert status["unobserved_messages"] == 25
        assert status["windows"]["active"]["messages"]["tokens"] > 0
        assert status["scope"] == "resource" and status["record_id"] == "resource:ann"
        assert status["observation"]["enabled"] is False and "off" in status["observation"]["reason"]

        # observation is off: an empty log, no generations, no events
        log = await read_json(client, "om://threads/t1/observations")
        assert (log["generation"], log["text"], log["groups"]) == (0, "", [])
        assert await read_json(client, "om://resources/ann/observations") == log  # resource scope: one shared log
        assert (await read_json(client, "om://threads/t1/observations/history"))["generations"] == []
        assert await read_json(client, "om://resources/ann/observations/history") == await read_json(
            client, "om://threads/t1/observations/history"
        )
        assert await read_json(client, "om://threads/t1/events") == []


@ERAS
async def test_unknown_things_are_not_found(server, mode):
    async with connect(server, mode) as client:
        await ok(client, "append_messages", thread_id="real", messages=[msg("m1", "hello")])
        for uri in (
            "om://threads/nope/messages",
            "om://threads/nope/status",
            "om://threads/nope/events",
            "om://threads/nope/observations",
            "om://threads/nope/observations/history",
        ):
            with pytest.raises(MCPError, match="nope"):
                await client.read_resource(uri)
        with pytest.raises(MCPError, match="nobody"):
            await client.read_resource("om://resources/nobody/observations")
        with pytest.raises(MCPError):
            await client.read_resource("om://nothing/here")
        # a failed read changed nothing
        assert [t["id"] for t in await read_json(client, "om://resources/default/threads")] == ["real"]


async def test_working_memory_of_an_unknown_thread_is_not_found(server):
    async with connect(server) as client:
        with pytest.raises(MCPError, match="nope"):
            await client.read_resource("om://threads/nope/working-memory")


# -- notifications --------------------------------------------------------------------------------------------


class Heard:
    """Resource-updated URIs a legacy session is sent, with a way to wait for one."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._arrived = anyio.Event()

    async def handler(self, message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self._arrived.set()

    async def wait_for(self, uri: str) -> None:
        with anyio.fail_after(scaled(10)):
            while uri not in self.uris:
                self._arrived = anyio.Event()
                if uri in self.uris:
                    return
                await self._arrived.wait()


async def subscribe(client, uri: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resources/subscribe is deprecated in 2026-07-28, current before it
        await client.subscribe_resource(uri)


async def test_legacy_session_is_notified_of_changes(server):
    heard = Heard()
    async with connect(server, "legacy", message_handler=heard.handler) as client:
        capabilities = client.server_capabilities.resources
        # a well-behaved client subscribes only where the server says it can
        if capabilities is not None and capabilities.subscribe:
            for uri in (
                "om://threads/t1/status",
                "om://threads/t1/messages",
                "om://resources/default/threads",
                "om://threads/t1/working-memory",
                "om://resources/default/working-memory",
            ):
                await subscribe(client, uri)
        await ok(client, "append_messages", thread_id="t1", user="hello")
        await heard.wait_for("om://threads/t1/status")
        await heard.wait_for("om://threads/t1/messages")
        await heard.wait_for("om://resources/default/threads")  # the thread was created
        await ok(client, "update_working_memory", thread_id="t1", memory=FILLED)
        await heard.wait_for("om://resources/default/working-memory")
        await heard.wait_for("om://threads/t1/working-memory")


async def test_legacy_client_can_subscribe(server):
    heard = Heard()
    async with connect(server, "legacy", message_handler=heard.handler) as client:
        assert client.server_capabilities.resources.subscribe is True
        await subscribe(client, "om://threads/t1/status")
        await ok(client, "append_messages", thread_id="t1", user="hello")
        await heard.wait_for("om://threads/t1/status")


async def test_listen_hears_status_after_append(server):
    async with connect(server) as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_capabilities.resources.subscribe is True
        watched = ["om://threads/t1/status", "om://threads/t1/messages", "om://threads/other/status"]
        async with client.listen(resource_subscriptions=watched) as stream:
            assert sorted(stream.honored.resource_subscriptions) == sorted(watched)
            await ok(client, "append_messages", thread_id="t1", user="hello")
            heard: set[str] = set()
            with anyio.fail_after(scaled(10)):
                async for event in stream:
                    heard.add(event.uri)
                    if {"om://threads/t1/status", "om://threads/t1/messages"} <= heard:
                        break
        assert "om://threads/other/status" not in heard


async def test_listen_hears_working_memory_and_thread_changes(server):
    async with connect(server) as client:
        await ok(client, "append_messages", thread_id="t1", user="hello")
        watched = [
            "om://resources/default/working-memory",
            "om://threads/t1/working-memory",
            "om://resources/default/threads",
            "om://threads/t1/messages",
        ]
        heard: list[str] = []

        async def until(*uris: str) -> None:
            with anyio.fail_after(scaled(10)):
                async for event in stream:
                    heard.append(event.uri)
                    if set(uris) <= set(heard):
                        return

        async with client.listen(resource_subscriptions=watched) as stream:
            await ok(client, "update_working_memory", thread_id="t1", memory=FILLED)
            await until("om://resources/default/working-memory", "om://threads/t1/working-memory")
            heard.clear()
            await ok(client, "update_thread", thread_id="t1", title="Renamed")
            await until("om://resources/default/threads")
            heard.clear()
            await ok(client, "delete_thread", thread_id="t1")
            await until("om://resources/default/threads", "om://threads/t1/messages")


async def test_a_legacy_session_hears_what_a_background_cycle_changed():
    """resources/subscribe (2025-11-25) clients are told of observations, status, working memory
    and the thread list when a background cycle commits, after the request that caused it answered."""
    from om_mcp.config import load_config
    from om_mcp.engine.memory import Memory
    from om_mcp.server import build_server
    from om_mcp.testing import ScriptedModel

    release = anyio.Event()

    async def observer(messages, target):
        await release.wait()  # the cycle ends only after the append has answered
        return (
            "<observations>\nDate: Jan 1, 2026\n* 🔴 (10:00) Ada plans a trip to Porto\n</observations>\n"
            "<thread-title>Porto trip</thread-title>\n"
            "<working-memory>\n# About the User\n- First name: Ada\n</working-memory>"
        )

    env = {
        "OM_MODEL": "default",
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS": "50",
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS": "false",
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__THREAD_TITLE": "true",
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__MANAGE_WORKING_MEMORY": "true",
    }
    memory = await Memory.open(load_config(env=env), db_path=":memory:", client=ScriptedModel(observer))
    watched = [
        "om://threads/t1/observations",
        "om://resources/default/observations",
        "om://threads/t1/status",
        "om://resources/default/working-memory",
        "om://resources/default/threads",
    ]
    heard = Heard()
    try:
        async with memory.running(poll_seconds=None):
            server = build_server(memory.config, memory=memory)
            async with connect(server, "legacy", message_handler=heard.handler) as client:
                for uri in watched:
                    await subscribe(client, uri)
                words = "I am Ada and I am planning a long trip to Porto next spring with my family. " * 4
                await ok(client, "append_messages", thread_id="t1", user=words, assistant="Noted, Porto it is.")
                heard.uris.clear()  # what the append itself changed was told; now the cycle's own
                release.set()
                for uri in watched:
                    await heard.wait_for(uri)
                assert "om://threads/t1/messages" not in heard.uris  # only what was subscribed
    finally:
        await memory.close()
