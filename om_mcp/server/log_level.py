"""`logging/setLevel` for clients of the handshake era (2025-11-25 and before).

MCPServer registers no handler for it, so such clients get -32601 although the server
sends them log notifications. The level a client sets is kept on its connection and
`client_wants_log` tells the tool layer whether a notification at some level is wanted.
At 2026-07-28 the method does not exist; the SDK filters per request from `_meta`.
"""

from __future__ import annotations

from typing import Any, get_args

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import EmptyResult, LoggingLevel, SetLevelRequestParams

from om_mcp.server import sdk

LEVELS: tuple[str, ...] = get_args(LoggingLevel)  # RFC 5424 order, least severe first
STATE_KEY = "om_mcp.log_level"


def _connection_state(request_context: ServerRequestContext[Any, Any]) -> dict[str, Any] | None:
    return sdk.connection_state(request_context.session)


async def _set_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
    state = _connection_state(ctx)
    if state is not None:
        state[STATE_KEY] = params.level
    return EmptyResult()


def install_log_level(server: MCPServer) -> None:
    """Answer `logging/setLevel` (which also advertises the logging capability)."""
    sdk.add_request_handler(server, "logging/setLevel", SetLevelRequestParams, _set_level)


def client_wants_log(ctx: Context, level: str) -> bool:
    """Whether the client asked for log notifications at `level` (True until it sets one)."""
    try:
        state = _connection_state(ctx.request_context)
    except ValueError:  # no request context (called outside a request)
        return True
    wanted = (state or {}).get(STATE_KEY)
    return wanted is None or LEVELS.index(level) >= LEVELS.index(wanted)
