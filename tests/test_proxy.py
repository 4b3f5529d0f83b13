"""Behind a tunnel or a reverse proxy (`server/http/proxy.py`): X-Forwarded-* believed only from a
configured proxy, and the Host checked against `server.public_url`."""

from __future__ import annotations

from typing import Any

import pytest

from om_mcp.config import Config
from om_mcp.server.http.proxy import Forwarded
from om_mcp.server.http.run import bind_refusal

pytestmark = pytest.mark.anyio

PUBLIC = "https://memory.example.com"


async def seen(config: Config, peer: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """What the app behind `Forwarded` sees of one request from `peer` (status, its scope)."""
    got: dict[str, Any] = {}
    statuses: list[int] = []

    async def app(scope, receive, send) -> None:
        got.update(client=scope["client"][0], scheme=scope["scheme"], headers=dict(scope["headers"]))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/mcp",
        "scheme": "http",
        "client": (peer, 50000),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    await Forwarded(app, config)(scope, receive, send)
    return statuses[0], {**got, "headers": {k.decode(): v.decode() for k, v in got.get("headers", {}).items()}}


def config(**http: Any) -> Config:
    return Config.model_validate({"server": {"public_url": PUBLIC, "http": http, "auth": {"mode": "none"}}})


FORWARDED = {"Host": "127.0.0.1:8765", "X-Forwarded-For": "203.0.113.7, 10.0.0.2", "X-Forwarded-Proto": "https"}


async def test_forwarded_headers_are_believed_only_from_a_configured_proxy():
    trusting = config(trusted_proxies=["127.0.0.1", "10.0.0.0/8"])
    status, scope = await seen(trusting, "127.0.0.1", {**FORWARDED, "X-Forwarded-Host": "memory.example.com"})
    assert status == 200
    assert scope["client"] == "203.0.113.7"  # the rightmost address no proxy of ours added
    assert scope["scheme"] == "https" and scope["headers"]["host"] == "memory.example.com"
    assert "x-forwarded-for" not in scope["headers"]

    # The same headers from anyone else are dropped: the limits count the real peer.
    status, scope = await seen(config(), "127.0.0.1", {**FORWARDED, "X-Forwarded-Host": "memory.example.com"})
    assert status == 200 and scope["client"] == "127.0.0.1" and scope["scheme"] == "http"
    assert scope["headers"]["host"] == "127.0.0.1:8765" and "x-forwarded-for" not in scope["headers"]
    status, scope = await seen(trusting, "198.51.100.1", {**FORWARDED, "Host": "memory.example.com"})
    assert scope["client"] == "198.51.100.1"


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("memory.example.com", 200),
        ("MEMORY.example.com", 200),
        ("127.0.0.1:8765", 200),  # the machine itself: health checks, om-mcp setup's own check
        ("localhost", 200),
        ("attacker.example", 421),  # a DNS-rebinding page, or a name the tokens were not issued for
        ("memory.example.com.attacker.example", 421),
    ],
)
async def test_the_host_is_checked_against_the_public_url(host, status):
    assert (await seen(config(), "127.0.0.1", {"Host": host}))[0] == status
    # A proxy of ours cannot forward a name we do not answer to either.
    forwarded = {"Host": "127.0.0.1", "X-Forwarded-Host": host}
    assert (await seen(config(trusted_proxies=["127.0.0.1"]), "127.0.0.1", forwarded))[0] == status


def test_a_public_url_without_authentication_is_refused_even_on_loopback():
    """A tunnel (cloudflared, Tailscale Funnel) delivers every request from 127.0.0.1."""
    refusal = bind_refusal(config())
    assert refusal is not None and "tunnel" in refusal and "--oauth" in refusal
    assert bind_refusal(config(), insecure=True) is None
    local = Config.model_validate({"server": {"public_url": "http://127.0.0.1:8765"}})
    assert bind_refusal(local) is None
    oauth = Config.model_validate({"server": {"public_url": PUBLIC, "oauth": {"enabled": True}}})
    assert bind_refusal(oauth) is None


def test_trusted_proxies_must_be_addresses():
    with pytest.raises(ValueError, match="not an address or network"):
        config(trusted_proxies=["proxy.internal"])
