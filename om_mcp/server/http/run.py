"""Starting the HTTP server: the bind policy and uvicorn."""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import urlsplit

import anyio
from mcp.server.mcpserver import MCPServer

from om_mcp.config import Config
from om_mcp.server.http.app import build_http_app, is_loopback, resource_url, transport_security
from om_mcp.server.http.connections import RepeatFilter, calm_accept_failures, guarded_protocol

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 5  # open SSE streams are cut after this on Ctrl-C
WILDCARDS = ("0.0.0.0", "::", "")


def bind_refusal(config: Config, insecure: bool = False) -> str | None:
    """Why serving HTTP as configured is refused (one line saying what to do), or None."""
    host = config.server.host
    public = config.server.public_url
    facing = not is_loopback(host) or (public is not None and not is_loopback(urlsplit(public).hostname or ""))
    if insecure or not facing or config.server.auth.mode == "bearer":
        return None
    if is_loopback(host):
        return (
            f"refusing to serve {public} (server.public_url) without authentication: a tunnel or a proxy makes"
            " every request look local; run om-mcp serve --oauth, or create a token (om-mcp token create"
            " --resource NAME), or pass --insecure"
        )
    return (
        f"refusing to serve HTTP on {host} without authentication (anyone who reaches it could read and change"
        " every memory): create a token with `om-mcp token create --resource NAME` and add it to [server.auth],"
        " or set OM_HTTP_TOKEN, or bind 127.0.0.1, or pass --insecure"
    )


def describe(config: Config) -> str:
    """One log line saying how the HTTP server is protected."""
    server = config.server
    auth = server.auth
    if auth.mode == "bearer":
        ways = [f"bearer tokens ({', '.join(t.name or t.hash[7:19] for t in auth.tokens)})"] if auth.tokens else []
        if server.oauth.enabled:
            ways.append(f"OAuth, issuer {server.public_url} (om-mcp connect prints a consent code)")
        if server.oauth.issuer:
            ways.append(f"JWTs of {server.oauth.issuer} (claim {server.oauth.claim!r})")
        who = " and ".join(ways)
    else:
        who = "no authentication"
    security = transport_security(config)
    hosts = ", ".join(security.allowed_hosts) if security.enable_dns_rebinding_protection else "off (bearer auth)"
    per = "token" if auth.mode == "bearer" else None if is_loopback(server.host) else "client address"
    limit = f"{server.http.rate_limit_per_minute}/min per {per}" if server.http.rate_limit_per_minute and per else "off"
    http = server.http
    bearer, local = auth.mode == "bearer", is_loopback(server.host) and auth.mode != "bearer"
    per_token = f", {http.max_sessions_per_token} per token" if bearer else ""
    if not local and not bearer and http.max_sessions_per_address:
        per_token += f", {http.max_sessions_per_address} per address"
    shares = f", {http.max_connections_per_token} per token" if bearer else ""
    if not local and http.max_connections_per_address:
        shares += f", {http.max_connections_per_address} per address without a token"
    if bearer:
        shares += f", {http.unauthenticated_share:.0%} for all without a token"
    return (
        f"serving streamable HTTP on http://{server.host}:{server.port}{server.path}; {who};"
        f" Host check: {hosts}; sessions: at most {http.max_sessions}{per_token}, idle end after"
        f" {http.session_idle_seconds:g} s; rate limit: {limit}; connections: at most {http.max_connections}{shares}"
        f" (idle ones closed first), {http.header_timeout_seconds:g} s for a request head,"
        f" {http.idle_timeout_seconds:g} s idle"
    )


def status_page_url(config: Config) -> str:
    """Where a browser opens the status page: the public URL's root when one is set, else the bind
    address (a wildcard bind is reached on loopback from this machine)."""
    server = config.server
    if server.public_url:
        parts = urlsplit(server.public_url)
        return f"{parts.scheme}://{parts.netloc}/ui"
    host = "127.0.0.1" if server.host in WILDCARDS else server.host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{server.port}/ui"


def uvicorn_config(app: Any, config: Config, **options: Any) -> Any:
    """uvicorn as om-mcp runs it: deadlines on what clients send, and the app's connection slots
    (`slots.py`, which keep max_connections fairly; uvicorn's own limit, which refuses every request
    once that many connections are open, idle or not, is not used)."""
    import uvicorn

    http = config.server.http
    slots = getattr(app, "slots", None)
    settings: dict[str, Any] = {
        "host": config.server.host,
        "port": config.server.port,
        "log_config": None,  # our logging: stderr, our format
        "log_level": config.log_level,
        "access_log": config.log_level == "debug",
        "timeout_graceful_shutdown": SHUTDOWN_GRACE_SECONDS,
        "server_header": False,
        "http": guarded_protocol(
            http.header_timeout_seconds, http.idle_timeout_seconds, slots, http.min_body_bytes_per_second
        ),
        "timeout_keep_alive": http.idle_timeout_seconds,
        "limit_concurrency": None if slots is not None else http.max_connections,
        **options,
    }
    return uvicorn.Config(app, **settings)


def calm_logs() -> None:
    """At the descriptor limit or past max_connections: one line a minute, not one a request."""
    calm_accept_failures(asyncio.get_running_loop())
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, RepeatFilter) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(RepeatFilter())


async def serve_http(server: MCPServer, config: Config) -> None:
    """Serve until cancelled or a signal (uvicorn's own handling: graceful, then cut)."""
    import uvicorn

    log.info("%s", describe(config))
    token = "#token=<a bearer token> (a token bound to resources shows only theirs)"
    log.info("status page: %s%s", status_page_url(config), token if config.server.auth.mode == "bearer" else "")
    if config.server.auth.mode != "bearer" and not is_loopback(config.server.host):
        log.warning("--insecure: anyone who can reach %s may read and change every memory", config.server.host)
    public = config.server.auth.resource_url or config.server.public_url
    if config.server.auth.mode == "bearer" and not public and config.server.host in WILDCARDS:
        log.warning(
            "the OAuth metadata names %s (the bind address): set --public-url (server.public_url) to the URL"
            " clients use",
            resource_url(config),
        )
    calm_logs()
    await uvicorn.Server(uvicorn_config(build_http_app(server, config), config)).serve()


def run_http(server: MCPServer, config: Config) -> int:
    """Serve HTTP until Ctrl-C; returns the exit code (the caller checked bind_refusal)."""
    try:
        anyio.run(serve_http, server, config)
    except KeyboardInterrupt:  # uvicorn re-raises the signal it caught, once it has shut down
        return 130
    return 0
