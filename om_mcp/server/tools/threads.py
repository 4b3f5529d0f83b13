"""update_thread and delete_thread, which also correct and forget one thing in a thread."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from om_mcp.server import descriptions as about
from om_mcp.server.notify import thread_uris
from om_mcp.server.output import compact
from om_mcp.server.schemas import ThreadId
from om_mcp.server.tools.base import DELETE, UPDATE, invoke
from om_mcp.server.uris import resource_uri

ObservationId = Annotated[str | None, Field(None, description=about.OBSERVATION_ID)]


def _forgotten(out: Any) -> str:
    """A forget's result in few tokens: the non-zero counts, and a preview's items."""
    counts = {k: v for k, v in out.model_dump(exclude={"selector", "items", "more"}).items() if v}
    if not out.done:
        counts.update(done=False, items=out.items[:20], more=out.more or len(out.items) > 20)
    return compact(counts)


def register(server: MCPServer) -> None:
    @server.tool(description=about.UPDATE_THREAD, annotations=UPDATE, structured_output=False)
    async def update_thread(
        thread_id: ThreadId,
        ctx: Context,
        title: Annotated[str | None, Field(None, max_length=500)] = None,
        metadata: dict[str, Any] | None = None,
        observation_id: ObservationId = None,
        text: Annotated[str | None, Field(None, max_length=2000, description=about.CORRECTED)] = None,
        remember: Annotated[str | None, Field(None, max_length=2000, description=about.REMEMBER)] = None,
    ) -> str:
        result: dict[str, Any] = {}
        if remember is not None:
            remembered = await invoke(
                ctx,
                lambda app: app.memory.remember(remember, thread_id=thread_id),
                changed=lambda _: thread_uris(thread_id),
            )
            result["remembered"] = {"id": remembered.id, "text": remembered.text}
        if (observation_id is None) != (text is None):
            raise ToolError("observation_id and text go together: the line to correct and what it should say")
        if observation_id is not None:
            edited = await invoke(
                ctx,
                lambda app: app.memory.control.edit_observation(observation_id, text, thread_id),
                changed=lambda _: thread_uris(thread_id),
            )
            result["corrected"] = edited.model_dump()
        if title is not None or metadata is not None or not result:
            out = await invoke(
                ctx,
                lambda app: app.memory.update_thread(thread_id, title, metadata),
                changed=lambda o: [resource_uri(o.resource_id, "threads")],
            )
            result = {"id": out.id, "title": out.title, **result}
        return compact(result)

    @server.tool(description=about.DELETE_THREAD, annotations=DELETE, structured_output=False)
    async def delete_thread(
        thread_id: ThreadId,
        ctx: Context,
        message_id: str | None = None,
        observation_id: ObservationId = None,
        match: Annotated[str | None, Field(None, max_length=500, description=about.MATCH)] = None,
        with_sources: Annotated[bool, Field(description="observation_id's messages too")] = False,
        confirm: bool = False,
    ) -> str:
        chosen = [n for n, v in (("message_id", message_id), ("observation_id", observation_id), ("match", match)) if v]
        if len(chosen) > 1:
            raise ToolError(f"give one of message_id, observation_id, match (got {', '.join(chosen)})")
        control = lambda app: app.memory.control  # noqa: E731
        if message_id is not None:
            out = await invoke(
                ctx,
                lambda app: control(app).forget_message(thread_id, message_id),
                changed=lambda _: thread_uris(thread_id),
            )
            return _forgotten(out)
        if observation_id is not None:
            out = await invoke(
                ctx,
                lambda app: control(app).forget_observation(observation_id, thread_id, with_sources=with_sources),
                changed=lambda _: thread_uris(thread_id),
            )
            return _forgotten(out)
        if match is not None:
            out = await invoke(
                ctx,
                lambda app: control(app).forget_match(match, thread_id=thread_id, apply=confirm),
                changed=lambda o: thread_uris(thread_id) if o.done else [],
            )
            return _forgotten(out)
        thread = await invoke(ctx, lambda app: app.memory.thread(thread_id))
        deleted = await invoke(
            ctx,
            lambda app: app.memory.delete_thread(thread_id),
            changed=lambda o: (
                thread_uris(thread_id) + ([resource_uri(thread.resource_id, "threads")] if thread else [])
            ),
        )
        return compact({"deleted_messages": deleted.deleted_messages, "erase_pending": deleted.erase_pending or None})
