"""get_context: what to know before replying."""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from om_mcp.server import descriptions as text
from om_mcp.server.access import authorize
from om_mcp.server.app import app_of
from om_mcp.server.output import compact, message_view, view_tokens
from om_mcp.server.schemas import ResourceId, ThreadId
from om_mcp.server.tools.base import STEP, invoke, status_view


def register(server: MCPServer) -> None:
    @server.tool(description=text.GET_CONTEXT, annotations=STEP, structured_output=False)
    async def get_context(
        thread_id: ThreadId,
        ctx: Context,
        resource_id: ResourceId = None,
        max_tokens: Annotated[
            int | None, Field(None, ge=100, le=1_000_000, description="budget for the result")
        ] = None,
        include_status: bool = False,
    ) -> str:
        app = app_of(ctx)
        resource = await authorize(ctx, thread_id, resource_id)
        out = await invoke(
            ctx, lambda app: app.memory.get_context(thread_id, resource, max_tokens, with_status=include_status)
        )
        messages = [message_view(m) for m in out.messages]
        omitted = out.omitted_messages
        result: dict[str, Any] = {"system_text": out.system_text, "messages": [], "omitted_messages": omitted}
        if out.status is not None:
            result["status"] = status_view(out.status)

        # The budget bounds what the model reads, the JSON: fitted from the stored counts (each
        # message's size is reckoned once, see view_tokens), never by encoding the result.
        budget = max_tokens or app.memory.config.output_token_budget
        count = app.memory.counter.count_text
        wrapper = {**result, "system_text": "", "omitted_messages": omitted + len(messages)}
        used = count(compact(wrapper)) + count(json.dumps(out.system_text, ensure_ascii=False)) + 2
        start = len(messages)
        while start > 0:
            size = view_tokens(out.messages[start - 1], messages[start - 1], count) + 1  # and its comma
            if used + size > budget:
                break
            used += size
            start -= 1
        result["messages"] = messages[start:]
        result["omitted_messages"] = omitted + start
        return compact(result)
