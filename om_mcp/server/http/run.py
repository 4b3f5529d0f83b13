"""Starting the HTTP server: the bind policy and uvicorn."""

from __future__ import annotations

import logging

import anyio
from mcp.server.mcpserver import MCPServer

from om_mcp.config import Config
from om_mcp.server.http.app import build_http_app, is_loopback, transport_security

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 5  # open SSE streams are cut after this on Ctrl-C


def bind_refusal(config: Config, insecure: bool = False) -> str | None:
    """Why serving HTTP as configured is refused (one line saying what to do), or None."""
    host = config.server.host
    if insecure or is_loopback(host) or config.server.auth.mode == "bearer":
        return None
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
        names = ", ".join(t.name or t.hash[7:19] for t in auth.tokens)
        who = f"bearer tokens ({names})"
    else:
        who = "no authentication"
    security = transport_security(config)
    hosts = ", ".join(security.allowed_hosts) if security.enable_dns_rebinding_protection else "off (bearer auth)"
    per = "token" if auth.mode == "bearer" else None if is_loopback(server.host) else "client address"
    limit = f"{server.http.rate_limit_per_minute}/min per {per}" if server.http.rate_limit_per_minute and per else "off"
    return (
        f"serving streamable HTTP on http://{server.host}:{server.port}{server.path}; {who};"
        f" Host check: {hosts}; sessions: at most {server.http.max_sessions}, idle end after"
        f" {server.http.session_idle_seconds:g} s; rate limit: {limit}"
    )


async def serve_http(server: MCPServer, config: Config) -> None:
    """Serve until cancelled or a signal (uvicorn's own handling: graceful, then cut)."""
    import uvicorn

    log.info("%s", describe(config))
    if config.server.auth.mode != "bearer" and not is_loopback(config.server.host):
        log.warning("--insecure: anyone who can reach %s may read and change every memory", config.server.host)
    uvicorn_config = uvicorn.Config(
        build_http_app(server, config),
        host=config.server.host,
        port=config.server.port,
        log_config=None,  # our logging: stderr, our format
        log_level=config.log_level,
        access_log=config.log_level == "debug",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        server_header=False,
    )
    await uvicorn.Server(uvicorn_config).serve()


def run_http(server: MCPServer, config: Config) -> int:
    """Serve HTTP until Ctrl-C; returns the exit code (the caller checked bind_refusal)."""
    try:
        anyio.run(serve_http, server, config)
    except KeyboardInterrupt:  # uvicorn re-raises the signal it caught, once it has shut down
        return 130
    return 0
