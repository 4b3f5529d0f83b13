"""subscriptions/listen over HTTP with bearer tokens: a token hears only the URIs it may
read. Refused URIs are left out of the acknowledged (honored) set, and no event for them
reaches the stream."""

from __future__ import annotations

import anyio
import pytest
from support.mcp import ok
from test_http_security import ADMIN, ALICE, BOB, bearer, connect, note, serving

from om_mcp.server.uris import parse as parse_uri

pytestmark = pytest.mark.anyio

BOBS = [
    "om://threads/tb/status",
    "om://threads/tb/messages",
    "om://resources/bob/threads",
    "om://resources/bob/observations/history",
]
ALICES = ["om://threads/ta/status", "om://resources/alice/threads"]
OTHERS = ["om://threads/not-yet/status", "file:///etc/passwd", "om://threads//status"]


async def heard_within(stream, seconds: float) -> list[str]:
    heard: list[str] = []
    with anyio.move_on_after(seconds):
        async for event in stream:
            heard.append(event.uri)
    return heard


@pytest.mark.slow
async def test_a_token_listens_only_to_what_it_may_read(make_config):
    async with serving(make_config, **bearer()) as url:
        async with connect(url, BOB) as bob:
            await ok(bob, "append_messages", thread_id="tb", messages=[note(1, "bob's plan")])
        async with connect(url, ALICE) as alice:
            await ok(alice, "append_messages", thread_id="ta", messages=[note(1, "alice's note")])
            async with alice.listen(resource_subscriptions=BOBS + ALICES + OTHERS) as stream:
                assert sorted(stream.honored.resource_subscriptions) == sorted(ALICES)
                async with connect(url, BOB) as bob:
                    await ok(bob, "append_messages", thread_id="tb", messages=[note(2, "bob again")])
                    await ok(bob, "update_thread", thread_id="tb", title="renamed")
                await ok(alice, "append_messages", thread_id="ta", messages=[note(2, "mine")])
                heard = await heard_within(stream, 2.0)
            assert "om://threads/ta/status" in heard
            assert not set(heard) & set(BOBS), heard
            async with alice.listen(resource_subscriptions=BOBS) as stream:  # nothing left: still a stream
                assert not stream.honored.resource_subscriptions
        async with connect(url, ADMIN) as admin:  # "*" hears everything it asks for
            async with admin.listen(resource_subscriptions=BOBS + ALICES) as stream:
                assert sorted(stream.honored.resource_subscriptions) == sorted(BOBS + ALICES)


def test_our_uris_are_parsed_with_ids_that_hold_slashes():
    assert parse_uri("om://threads/a%2Fb/observations/history") == ("thread", "a/b", "observations/history")
    assert parse_uri("om://threads/a/b/observations/history") is None  # a "/" in an id is written %2F
    assert parse_uri("om://threads/t/observations") == ("thread", "t", "observations")
    assert parse_uri("om://resources/r/working-memory") == ("resource", "r", "working-memory")
    assert parse_uri("om://threads//status") is None and parse_uri("om://threads/t/secret") is None
    assert parse_uri("https://example.com/status") is None
