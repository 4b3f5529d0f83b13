"""The resources: threads, messages, working memory, observations and their history,
events and status, all JSON. Ids in their URIs are percent-encoded (`uris.py`). Each reads
the engine narrowed to the caller's access (`App.ready`), whose refusals read as not found."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from om_mcp.engine import EngineError
from om_mcp.server.access import status_for_caller
from om_mcp.server.live import app_of
from om_mcp.server.uris import OPAQUE_IDS, Kind, template

if TYPE_CHECKING:
    from om_mcp.engine import Memory


async def _json(ctx: Context, read: Callable[[Memory], Awaitable[Any]]) -> str:
    try:
        data = await read(await app_of(ctx).ready())
    except EngineError as error:
        raise ResourceNotFoundError(str(error)) from None
    if isinstance(data, list):
        data = [d.model_dump(mode="json") if hasattr(d, "model_dump") else d for d in data]
    elif hasattr(data, "model_dump"):
        data = data.model_dump(mode="json", exclude_none=True)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


def register(server: MCPServer) -> None:
    def resource(kind: Kind, view: str, description: str):
        return server.resource(
            template(kind, view), mime_type="application/json", description=description, security=OPAQUE_IDS
        )

    @resource("resource", "threads", "The resource's threads, newest first.")
    async def resource_threads(resource_id: str, ctx: Context) -> str:
        return await _json(ctx, lambda m: m.threads(resource_id))

    @resource("resource", "working-memory", "Resource-scoped working memory.")
    async def resource_working_memory(resource_id: str, ctx: Context) -> str:

        async def read(m: Memory) -> dict[str, Any]:
            return {"resource_id": resource_id, "memory": await m.resource_working_memory(resource_id)}

        return await _json(ctx, read)

    @resource("resource", "observations", "The resource's shared observation log.")
    async def resource_observations(resource_id: str, ctx: Context) -> str:
        return await _json(ctx, lambda m: m.observations(resource_id=resource_id))

    @resource("resource", "observations/history", "Every generation of the resource's log.")
    async def resource_observation_history(resource_id: str, ctx: Context) -> str:
        return await _json(ctx, lambda m: m.observations(resource_id=resource_id, history=True))

    @resource("thread", "messages", "The thread's newest messages (recall reads more).")
    async def thread_messages(thread_id: str, ctx: Context) -> str:
        return await _json(ctx, lambda m: m.messages(thread_id))

    @resource("thread", "observations", "The thread's active observation log.")
    async def thread_observations(thread_id: str, ctx: Context) -> str:
        return await _json(ctx, lambda m: m.observations(thread_id))

    @resource("thread", "observations/history", "Every generation of the thread's log, newest first.")
    async def thread_observation_history(thread_id: str, ctx: Context) -> str:
        return await _json(ctx, lambda m: m.observations(thread_id, history=True))

    @resource("thread", "events", "The thread's observation lifecycle events (newest 200).")
    async def thread_events(thread_id: str, ctx: Context) -> str:
        return await _json(ctx, lambda m: m.events_of(thread_id))

    @resource("thread", "status", "Memory status: windows, buffered work, model readiness.")
    async def thread_status(thread_id: str, ctx: Context) -> str:

        async def read(m: Memory):
            await m.messages(thread_id, limit=1)  # unknown thread -> not found
            return status_for_caller(m, await m.status(thread_id))

        return await _json(ctx, read)

    @resource("thread", "working-memory", "The working memory a thread sees.")
    async def thread_working_memory(thread_id: str, ctx: Context) -> str:

        async def read(m: Memory):
            await m.messages(thread_id, limit=1)  # unknown thread -> not found
            return await m.get_working_memory(thread_id)

        return await _json(ctx, read)
