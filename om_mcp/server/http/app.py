"""The ASGI app: the SDK's streamable HTTP app behind authentication, rate limits,
fair slots, Host/Origin checks and the RFC 9728 protected-resource metadata.

Request order: bearer token verified (SDK middleware, sets `get_access_token()`) ->
`Gate` (metadata document; 401 pointing at it, or 429 for an address, or all addresses
together, that keep failing; the connection's slot claimed for the token (`slots.py`,
503 when the token's connections are all busy); 429 over a token's rate; 413 for a body
over `max_body_bytes` on any route; room made for a new legacy session (`sessions.py`)) ->
the status page's paths (`ui/mount.py`) or the SDK app (Host/Origin checks, session
ownership, idle expiry, both protocol eras).

The metadata and the 401 challenge name the configured `resource_url`, else the bind
address: never the request's Host header, which the client chooses.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import AnyHttpUrl
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from om_mcp.config import Config
from om_mcp.server.http.auth import TokenTable, Verifiers, bearer_required
from om_mcp.server.http.proxy import Forwarded
from om_mcp.server.http.ratelimit import RateLimiter
from om_mcp.server.http.sessions import SessionPool
from om_mcp.server.http.slots import SlotLimits, Slots
from om_mcp.server.http.ui.mount import WithStatusPage, is_public

if TYPE_CHECKING:
    from om_mcp.server.http.oauth import AuthorizationServer

log = logging.getLogger(__name__)

METADATA_PATH = "/.well-known/oauth-protected-resource"
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]"]
_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower().encode()
_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower().encode()


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def _with_ports(names: list[str]) -> list[str]:
    # The SDK matches a Host/Origin exactly or as "<base>:*"; a bare name means either.
    out: list[str] = []
    for name in names:
        out += [name] if name.endswith(":*") else [name, f"{name}:*"]
    return out


def transport_security(config: Config) -> TransportSecuritySettings:
    """Host/Origin checks (DNS rebinding). On whenever auth is off, whatever the bind
    address; with bearer auth on a public address they allow the configured names, or are
    off when none are configured (a rebinding page cannot send the bearer token)."""
    server = config.server
    bind = server.host
    hosts = _with_ports(LOOPBACK_HOSTS + server.http.allowed_hosts)
    origins = _with_ports([f"http://{h}" for h in LOOPBACK_HOSTS] + server.http.allowed_origins)
    if not is_loopback(bind) and bind not in ("0.0.0.0", "::", ""):
        name = f"[{bind}]" if ":" in bind else bind
        hosts += _with_ports([name])
        origins += _with_ports([f"http://{name}", f"https://{name}"])
    if server.public_url:  # the name clients use, through a tunnel or a proxy too
        public = urlsplit(server.public_url)
        hosts += _with_ports([public.netloc])
        origins += [f"{public.scheme}://{public.netloc}"]
    public_bearer = server.auth.mode == "bearer" and not is_loopback(bind)
    if public_bearer and not server.http.allowed_hosts and not server.public_url:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


class HttpApp:
    """The app uvicorn runs, and the connection slots its protocol shares with the `Gate`."""

    def __init__(self, app: ASGIApp, slots: Slots) -> None:
        self.app, self.slots = app, slots

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def build_http_app(server: MCPServer, config: Config) -> HttpApp:
    """The whole HTTP app for `server`, configured from `config.server`."""
    settings = config.server
    bearer = settings.auth.mode == "bearer"
    mcp_app = server.streamable_http_app(
        streamable_http_path=settings.path,
        max_request_body_size=settings.http.max_body_bytes,
        session_idle_timeout=settings.http.session_idle_seconds,
        max_sessions=settings.http.max_sessions,
        stateless_http=settings.http.stateless,
        transport_security=transport_security(config),
        host=settings.host,
    )
    limiter = RateLimiter(settings.http.rate_limit_per_minute) if settings.http.rate_limit_per_minute else None
    page = WithStatusPage(mcp_app, server, transport_security(config), settings.path)
    slots = Slots(SlotLimits.of(config, is_loopback(settings.host)))
    verifiers: list[TokenVerifier] = [TokenTable(settings.auth.tokens)]
    authorization = None
    if settings.oauth.enabled:
        from om_mcp.server.http.oauth import AuthorizationServer

        authorization = AuthorizationServer(server, config)
        verifiers.append(authorization.provider)
    if settings.oauth.issuer:
        from om_mcp.server.http.oauth.issuer import IssuerTokens

        verifiers.append(IssuerTokens(settings.oauth, resource_url(config)))
    app: ASGIApp = Gate(page, config, limiter, server.session_manager, slots, authorization)
    if bearer:
        app = AuthContextMiddleware(app)
        app = AuthenticationMiddleware(app, backend=BearerAuthBackend(Verifiers(*verifiers)))
    return HttpApp(Forwarded(app, config), slots)


def resource_url(config: Config) -> str:
    """The MCP endpoint's public URL: public_url + path, or resource_url, else the bind address."""
    server = config.server
    if server.public_url:
        return server.public_url + server.path
    if server.auth.resource_url:
        return server.auth.resource_url
    host = f"[{server.host}]" if ":" in server.host else server.host
    return f"http://{host}:{server.port}{server.path}"


