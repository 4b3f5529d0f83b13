"""Telling clients what changed: resource-updated notifications for every resource an
operation or a background cycle touches, and the request's lifecycle
events as log notifications. Best effort: the events resource keeps everything.

Both eras hear the same changes, whoever caused them: 2026-07-28 clients through their
`subscriptions/listen` streams (the bus), legacy sessions (2025-11-25) through
`notifications/resources/updated` for the URIs they subscribed to, pushed on their
connection even when the change came from a background cycle and no request of theirs
is running. With several server processes on one PostgreSQL database (replicas behind a
load balancer), what one process publishes also goes to the others through the store
(LISTEN/NOTIFY), so a client subscribed on any replica hears of a change made through
any other. On SQLite the relay does nothing.
"""

from __future__ import annotations

import logging
import warnings
import weakref
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated

from om_mcp.server.log_level import client_wants_log
from om_mcp.server.subscriptions import subscriptions_of
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
        self.memory: Any = None  # the memory whose database relays to the other processes on it
        # The connections of legacy sessions that subscribed to something (their URIs live on them).
        self.connections: weakref.WeakSet[Any] = weakref.WeakSet()

    def watch(self, connection: Any) -> None:
        """A legacy session subscribed: push its connection the updates of its URIs from now on."""
        self.connections.add(connection)

    @asynccontextmanager
    async def relaying(self, memory: Any) -> AsyncIterator[None]:
        """While the block runs, share published URIs with the other processes on `memory`'s database."""
        stop = await memory.listen(self.on_relayed)
        self.memory = memory
        try:
            yield
        finally:
            self.memory = None
            await stop()

    async def on_relayed(self, message: dict[str, Any]) -> None:
        """Another process published these: local subscribers hear them too."""
        await self._deliver([uri for uri in message.get("uris", []) if isinstance(uri, str)])

    async def _relay(self, uris: list[str]) -> None:
        batch: list[str] = []
        for uri in [*uris, None]:
            if uri is None or batch and sum(len(u) + 3 for u in batch) + len(uri) > RELAY_BYTES:
                try:
                    await self.memory.broadcast({"uris": batch})
                except Exception as error:  # noqa: BLE001 - a notification is a courtesy
                    log.debug("resource update not relayed: %s", error)
                batch = []
            if uri is not None:
                batch.append(uri)

    async def publish(self, uris: Iterable[str], ctx: Context | None = None) -> None:
        """Tell every subscriber, in both eras and on every replica, that these resources changed.
        (`ctx`: the request that changed them; its session hears them as any other does.)"""
        uris = list(dict.fromkeys(uris))
        if uris and self.memory is not None and self.memory.relays:
            await self._relay(uris)
        await self._deliver(uris)

    async def _deliver(self, uris: list[str]) -> None:
        for uri in uris:
            await self.bus.publish(ResourceUpdated(uri=uri))
        for connection in list(self.connections):
            wanted = subscriptions_of(connection)
            for uri in (u for u in uris if u in wanted):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # resources/updated is deprecated in 2026-07-28
                        await connection.send_resource_updated(uri)  # outside any request: its own channel
                except Exception as error:  # noqa: BLE001 - a closed session, say: a courtesy, not an error
                    log.debug("resource update not sent: %s", error)
                    self.connections.discard(connection)
                    break

    async def on_event(self, event: dict[str, Any]) -> None:
        """Every lifecycle event (a request's or a background cycle's) tells of the resources it changed."""
        await self.publish(event_uris(event))

    async def events(self, ctx: Context, events: list[dict[str, Any]]) -> None:
        """A request's events as log notifications to its client (their resources were told already)."""
        for event in events if client_wants_log(ctx, "info") else ():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # logging is deprecated in 2026-07-28, still useful before
                    await ctx.log("info", event, logger_name="om-mcp.events")
            except Exception as error:  # noqa: BLE001
                log.debug("log notification not sent: %s", error)
