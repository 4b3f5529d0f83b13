"""The MCP server: a thin adapter over `om_mcp.engine.Memory`.

`build_server` loads on first use, so `om_mcp.server.sdk` can prepare the SDK's import first."""

from typing import TYPE_CHECKING

from om_mcp.lazy import face

__all__ = ["build_server"]
__getattr__ = face(__name__, {"build_server": "app"})

if TYPE_CHECKING:
    from om_mcp.server.app import build_server
