"""Streamable HTTP that can face a network: bearer tokens bound to resources,
Host/Origin checks, owned and capped sessions, a rate limit per caller; and the
status page (`ui/`).

Names load on first use, so the tool layer's `from om_mcp.server.http.auth import ...`
does not pull the HTTP app into a stdio server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from om_mcp.lazy import face

_HOMES = {
    "build_http_app": "app",
    "access_of": "auth",
    "caller_access": "auth",
    "bind_refusal": "run",
    "run_http": "run",
    "serve_http": "run",
}
__all__ = ["access_of", "bind_refusal", "build_http_app", "caller_access", "run_http", "serve_http"]  # = _HOMES
__getattr__ = face(__name__, _HOMES)

if TYPE_CHECKING:
    from om_mcp.server.http.app import build_http_app
    from om_mcp.server.http.auth import access_of, caller_access
    from om_mcp.server.http.run import bind_refusal, run_http, serve_http
