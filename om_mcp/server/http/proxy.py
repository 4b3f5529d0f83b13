"""Behind a tunnel or a reverse proxy: who the client is, and which name it asked for.

`Forwarded` is the app's outermost layer. From a proxy in `server.http.trusted_proxies` it
believes `X-Forwarded-For` (the client address the limits and slots count by: the rightmost
address no trusted proxy added), `X-Forwarded-Proto` and `X-Forwarded-Host` (the name the
client asked for); from anyone else it drops those headers, so nothing further in can be told
a lie. With `server.public_url` set, a request whose Host is neither the public name, a
loopback name nor one of `server.http.allowed_hosts` is refused (421): a DNS-rebinding page,
or a client that reached the server by a name its tokens were not issued for.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from om_mcp.config import Config, is_loopback_host

log = logging.getLogger(__name__)

FORWARDED = (b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host", b"forwarded")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Forwarded:
    """See the module docstring."""

    def __init__(self, app: ASGIApp, config: Config) -> None:
        self.app = app
        http = config.server.http
        self.trusted: list[Network] = [ipaddress.ip_network(n, strict=False) for n in http.trusted_proxies]
        public = config.server.public_url
        self.public = urlsplit(public) if public else None
        self.hosts = {h.lower() for h in http.allowed_hosts}
        if self.public is not None:
            self.hosts.add(self.public.netloc.lower())
            self.hosts.add((self.public.hostname or "").lower())

    def _trusts(self, address: str | None) -> bool:
        if not address or not self.trusted:
            return False
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.trusted)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = list(scope["headers"])
        client = scope.get("client")
        if self._trusts(client[0] if client else None):
            scope = self._believed(scope, headers)
        elif any(name in FORWARDED for name, _ in headers):
            scope = {**scope, "headers": [(n, v) for n, v in headers if n not in FORWARDED]}
        if self.public is not None and not self._host_allowed(scope):
            await _misdirected(send, self.public.netloc)
            return
        await self.app(scope, receive, send)

    def _believed(self, scope: Scope, headers: list[tuple[bytes, bytes]]) -> Scope:
        values = {name.decode(): value.decode("latin-1") for name, value in headers if name in FORWARDED}
        scope = dict(scope)
        chain = [a.strip() for a in values.get("x-forwarded-for", "").split(",") if a.strip()]
        while chain and self._trusts(chain[-1]):
            chain.pop()  # proxies of ours in front of ours
        if chain:
            scope["client"] = (chain[-1].strip("[]"), 0)
        proto = values.get("x-forwarded-proto", "").split(",")[0].strip().lower()
        if proto in ("http", "https"):
            scope["scheme"] = proto
        host = values.get("x-forwarded-host", "").split(",")[0].strip()
        kept = [(n, v) for n, v in headers if n not in FORWARDED and (not host or n != b"host")]
        if host:
            kept.append((b"host", host.encode("latin-1")))
        scope["headers"] = kept
        return scope

    def _host_allowed(self, scope: Scope) -> bool:
        host = next((v.decode("latin-1") for n, v in scope["headers"] if n == b"host"), "").lower()
        if not host or host in self.hosts:
            return True
        name = urlsplit(f"//{host}").hostname or ""
        return is_loopback_host(name) or name in self.hosts or f"{name}:*" in self.hosts


async def _misdirected(send: Send, public: str) -> None:
    body = json.dumps({"error": f"this server answers as {public} (server.public_url, server.http.allowed_hosts)"})
    data = body.encode()
    log.debug("421: a request for another host name")
    await send(
        {
            "type": "http.response.start",
            "status": 421,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": data})
