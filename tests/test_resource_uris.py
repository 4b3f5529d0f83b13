"""Every id the tools accept is readable through every resource URI, in one documented
encoding (RFC 6570 percent-encoding, `server/uris.py`), and `%` inside an id stays itself.

Before: `om://resources/%2Fhome%2Fme%2Fproject/threads` (every hook project) and
`C:\\proj` answered "Unknown resource" (the SDK's file-path checks), and updates were
published with the raw id, so a subscription to the encoded URI heard nothing.

Driven as a client would: templates from `resources/templates/list`, expanded by the
client's own RFC 6570 code, read with `resources/read`, in process and over stdio.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.uri_template import UriTemplate
from support.mcp import connect, ok, read_json
from support.processes import PYTHON, REPO, clean_env
from support.timeouts import scaled

from om_mcp.server.uris import canonical, parse, resource_uri, thread_uri

pytestmark = pytest.mark.anyio

IDS = [
    "/home/me/project",
    "C:\\proj",
    "a:b",
    "what?",
    "#channel",
    "100%",
    "a%2Fb",  # a literal %2F: must not become "/"
    "a/b",
    "my project",
    "café ☕ 日本",
    "..",
    "../etc/passwd",
    "~me",
]


def expand(template: str, value: str) -> str:
    name = "thread_id" if "{thread_id}" in template else "resource_id"
    return UriTemplate.parse(template).expand({name: value})


def test_the_encoding_round_trips_every_character():
    for ident in IDS:
        for kind, build in (("thread", thread_uri), ("resource", resource_uri)):
            uri = build(ident, "observations/history")
            assert "/" not in uri.split("/", 3)[3].rsplit("/observations/history", 1)[0], uri
            assert parse(uri) == (kind, ident, "observations/history")
            assert canonical(uri) == uri
    assert thread_uri("a%2Fb", "messages") == "om://threads/a%252Fb/messages"
    assert resource_uri("/home/me/project", "threads") == "om://resources/%2Fhome%2Fme%2Fproject/threads"
    assert canonical("om://threads/a%2fb/status") == "om://threads/a%2Fb/status"  # either case reads the same
    assert parse("om://threads/50%off/status") == ("thread", "50%off", "status")  # not an escape: stays itself


async def store_one_thread_per_id(client: Client) -> None:
    for n, ident in enumerate(IDS):
        await ok(
            client,
            "append_messages",
            thread_id=ident,
            resource_id=ident,
            messages=[{"id": f"m{n}", "role": "user", "content": f"message {n} of {ident}"}],
        )


async def read_everything(client: Client) -> dict[str, Any]:
    """Each template, expanded for each id, read; returns {uri: json}."""
    templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
    assert len(templates) == 10, templates
    out = {}
    for template in templates:
        for ident in IDS:
            out[expand(template, ident)] = await read_json(client, expand(template, ident))
    return out


def check(read: dict[str, Any]) -> None:
    for n, ident in enumerate(IDS):
        messages = read[thread_uri(ident, "messages")]
        assert [m["id"] for m in messages] == [f"m{n}"], (ident, messages)
        assert messages[0]["parts"][0]["text"] == f"message {n} of {ident}"
        threads = read[resource_uri(ident, "threads")]
        assert [t["id"] for t in threads] == [ident], (ident, threads)
        assert read[thread_uri(ident, "status")]["unobserved_messages"] == 1


async def test_every_resource_reads_every_id(make_server):
    async with connect(make_server()) as client:
        await store_one_thread_per_id(client)
        check(await read_everything(client))


@pytest.mark.slow
async def test_every_resource_reads_every_id_over_stdio(tmp_path):
    params = StdioServerParameters(
        command=PYTHON,
        args=["-m", "om_mcp", "serve", "--db", str(tmp_path / "om.db")],
        cwd=str(REPO),
        env=clean_env(tmp_path),
    )
    async with Client(params) as client:
        await store_one_thread_per_id(client)
        check(await read_everything(client))


async def test_updates_are_published_under_the_encoded_uri(make_server):
    """A subscription to the URI a client builds hears the change (either hex case)."""
    async with connect(make_server()) as client:
        await ok(client, "append_messages", thread_id="/home/me/project", messages=[{"role": "user", "content": "hi"}])
        wanted = thread_uri("/home/me/project", "messages")
        asked = wanted.replace("%2F", "%2f")
        async with client.listen(resource_subscriptions=[asked]) as stream:
            assert stream.honored.resource_subscriptions == [wanted]
            await ok(
                client, "append_messages", thread_id="/home/me/project", messages=[{"role": "user", "content": "again"}]
            )
            with anyio.fail_after(scaled(30)):  # a safety net: the condition is hearing it
                async for event in stream:
                    if event.uri == wanted:
                        break
