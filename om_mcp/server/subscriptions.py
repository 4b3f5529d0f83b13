"""`resources/subscribe` for clients of the handshake era (2025-11-25 and before).

MCPServer has no handler for it, so such clients could not subscribe and were sent
every update unasked. The URIs a client subscribes to are kept on its connection, the
session is handed to the notifier (`watch`), and only those URIs are pushed to it, by
requests and background cycles alike. (2026-07-28 clients use `subscriptions/listen`.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from om_mcp.server import sdk
from om_mcp.server.log_level import _connection_state
from om_mcp.server.uris import canonical

STATE_KEY = "om_mcp.subscriptions"


def _subscriptions(ctx: ServerRequestContext[Any, Any]) -> set[str]:
    state = _connection_state(ctx)
    if state is None:
        return set()
    return state.setdefault(STATE_KEY, set())


def subscriptions_of(connection: Any) -> set[str]:
    """The URIs a legacy session subscribed to (kept on its connection)."""
    return (getattr(connection, "state", None) or {}).get(STATE_KEY, set())


def install_subscriptions(server: MCPServer, watch: Callable[[Any], None]) -> None:
    """Answer subscribe/unsubscribe (which also advertises `resources.subscribe`); `watch` gets the
    connection of each subscription (the SDK makes a session per request; the connection lasts), so
    changes made outside its requests reach it too."""

    async def subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        _subscriptions(ctx).add(canonical(str(params.uri)))
        connection = sdk.connection_of(ctx.session)
        if connection is not None:
            watch(connection)
        return EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        _subscriptions(ctx).discard(canonical(str(params.uri)))
        return EmptyResult()

    sdk.add_request_handler(server, "resources/subscribe", SubscribeRequestParams, subscribe)
    sdk.add_request_handler(server, "resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
