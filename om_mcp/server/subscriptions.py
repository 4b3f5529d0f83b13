"""`resources/subscribe` for clients of the handshake era (2025-11-25 and before).

MCPServer has no handler for it, so such clients could not subscribe and were sent
every update unasked. The URIs a client subscribes to are kept on its connection,
and only those are pushed to it. (2026-07-28 clients use `subscriptions/listen`.)
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from om_mcp.server.log_level import _connection_state
from om_mcp.server.uris import canonical

STATE_KEY = "om_mcp.subscriptions"


def _subscriptions(ctx: ServerRequestContext[Any, Any]) -> set[str]:
    state = _connection_state(ctx)
    if state is None:
        return set()
    return state.setdefault(STATE_KEY, set())


async def _subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
    _subscriptions(ctx).add(canonical(str(params.uri)))
    return EmptyResult()


async def _unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
    _subscriptions(ctx).discard(canonical(str(params.uri)))
    return EmptyResult()


def install_subscriptions(server: MCPServer) -> None:
    """Answer subscribe/unsubscribe (which also advertises `resources.subscribe`)."""
    server._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, _subscribe)
    server._lowlevel_server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, _unsubscribe)


def subscribed(ctx: Context, uri: str) -> bool:
    try:
        return uri in _subscriptions(ctx.request_context)
    except ValueError:  # no request context
        return False
