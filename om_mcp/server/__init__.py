"""A thin MCP adapter over the engine."""

from om_mcp.server.app import build_server

__all__ = ["build_server"]
