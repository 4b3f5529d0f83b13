"""get_context: what to know before replying."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from om_mcp.server import descriptions as text
from om_mcp.server.access import authorize
from om_mcp.server.app import app_of
from om_mcp.server.output import compact, message_view
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

        def render() -> str:
            result: dict[str, Any] = {"system_text": out.system_text, "messages": messages, "omitted_messages": omitted}
            if out.status is not None:
                result["status"] = status_view(out.status)
            return compact(result)

        # The budget bounds what the model reads: the JSON, not the stored counts.
        budget = max_tokens or app.memory.config.output_token_budget
        count = app.memory.counter.count_text
        text = render()
        over = count(text) - budget
        if over > 0 and messages:
            # Each message counted once, the oldest dropped until the excess is covered:
            # counting the whole text again per dropped message made a long unobserved
            # backlog (a model down, observation off) cost every turn a third of a second.
            drop = 0
            while drop < len(messages) and over > 0:
                over -= count(compact(messages[drop]))
                drop += 1
            del messages[:drop]
            omitted += drop
            text = render()
        while messages and count(text) > budget:  # the pieces' counts may fall a little short of the whole's
            messages.pop(0)
            omitted += 1
            text = render()
        return text
