"""The MCP server: a thin adapter over `om_mcp.engine.Memory`."""

from om_mcp.server.app import build_server

__all__ = ["build_server"]
