"""Telling clients what changed: resource-updated notifications for every resource an
operation or a background cycle touches (OM-09, EV-14), and the request's lifecycle
events as log notifications. Best effort: the events resource keeps everything.

With several server processes on one PostgreSQL database (replicas behind a load
balancer), what one process publishes also goes to the others through the store
(LISTEN/NOTIFY), so a client subscribed on any replica hears of a change made
through any other. On SQLite the relay does nothing.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated

from om_mcp.server.log_level import client_wants_log
from om_mcp.server.subscriptions import subscribed
from om_mcp.server.uris import resource_uri, thread_uri

log = logging.getLogger(__name__)


def thread_uris(thread_id: str) -> list[str]:
    return [thread_uri(thread_id, view) for view in ("status", "observations", "events", "messages")]


def event_uris(event: dict[str, Any]) -> list[str]:
    """The resources a lifecycle event changes."""
    uris = []
    if event.get("thread_id"):
        uris += thread_uris(event["thread_id"])
    if event.get("resource_id"):
        uris.append(resource_uri(event["resource_id"], "observations"))
    if event.get("type") == "data-om-working-memory-update":
        uris += working_memory_uris(event.get("thread_id"), event.get("resource_id"))
    if event.get("type") == "data-om-thread-update" and event.get("resource_id"):
        uris.append(resource_uri(event["resource_id"], "threads"))
    return uris


def working_memory_uris(thread_id: str | None, resource_id: str | None) -> list[str]:
    uris = [thread_uri(thread_id, "working-memory")] if thread_id else []
    return uris + ([resource_uri(resource_id, "working-memory")] if resource_id else [])


RELAY_BYTES = 6000  # URIs per notification, under PostgreSQL's 8000-byte payload limit


class Notifier:
    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.store: Any = None  # the store that relays to the other processes on the database

    @asynccontextmanager
    async def relaying(self, store: Any) -> AsyncIterator[None]:
        """While the block runs, share published URIs with the other processes on `store`'s database."""
        stop = await store.listen(self.on_relayed)
        self.store = store
        try:
            yield
        finally:
            self.store = None
            await stop()

    async def on_relayed(self, message: dict[str, Any]) -> None:
        """Another process published these: local subscribers hear them too."""
        for uri in message.get("uris", []):
            if isinstance(uri, str):
                await self.bus.publish(ResourceUpdated(uri=uri))

    async def _relay(self, uris: list[str]) -> None:
        batch: list[str] = []
        for uri in [*uris, None]:
            if uri is None or batch and sum(len(u) + 3 for u in batch) + len(uri) > RELAY_BYTES:
                try:
                    await self.store.broadcast({"uris": batch})
                except Exception as error:  # noqa: BLE001 - a notification is a courtesy
                    log.debug("resource update not relayed: %s", error)
                batch = []
            if uri is not None:
                batch.append(uri)

    async def publish(self, uris: Iterable[str], ctx: Context | None = None, bus: bool = True) -> None:
        uris = list(dict.fromkeys(uris))
        if bus and uris and self.store is not None and self.store.backend != "sqlite":
            await self._relay(uris)
        for uri in uris:
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
