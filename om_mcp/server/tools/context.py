"""get_context: what to know before replying."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from om_mcp.server import descriptions as text
from om_mcp.server.output import compact, message_view
from om_mcp.server.schemas import ResourceId, ThreadId
from om_mcp.server.tools.base import STEP, invoke, status_view


def register(server: MCPServer) -> None:
    @server.tool(description=text.GET_CONTEXT, annotations=STEP, structured_output=False)
    async def get_context(
        thread_id: ThreadId,
        ctx: Context,
        resource_id: ResourceId = None,
        max_tokens: Annotated[int | None, Field(None, ge=100, le=1_000_000, description="budget for the result")] = None,
        include_status: bool = False,
    ) -> str:
        out = await invoke(ctx, lambda app: app.memory.get_context(thread_id, resource_id, max_tokens,
                                                                    with_status=include_status))
        result: dict[str, Any] = {"system_text": out.system_text, "messages": [message_view(m) for m in out.messages],
                                  "omitted_messages": out.omitted_messages}
        if out.status is not None:
            result["status"] = status_view(out.status)
        return compact(result)
