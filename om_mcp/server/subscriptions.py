"""`resources/subscribe` for clients of the handshake era (2025-11-25 and before).

MCPServer has no handler for it, so such clients could not subscribe and were sent
every update unasked. The URIs a client subscribes to are kept on its connection, the
session is handed to the notifier (`watch`), and only those URIs are pushed to it, by
requests and background cycles alike. (2026-07-28 clients use `subscriptions/listen`.)

With a bearer token, a URI the token may not read is refused as `resources/read` refuses
it (`access.subscription_refusal`, handed in by the app: access reaches the notifier
through `live`), and nothing is kept: a token hears only its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

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


def install_subscriptions(
    server: MCPServer, watch: Callable[[Any], None], refusal: Callable[[Any, str], Awaitable[str | None]]
) -> None:
    """Answer subscribe/unsubscribe (which also advertises `resources.subscribe`); `watch` gets the
    connection of each subscription (the SDK makes a session per request; the connection lasts), so
    changes made outside its requests reach it too. `refusal(app, uri)`: why the caller may not
    hear of `uri`, or None."""

    async def subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        uri = canonical(str(params.uri))
        refused = await refusal(ctx.lifespan_context, uri)
        if refused is not None:
            raise MCPError(INVALID_PARAMS, refused, data={"uri": str(params.uri)})
        _subscriptions(ctx).add(uri)
        connection = sdk.connection_of(ctx.session)
        if connection is not None:
            watch(connection)
        return EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        _subscriptions(ctx).discard(canonical(str(params.uri)))
        return EmptyResult()

    sdk.add_request_handler(server, "resources/subscribe", SubscribeRequestParams, subscribe)
    sdk.add_request_handler(server, "resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
