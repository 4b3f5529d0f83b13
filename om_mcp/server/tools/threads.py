"""update_thread and delete_thread."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from om_mcp.server import descriptions as text
from om_mcp.server.access import authorize
from om_mcp.server.notify import thread_uris
from om_mcp.server.output import compact
from om_mcp.server.schemas import ThreadId
from om_mcp.server.tools.base import DELETE, UPDATE, invoke
from om_mcp.server.uris import resource_uri


def register(server: MCPServer) -> None:
    @server.tool(description=text.UPDATE_THREAD, annotations=UPDATE, structured_output=False)
    async def update_thread(
        thread_id: ThreadId,
        ctx: Context,
        title: Annotated[str | None, Field(None, max_length=500)] = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        await authorize(ctx, thread_id)
        out = await invoke(
            ctx,
            lambda app: app.memory.update_thread(thread_id, title, metadata),
            changed=lambda o: [resource_uri(o.resource_id, "threads")],
        )
        return compact({"id": out.id, "title": out.title})

    @server.tool(description=text.DELETE_THREAD, annotations=DELETE, structured_output=False)
    async def delete_thread(thread_id: ThreadId, ctx: Context) -> str:
        await authorize(ctx, thread_id)
        thread = await invoke(ctx, lambda app: app.memory.thread(thread_id))
        out = await invoke(
            ctx,
            lambda app: app.memory.delete_thread(thread_id),
            changed=lambda o: (
                thread_uris(thread_id) + ([resource_uri(thread.resource_id, "threads")] if thread else [])
            ),
        )
        return compact({"deleted_messages": out.deleted_messages})
