"""append_messages: store the newest messages of a thread."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from om_mcp.engine import InputError
from om_mcp.server import descriptions as text
from om_mcp.server.output import compact
from om_mcp.server.schemas import Message, ResourceId, ThreadId, message_dicts
from om_mcp.server.tools.base import APPEND, invoke, status_view
from om_mcp.server.uris import resource_uri, thread_uri


def register(server: MCPServer) -> None:
    @server.tool(description=text.APPEND_MESSAGES, annotations=APPEND, structured_output=False)
    async def append_messages(
        thread_id: ThreadId,
        ctx: Context,
        user: Annotated[str | None, Field(None, description="the user's message")] = None,
        assistant: Annotated[str | None, Field(None, description="your reply")] = None,
        messages: Annotated[list[Message] | None, Field(None, description="messages in order")] = None,
        resource_id: ResourceId = None,
        thread_metadata: Annotated[
            dict[str, Any] | None, Field(None, description="new thread: title, working_memory")
        ] = None,
        include_status: bool = False,
    ) -> str:
        batch = message_dicts(messages or [])
        batch += [{"role": r, "content": t} for r, t in (("user", user), ("assistant", assistant)) if t is not None]

        async def call(app):
            if not batch:
                raise InputError("give user, assistant or messages", field="messages")
            return await app.memory.append_messages(
                thread_id, batch, resource_id, thread_metadata, with_status=include_status
            )

        outcome = await invoke(
            ctx,
            call,
            changed=lambda o: [
                thread_uri(thread_id, "messages"),
                thread_uri(thread_id, "status"),
                *([resource_uri(o.resource_id, "threads")] if o.thread_created else []),
            ],
        )
        result: dict[str, Any] = {"stored": outcome.appended, "skipped": outcome.skipped_duplicates}
        if outcome.remembered:
            result["remembered"] = outcome.remembered
        if outcome.forgotten:
            result["forgotten"] = outcome.forgotten  # refused: the user had them forgotten
        if outcome.status is not None:
            result["status"] = status_view(ctx, outcome.status)
        if not (result["skipped"] or "status" in result or "forgotten" in result):
            result.pop("skipped")
        return compact(result)
