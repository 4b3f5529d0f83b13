"""Telling clients what changed: resource-updated notifications for every resource an
operation or a background cycle touches (OM-09, EV-14), and the request's lifecycle
events as log notifications. Best effort: the events resource keeps everything."""

from __future__ import annotations

import logging
import warnings
from typing import Any, Iterable

from mcp.server.mcpserver import Context
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated

from om_mcp.server.log_level import client_wants_log
from om_mcp.server.subscriptions import subscribed

log = logging.getLogger(__name__)


def thread_uris(thread_id: str) -> list[str]:
    base = f"om://threads/{thread_id}"
    return [f"{base}/status", f"{base}/observations", f"{base}/events", f"{base}/messages"]


def event_uris(event: dict[str, Any]) -> list[str]:
    """The resources a lifecycle event changes."""
    uris = []
    if event.get("thread_id"):
        uris += thread_uris(event["thread_id"])
    if event.get("resource_id"):
        uris.append(f"om://resources/{event['resource_id']}/observations")
    if event.get("type") == "data-om-working-memory-update":
        uris += working_memory_uris(event.get("thread_id"), event.get("resource_id"))
    if event.get("type") == "data-om-thread-update" and event.get("resource_id"):
        uris.append(f"om://resources/{event['resource_id']}/threads")
    return uris


def working_memory_uris(thread_id: str | None, resource_id: str | None) -> list[str]:
    uris = [f"om://threads/{thread_id}/working-memory"] if thread_id else []
    return uris + ([f"om://resources/{resource_id}/working-memory"] if resource_id else [])


class Notifier:
    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()

    async def publish(self, uris: Iterable[str], ctx: Context | None = None, bus: bool = True) -> None:
        for uri in dict.fromkeys(uris):
            # 2026-07-28 clients listen on the bus; legacy sessions get a push.
            if bus:
                await self.bus.publish(ResourceUpdated(uri=uri))
            if ctx is not None and subscribed(ctx, uri):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        await ctx.session.send_resource_updated(uri)
                except Exception as error:  # noqa: BLE001 - a notification is a courtesy
                    log.debug("resource update not sent: %s", error)

    async def on_event(self, event: dict[str, Any]) -> None:
        """Background cycles' events reach `subscriptions/listen` streams."""
        await self.publish(event_uris(event))

    async def events(self, ctx: Context, events: list[dict[str, Any]]) -> None:
        for event in events if client_wants_log(ctx, "info") else ():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # logging is deprecated in 2026-07-28, still useful before
                    await ctx.log("info", event, logger_name="om-mcp.events")
            except Exception as error:  # noqa: BLE001
                log.debug("log notification not sent: %s", error)
        # The bus already heard these from the engine's listener.
        await self.publish([u for e in events for u in event_uris(e)], ctx, bus=False)