class Gate:
    """Serves the metadata document, refuses unauthenticated and over-limit requests."""

    def __init__(
        self,
        app: ASGIApp,
        config: Config,
        limiter: RateLimiter | None,
        sessions: StreamableHTTPSessionManager | None = None,
        slots: Slots | None = None,
        authorization: AuthorizationServer | None = None,
    ) -> None:
        self.app = app
        self.config = config
        http = config.server.http
        self.bearer = config.server.auth.mode == "bearer"
        self.limiter = limiter
        self.loopback = is_loopback(config.server.host)
        failed, total = http.failed_auth_per_minute, http.failed_auth_total_per_minute
        self.failures = RateLimiter(failed) if failed and self.bearer else None
        self.all_failures = RateLimiter(total) if total and self.bearer else None
        self.pool = SessionPool(sessions, http.max_sessions) if sessions is not None and not http.stateless else None
        self.slots = slots
        self.resource_url = resource_url(config)
        self.authorization = authorization

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and self.bearer:
            with bearer_required():  # lasts from start-up to shut-down
                await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if self.bearer and (path == METADATA_PATH or path.startswith(METADATA_PATH + "/")):
            await self._metadata(scope, send)
            return
        if self.authorization is not None and path in self.authorization.paths:
            await self._authorization(path, scope, receive, send)
            return
        user = scope.get("user")
        page = is_public(path) and path != self.config.server.path  # never the MCP endpoint itself
        if self.bearer and not isinstance(user, AuthenticatedUser) and not page:
            if await self._failed(scope, send):
                return
            log.debug("401 for %s %s from %s", scope["method"], path, _client(scope))
            await RequireAuthMiddleware(self.app, [], self._metadata_url())(scope, receive, send)
            return
        if isinstance(user, AuthenticatedUser) and self.slots is not None:
            token = user.access_token
            refused = self.slots.claim(scope.get("client"), token.subject or token.client_id, token.client_id)
            if refused is not None:
                await _unavailable(send, refused, close=True)
                return
        key = self._limit_key(scope, user)
        if key is not None and self.limiter is not None:
            wait = self.limiter.take(key)
            if wait:
                await self._too_many(send, self.limiter.retry_after(wait), user)
                return
        limit = self.config.server.http.max_body_bytes
        if _declared_length(scope) > limit:
            await _too_large(send, limit)
            return
        if path != self.config.server.path:  # the SDK's own limit, the same number, guards the MCP path
            await BodyLimit(self.app, limit)(scope, receive, send)
        elif self.pool is not None and self._opens_session(scope):
            await self._open_session(scope, receive, send, user)
        else:
            await self.app(scope, receive, send)

    async def _authorization(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        """The authorization server's routes, which need no token: each request but the metadata
        document counts against the budgets of requests without one."""
        assert self.authorization is not None
        if not path.startswith("/.well-known/") and await self._failed(scope, send):
            return
        await BodyLimit(self.authorization.app, self.config.server.http.max_body_bytes)(scope, receive, send)

    async def _failed(self, scope: Scope, send: Send) -> bool:
        """One more request without a valid token: True when it was answered 429 (its address, or
        all addresses together, failed too often this minute)."""
        budgets = [
            (self.failures, _client(scope), "this address"),
            (self.all_failures, "all", "all addresses together"),
        ]
        for limiter, key, whose in budgets:
            wait = limiter.take(key) if limiter is not None else 0.0
            if limiter is not None and wait:
                await self._too_many(send, limiter.retry_after(wait), None, failed=whose)
                return True
        return False

    async def _open_session(self, scope: Scope, receive: Receive, send: Send, user: object) -> None:
        """A new legacy session, counted against its token (else its address: none on loopback without
        auth, where every client is the local user), room made by ending idle ones (`sessions.py`)."""
        assert self.pool is not None
        http = self.config.server.http
        owner: str | None = None
        cap: int | None = None
        option, who = "server.http.max_sessions", "this address"
        if isinstance(user, AuthenticatedUser):
            token = user.access_token
            owner, cap = f"token:{token.subject or token.client_id}", http.max_sessions_per_token
            option, who = "server.http.max_sessions_per_token", f"token {token.client_id!r}"
        elif not self.loopback and http.max_sessions_per_address:
            owner, cap, option = _client(scope), http.max_sessions_per_address, "server.http.max_sessions_per_address"
        refused = await self.pool.open(owner, cap, scope, receive, send, self.app)
        if refused is not None:
            await _unavailable(send, f"{who} {refused} ({option}): end one (DELETE) or retry when one is idle")

    def _opens_session(self, scope: Scope) -> bool:
        """Would the SDK open a legacy session for this request (no session id, a handshake-era version)?"""
        headers = dict(scope["headers"])
        version = headers.get(_VERSION_HEADER)
        if _SESSION_HEADER in headers:
            return False
        return version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS

    def _limit_key(self, scope: Scope, user: object) -> str | None:
        """A bucket per token; per client address on a public bind without auth; none on
        loopback without auth (one local user, whose hooks may burst)."""
        if isinstance(user, AuthenticatedUser):
            return f"token:{user.access_token.subject}"
        return None if self.loopback else _client(scope)

    def _metadata_url(self) -> AnyHttpUrl:
        return build_resource_metadata_url(AnyHttpUrl(self.resource_url))

    async def _metadata(self, scope: Scope, send: Send) -> None:
        if scope["method"] not in ("GET", "OPTIONS"):
            await _respond(send, 405, {"error": "method not allowed"}, [(b"allow", b"GET, OPTIONS")])
            return
        document = {"resource": self.resource_url, "bearer_methods_supported": ["header"], "resource_name": "om-mcp"}
        servers = authorization_servers(self.config)
        if servers:
            document["authorization_servers"] = servers
        await _respond(
            send,
            200,
            document,
            [
                (b"access-control-allow-origin", b"*"),
                (b"access-control-allow-methods", b"GET, OPTIONS"),
                (b"cache-control", b"public, max-age=3600"),
            ],
        )

    async def _too_many(self, send: Send, retry_after: int, user: object, failed: str | None = None) -> None:
        """429; `failed`: whose requests without a valid token went over their budget."""
        who = f"token {user.access_token.client_id!r}" if isinstance(user, AuthenticatedUser) else "this client"
        http = self.config.server.http
        limit = http.rate_limit_per_minute
        message = f"rate limit of {limit} requests per minute reached for {who}; retry after {retry_after} s"
        if failed:
            limit = http.failed_auth_per_minute if failed == "this address" else http.failed_auth_total_per_minute
            message = f"{limit} requests a minute without a valid token came from {failed}; retry after {retry_after} s"
        log.debug("429: %s", message)
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}
        await _respond(send, 429, body, [(b"retry-after", str(retry_after).encode())])


