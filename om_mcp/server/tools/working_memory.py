"""get_working_memory and update_working_memory."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from om_mcp.server import descriptions as text
from om_mcp.server.notify import working_memory_uris
from om_mcp.server.output import compact
from om_mcp.server.schemas import ResourceId, ThreadId
from om_mcp.server.tools.base import READ, UPDATE, invoke


def register(server: MCPServer) -> None:
    @server.tool(description=text.GET_WORKING_MEMORY, annotations=READ, structured_output=False)
    async def get_working_memory(thread_id: ThreadId, ctx: Context, resource_id: ResourceId = None) -> str:
        out = await invoke(ctx, lambda app: app.memory.get_working_memory(thread_id, resource_id))
        return out.memory if isinstance(out.memory, str) else compact(out.memory)

    @server.tool(description=text.UPDATE_WORKING_MEMORY, annotations=UPDATE, structured_output=False)
    async def update_working_memory(
        thread_id: ThreadId,
        memory: Annotated[str | dict[str, Any], Field(description="Markdown, or changed fields (schema mode)")],
        ctx: Context,
        resource_id: ResourceId = None,
        read_only: Annotated[bool, Field(description="refuse the write (for sub-agents)")] = False,
    ) -> str:
        out = await invoke(
            ctx,
            lambda app: app.memory.update_working_memory(thread_id, memory, resource_id, read_only=read_only),
            changed=lambda o: working_memory_uris(thread_id, o.resource_id) if o.updated else [],
        )
        return compact({"updated": bool(out.updated), "notice": out.notice})
