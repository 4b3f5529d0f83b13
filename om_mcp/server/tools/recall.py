"""recall: raw history, other threads, search."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from om_mcp.engine import RecallQuery
from om_mcp.server import descriptions as text
from om_mcp.server.schemas import ResourceId, ThreadId
from om_mcp.server.tools.base import READ, invoke


def register(server: MCPServer) -> None:
    @server.tool(description=text.RECALL, annotations=READ, structured_output=False)
    async def recall(
        thread_id: ThreadId,
        ctx: Context,
        mode: Literal["messages", "threads", "search"] = "messages",
        query: Annotated[str | None, Field(None, max_length=2000)] = None,
        cursor: Annotated[str | None, Field(None, description="a message id")] = None,
        target_thread_id: str | None = None,
        anchor: Literal["start", "end"] = "start",
        page: Annotated[int, Field(ge=-1000, le=1000)] = 1,
        limit: Annotated[int | None, Field(None, ge=1, le=50)] = None,
        detail: Literal["low", "high"] = "low",
        part_type: Literal["text", "tool-call", "tool-result", "reasoning", "image", "file"] | None = None,
        tool_name: str | None = None,
        part_index: Annotated[int | None, Field(None, ge=0)] = None,
        char_offset: Annotated[int, Field(ge=0)] = 0,
        before: Annotated[str | None, Field(None, description="threads: created before (ISO date)")] = None,
        after: Annotated[str | None, Field(None, description="threads: created after")] = None,
        scope: Literal["thread", "resource"] = "resource",
        max_tokens: Annotated[int | None, Field(None, ge=50)] = None,
        resource_id: ResourceId = None,
    ) -> str:
        query_model = RecallQuery(
            thread_id=thread_id,
            mode=mode,
            resource_id=resource_id,
            query=query,
            cursor=cursor,
            target_thread_id=target_thread_id,
            anchor=anchor,
            page=page,
            limit=limit,
            detail=detail,
            part_type=part_type,
            tool_name=tool_name,
            part_index=part_index,
            char_offset=char_offset,
            before=before,
            after=after,
            scope=scope,
            max_tokens=max_tokens,
        )
        out = await invoke(ctx, lambda app: app.memory.recall(query_model))
        return out.text
