"""The status page on the HTTP transport, beside `/mcp`.

The page itself (`/`, `/ui`, `/ui/` and its two files) holds no data and is served to
anyone who reaches the server, so a browser can load it; the JSON under `/api/`
sits behind the same bearer auth as `/mcp` (the `Gate` lets only the page's
files through unauthenticated) and answers only for the token's resources. The
Host/Origin checks that guard `/mcp` against DNS rebinding guard every page path.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from om_mcp.server.http.ui.routes import ui_routes
from om_mcp.server.http.ui.source import MemorySource

PUBLIC = frozenset({"/", "/ui", "/ui/", "/ui/app.js", "/ui/style.css", "/ui/favicon.svg", "/favicon.ico"})


def is_public(path: str) -> bool:
    """The page's own files: no data in them, so no token needed."""
    return path in PUBLIC


class WithStatusPage:
    """Sends the page's paths to the status page, everything else to the MCP app."""

    def __init__(self, app: ASGIApp, server: MCPServer, security: TransportSecuritySettings, mcp_path: str) -> None:
        self.app = app
        self.server = server
        self.mcp_path = mcp_path
        self.security = TransportSecurityMiddleware(security)
        self.page = Starlette(routes=ui_routes(MemorySource(lambda: server.live.memory)))  # type: ignore[attr-defined]

    def _ours(self, path: str) -> bool:
        return path != self.mcp_path and (path in PUBLIC or path.startswith("/api/"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._ours(scope["path"]):
            await self.app(scope, receive, send)
            return
        refused = await self.security.validate_request(Request(scope, receive))
        live = getattr(self.server, "live", None)
        if refused is None and (live is None or not live.is_open) and not is_public(scope["path"]):
            refused = JSONResponse({"error": "the server is starting; retry in a moment"}, status_code=503)
        await (refused or self.page)(scope, receive, send)
