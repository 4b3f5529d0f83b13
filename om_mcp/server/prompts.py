"""MCP prompts, for a host that lets its user pick prompts but whose model calls no tools (or
before it does): the memory to start a conversation with, and "remember this".

Each reads or writes through the engine narrowed to the caller's access (`App.memory`, as the
tools do), so a token bound to some resources gets the same refusals here; an engine error is
the prompt request's error, in the engine's words (another tenant's thread or resource reads as
one nobody holds).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import AssistantMessage, Message, UserMessage
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import Field

from om_mcp.server import descriptions as about
from om_mcp.server.live import App
from om_mcp.server.notify import thread_uris
from om_mcp.server.tools.base import invoke

T = TypeVar("T")


async def _run(ctx: Context, call: Callable[[App], Awaitable[T]], changed: Callable[[T], list[str]] | None = None) -> T:
    try:
        return await invoke(ctx, call, changed)
    except ToolError as error:  # the engine's refusal, named: a prompt request's error
        raise MCPError(INVALID_PARAMS, str(error)) from None


def register(server: MCPServer) -> None:
    @server.prompt(name="memory", title="om-mcp memory", description=about.PROMPT_MEMORY)
    async def memory(
        ctx: Context,
        thread_id: Annotated[str | None, Field(None, description=about.PROMPT_THREAD)] = None,
        resource_id: Annotated[str | None, Field(None, description=about.PROMPT_RESOURCE)] = None,
    ) -> list[Message]:
        async def read(app: App) -> str:
            chosen = thread_id
            if chosen is None:  # the resource's newest conversation: the memory the next one goes on from
                owner = resource_id or app.memory.access.only or app.memory.config.default_resource_id
                newest = await app.memory.threads(owner, limit=1)
                if not newest:
                    return ""
                chosen = newest[0].id
            return (await app.memory.get_context(chosen, resource_id)).system_text

        said = await _run(ctx, read)
        return [UserMessage(said or "om-mcp holds no memory here yet.")]

    @server.prompt(name="remember", title="Remember this", description=about.PROMPT_REMEMBER)
    async def remember(
        ctx: Context,
        text: Annotated[str, Field(description=about.REMEMBER)],
        thread_id: Annotated[str | None, Field(None, description=about.PROMPT_THREAD)] = None,
        resource_id: Annotated[str | None, Field(None, description=about.PROMPT_RESOURCE)] = None,
    ) -> list[Message]:
        done = await _run(
            ctx,
            lambda app: app.memory.remember(text, thread_id=thread_id, resource_id=resource_id),
            changed=lambda _: thread_uris(thread_id) if thread_id else [],
        )
        return [
            UserMessage(f"Remember this: {text}"),
            AssistantMessage(f"Remembered word for word ({done.record_key}, id {done.id}): {done.text}"),
        ]
