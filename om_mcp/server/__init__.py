"""The MCP server: a thin adapter over `om_mcp.engine.Memory`.

`build_server` loads on first use, so `om_mcp.server.sdk` can prepare the SDK's import first."""

from typing import Any

__all__ = ["build_server"]


def __getattr__(name: str) -> Any:
    if name == "build_server":
        from om_mcp.server.app import build_server

        return build_server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
