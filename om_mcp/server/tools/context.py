"""get_context: what to know before replying."""

from __future__ import annotations

import json
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from om_mcp.server import descriptions as text
from om_mcp.server.live import app_of
from om_mcp.server.output import compact, shown
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
        as_of: Annotated[str | None, Field(None, max_length=40, description=text.AS_OF)] = None,
    ) -> str:
        app = app_of(ctx)
        out = await invoke(
            ctx,
            lambda app: app.memory.get_context(
                thread_id, resource_id, max_tokens, with_status=include_status, as_of=as_of
            ),
        )
        omitted = out.omitted_messages
        status = compact(status_view(ctx, out.status)) if out.status is not None else None

        # The budget bounds what the model reads, the JSON: fitted from the stored counts (each
        # message is rendered and sized once, see `shown`), never by encoding the result.
        budget = max_tokens or app.memory.config.output_token_budget
        count = app.memory.counter.count_text
        views = [shown(m, count) for m in out.messages]
        system = json.dumps(out.system_text, ensure_ascii=False)
        frame = f'{{"system_text":,"messages":[],"omitted_messages":{omitted + len(views)}'
        used = count(frame + (f',"status":{status}}}' if status else "}")) + count(system) + 2
        start = len(views)
        while start > 0 and used + views[start - 1][1] + 1 <= budget:  # each with its comma
            used += views[start - 1][1] + 1
            start -= 1
        # As compact() writes the whole: empty values left out, the rest in this order.
        fields = [f'"system_text":{system}'] if out.system_text else []
        if start < len(views):
            fields.append('"messages":[' + ",".join(text for text, _ in views[start:]) + "]")
        fields.append(f'"omitted_messages":{omitted + start}')
        if status:
            fields.append(f'"status":{status}')
        return "{" + ",".join(fields) + "}"
