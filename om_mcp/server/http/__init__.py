"""Streamable HTTP that can face a network: bearer tokens bound to resources,
Host/Origin checks, owned and capped sessions, a rate limit per caller."""

from om_mcp.server.http.app import build_http_app
from om_mcp.server.http.auth import (
    ResourceNotAllowed, allowed_resources, check_resource, check_thread, default_resource,
)
from om_mcp.server.http.run import bind_refusal, run_http, serve_http

__all__ = [
    "ResourceNotAllowed", "allowed_resources", "bind_refusal", "build_http_app", "check_resource", "check_thread",
    "default_resource", "run_http", "serve_http",
]
