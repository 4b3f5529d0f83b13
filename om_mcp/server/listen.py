"""`subscriptions/listen` scoped to the caller's token.

The SDK's listen handler honors every URI asked for, so a token bound to one resource
could hear when another resource's threads change (URIs only, no content, but which
threads exist and when they are busy is already more than it may know). Here the URIs
are checked like a `resources/read` before the stream opens: a resource the token may
not use, a thread of such a resource, a thread that does not exist (yet) and a URI that
is not one of ours are left out of the honored set, which the acknowledgement tells the
client. Without a token (stdio, HTTP without auth) everything is honored, as before.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import ListenHandler, SubscriptionBus
from mcp_types import SubscriptionsListenRequestParams, SubscriptionsListenResult

from om_mcp.server import sdk, uris
from om_mcp.server.access import may_hear

log = logging.getLogger(__name__)


class ScopedListenHandler(ListenHandler):
    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        asked = params.notifications.resource_subscriptions or []
        if asked and any(uris.canonical(uri) != uri for uri in asked):
            # Updates are published as we write URIs; a subscription matches them exactly.
            asked = list(dict.fromkeys(uris.canonical(uri) for uri in asked))
            notifications = params.notifications.model_copy(update={"resource_subscriptions": asked})
            params = params.model_copy(update={"notifications": notifications})
        if asked:
            memory = await ctx.lifespan_context.ready()  # narrowed to the caller's access
            kept = [uri for uri in asked if await may_hear(memory, uri)]
            if len(kept) < len(asked):
                log.debug(
                    "subscriptions/listen: %d of %d URIs not allowed for this token", len(asked) - len(kept), len(asked)
                )
                notifications = params.notifications.model_copy(update={"resource_subscriptions": kept or None})
                params = params.model_copy(update={"notifications": notifications})
        return await super().__call__(ctx, params)


def install_scoped_listen(server: MCPServer, bus: SubscriptionBus) -> None:
    """Serve `subscriptions/listen` with the token check in front of the SDK's handler."""
    sdk.add_request_handler(server, "subscriptions/listen", SubscriptionsListenRequestParams, ScopedListenHandler(bus))