def authorization_servers(config: Config) -> list[str]:
    """The issuers the protected-resource metadata names: om-mcp itself (--oauth), the team's
    provider (--oauth-issuer), else those configured."""
    server = config.server
    if server.oauth.enabled and server.public_url:
        return [server.public_url]
    if server.oauth.issuer:
        return [server.oauth.issuer]
    return list(server.auth.authorization_servers)


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return f"address:{client[0]}" if client else "address:unknown"


def _declared_length(scope: Scope) -> int:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


async def _too_large(send: Send, limit: int) -> None:
    # The rest of the body is read and dropped as it comes (uvicorn, once the answer is complete):
    # closing now would reset the connection before the client reads why.
    message = f"request body over {limit} bytes (server.http.max_body_bytes)"
    await _respond(send, 413, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}, [])


async def _unavailable(send: Send, message: str, close: bool = False) -> None:
    log.debug("503: %s", message)
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": message}}
    await _respond(send, 503, body, [(b"retry-after", b"1"), *([_CLOSE] if close else [])])


class BodyLimit:
    """At most `limit` bytes of request body reach `app` (a body sent without a length, in chunks,
    is counted as it comes); more is answered 413. The status page's routes read whole bodies."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE") and _declared_length(scope) == 0:
            await self.app(scope, receive, send)
            return
        body, messages = 0, []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # gone before its body was whole (closed for room, say): nobody to answer
            messages.append(message)
            if message["type"] != "http.request":
                break
            body += len(message.get("body", b""))
            if body > self.limit:
                await _too_large(send, self.limit)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


_CLOSE = (b"connection", b"close")


async def _respond(send: Send, status: int, body: dict, headers: list[tuple[bytes, bytes]]) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": data})
