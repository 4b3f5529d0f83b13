"""The MCP adapter: tools and resources over a `Memory` engine.

Each handler resolves the engine from the lifespan, calls one engine method and
returns its pydantic result (the tool's structured output). Engine input
errors become tool errors whose text names the field.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import warnings
from contextlib import asynccontextmanager
from typing import Annotated, Any, AsyncIterator, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.subscriptions import ResourceUpdated
from mcp.types import ToolAnnotations
from pydantic import Field

from om_mcp import __version__
from om_mcp.config import Config
from om_mcp.engine.errors import NotFound, StoreError
from om_mcp.engine.memory import Memory
from om_mcp.engine.messages import MessageIn
from om_mcp.engine.results import (
    AppendOutcome, ContextOut, CycleOut, DeleteOut, RecallOut, ThreadOut, WorkingMemoryOut,
)
from om_mcp.server import descriptions as text
from om_mcp.server.http.auth import (  # transport: resource check
    ResourceNotAllowed, allowed_resources, check_resource, check_thread, default_resource,
)
from om_mcp.server.log_level import client_wants_log, install_log_level  # transport: logging/setLevel

log = logging.getLogger(__name__)

ThreadId = Annotated[str, Field(min_length=1, max_length=200, description="the conversation thread's id")]
ResourceId = Annotated[
    str | None,
    Field(None, min_length=1, max_length=200, description="the user or project owning the thread; defaults to the"
          " thread's own resource, or the configured default resource for a new thread"),
]

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
APPEND = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
UPDATE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
CYCLE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


def _memory(ctx: Context) -> Memory:
    return ctx.request_context.lifespan_context


def event_uris(event: dict[str, Any]) -> list[str]:
    """The resources a lifecycle event changes."""
    uris = []
    if event.get("thread_id"):
        uris += [f"om://threads/{event['thread_id']}/events", f"om://threads/{event['thread_id']}/observations"]
    if event.get("resource_id"):
        uris.append(f"om://resources/{event['resource_id']}/observations")
    return uris


async def _notify(ctx: Context, events: list[dict[str, Any]]) -> None:
    """Send a request's lifecycle events as log notifications and resource
    updates. Delivery is best effort: the events resource keeps them all."""
    seen: set[str] = set()
    wants_log = client_wants_log(ctx, "info")  # transport: logging/setLevel
    for event in events:
        if wants_log:  # transport: logging/setLevel
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # logging is deprecated in 2026-07-28, still useful before
                    await ctx.log("info", event, logger_name="om-mcp.events")
            except Exception as error:  # noqa: BLE001
                log.debug("log notification not sent: %s", error)
        for uri in event_uris(event):
            if uri in seen:
                continue
            seen.add(uri)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await ctx.session.send_resource_updated(uri)
            except Exception as error:  # noqa: BLE001
                log.debug("resource update not sent: %s", error)


def _tool_errors(handler):
    """Run a tool: engine input errors become tool errors naming the field,
    and the lifecycle events it caused are sent as notifications."""

    takes_resource = "resource_id" in inspect.signature(handler).parameters  # transport: resource check

    @functools.wraps(handler)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx: Context = kwargs["ctx"]
        memory = _memory(ctx)
        try:  # transport: resource check
            await _check_access(memory, kwargs, takes_resource)
        except ResourceNotAllowed as error:
            raise ToolError(str(error)) from None
        with memory.om.collect() as events:
            try:
                result = await handler(*args, **kwargs)
            except StoreError as error:
                prefix = f"{error.field}: " if error.field and not str(error).startswith(error.field) else ""
                raise ToolError(prefix + str(error)) from None
        if events:
            await _notify(ctx, events)
            if hasattr(result, "events") and not result.events:
                result.events = events
        return result

    return wrapper


async def _check_access(memory: Memory, arguments: dict[str, Any], takes_resource: bool) -> None:
    """transport: resource check. Refuse a thread or resource the caller's token does not
    grant; a new thread of a token bound to one resource goes to that resource."""
    if allowed_resources() is None:
        return
    thread_id = arguments.get("thread_id")
    thread = await memory.store.get_thread(thread_id) if thread_id else None
    if thread is not None:
        check_thread(thread_id, thread.resource_id)
    elif takes_resource and arguments.get("resource_id") is None:
        arguments["resource_id"] = default_resource()
        check_resource(arguments["resource_id"] or memory.config.default_resource_id)
    if arguments.get("resource_id"):
        check_resource(arguments["resource_id"])
    target = arguments.get("target_thread_id")
    if target not in (None, "current"):
        other = await memory.store.get_thread(target)
        if other is not None:
            check_thread(target, other.resource_id)


async def _check_thread_access(memory: Memory, thread_id: str) -> None:
    """transport: resource check, for resources addressed by thread."""
    thread = await memory.store.get_thread(thread_id)
    if thread is not None:
        check_thread(thread_id, thread.resource_id)


def _progress(ctx: Context):
    step = 0

    async def report(message: str) -> None:
        nonlocal step
        step += 1
        try:
            await ctx.report_progress(step, None, message)
        except Exception as error:  # noqa: BLE001 - progress is a courtesy
            log.debug("progress not sent: %s", error)

    return report


async def _cycle_out(ctx: Context, thread_id: str, resource_id: str | None, outcome) -> CycleOut:
    return CycleOut(
        operation=outcome.operation, ran=outcome.ran, cycle_id=outcome.cycle_id, reason=outcome.reason,
        error=outcome.error, tokens_in=outcome.tokens_in, tokens_out=outcome.tokens_out,
        status=await _memory(ctx).status(thread_id, resource_id), events=outcome.events,
    )


def build_server(config: Config, memory: Memory | None = None) -> MCPServer:
    """An MCP server over `memory`, or over one opened from `config` per lifespan."""

    @asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[Memory]:
        if memory is not None:
            yield memory
            return
        opened = await Memory.open(config)
        log.info("om-mcp %s ready; database %s", __version__, opened.store.db.path)

        async def publish(event: dict[str, Any]) -> None:
            # Reaches 2026-07-28 `subscriptions/listen` streams, background cycles included.
            for uri in event_uris(event):
                await mcp._subscriptions.publish(ResourceUpdated(uri=uri))

        opened.om.listeners.append(publish)
        try:
            async with opened.running():
                opened.warm_up()
                # Counts made by an older tokenizer are refreshed in the background.
                await opened.worker.submit("tokens", "recount", opened.recount_tokens)
                yield opened
        finally:
            await opened.close()

    mcp = MCPServer("om-mcp", version=__version__, instructions=text.SERVER_INSTRUCTIONS, lifespan=lifespan)

    @mcp.tool(description=text.APPEND_MESSAGES, annotations=APPEND)
    @_tool_errors
    async def append_messages(
        thread_id: ThreadId,
        messages: Annotated[list[MessageIn], Field(min_length=1, description="messages in the order they happened")],
        ctx: Context,
        resource_id: ResourceId = None,
        thread_metadata: Annotated[
            dict[str, Any] | None,
            Field(None, description="metadata for a new thread (title, working_memory to seed its working memory)"),
        ] = None,
    ) -> AppendOutcome:
        return await _memory(ctx).append_messages(thread_id, messages, resource_id, thread_metadata)

    @mcp.tool(description=text.GET_CONTEXT, annotations=READ_ONLY)
    @_tool_errors
    async def get_context(
        thread_id: ThreadId,
        ctx: Context,
        resource_id: ResourceId = None,
        max_tokens: Annotated[
            int | None, Field(None, ge=100, le=1_000_000, description="token budget for the whole result")
        ] = None,
    ) -> ContextOut:
        return await _memory(ctx).get_context(thread_id, resource_id, max_tokens)

    @mcp.tool(description=text.RECALL, annotations=READ_ONLY)
    @_tool_errors
    async def recall(
        thread_id: ThreadId,
        ctx: Context,
        mode: Literal["messages", "threads", "search"] = "messages",
        resource_id: ResourceId = None,
        query: Annotated[str | None, Field(None, max_length=2000, description="search words (mode search)")] = None,
        cursor: Annotated[
            str | None, Field(None, description="a message id to page from (e.g. a range's start or end)")
        ] = None,
        target_thread_id: Annotated[
            str | None, Field(None, description="another thread of the same resource to browse; 'current' = this one")
        ] = None,
        anchor: Literal["start", "end"] = "start",
        page: Annotated[int, Field(ge=-1000, le=1000, description="+N forward from the cursor, -N backward")] = 1,
        limit: Annotated[int, Field(ge=1, le=50)] = 20,
        detail: Literal["low", "high"] = "low",
        part_type: Literal["text", "tool-call", "tool-result", "reasoning", "image", "file"] | None = None,
        tool_name: str | None = None,
        part_index: Annotated[int | None, Field(None, ge=0)] = None,
        char_offset: Annotated[int, Field(ge=0)] = 0,
        before: Annotated[str | None, Field(None, description="threads created before this ISO date")] = None,
        after: Annotated[str | None, Field(None, description="threads created after this ISO date")] = None,
        scope: Literal["thread", "resource"] = "resource",
    ) -> RecallOut:
        memory = _memory(ctx)
        if mode == "messages" and cursor is None and target_thread_id in (None, "current"):
            # Browsing a thread that does not exist is a mistake (a typo, or a deleted
            # thread), not an empty page; say so instead of answering "No messages."
            if await memory.store.get_thread(thread_id) is None:
                raise ToolError(f"thread_id: unknown thread {thread_id!r}")
        return await memory.recall(
            thread_id, mode, resource_id=resource_id, query=query, cursor=cursor, target_thread_id=target_thread_id,
            anchor=anchor, page=page, limit=limit, detail=detail, part_type=part_type, tool_name=tool_name,
            part_index=part_index, char_offset=char_offset, before=before, after=after, scope=scope,
        )

    @mcp.tool(description=text.OBSERVE, annotations=CYCLE)
    @_tool_errors
    async def observe(
        thread_id: ThreadId,
        ctx: Context,
        resource_id: ResourceId = None,
        instruction: Annotated[str | None, Field(None, max_length=4000, description="extra guidance for this run")] = None,
    ) -> CycleOut:
        outcome = await _memory(ctx).observe(thread_id, resource_id, instruction, progress=_progress(ctx))
        return await _cycle_out(ctx, thread_id, resource_id, outcome)

    @mcp.tool(description=text.REFLECT, annotations=CYCLE)
    @_tool_errors
    async def reflect(
        thread_id: ThreadId,
        ctx: Context,
        resource_id: ResourceId = None,
        instruction: Annotated[str | None, Field(None, max_length=4000, description="what to keep or emphasise")] = None,
    ) -> CycleOut:
        outcome = await _memory(ctx).reflect(thread_id, resource_id, instruction, progress=_progress(ctx))
        return await _cycle_out(ctx, thread_id, resource_id, outcome)

    @mcp.tool(description=text.GET_WORKING_MEMORY, annotations=READ_ONLY)
    @_tool_errors
    async def get_working_memory(thread_id: ThreadId, ctx: Context, resource_id: ResourceId = None) -> WorkingMemoryOut:
        return await _memory(ctx).get_working_memory(thread_id, resource_id)

    @mcp.tool(description=text.UPDATE_WORKING_MEMORY, annotations=UPDATE)
    @_tool_errors
    async def update_working_memory(
        thread_id: ThreadId,
        memory: Annotated[
            str | dict[str, Any],
            Field(description="template mode: the complete Markdown; schema mode: a partial JSON object to merge"),
        ],
        ctx: Context,
        resource_id: ResourceId = None,
        read_only: Annotated[bool, Field(description="refuse the write (for sub-agents that must not edit)")] = False,
    ) -> WorkingMemoryOut:
        return await _memory(ctx).update_working_memory(thread_id, memory, resource_id, read_only=read_only)

    @mcp.tool(description=text.UPDATE_THREAD, annotations=UPDATE)
    @_tool_errors
    async def update_thread(
        thread_id: ThreadId,
        ctx: Context,
        title: Annotated[str | None, Field(None, max_length=500)] = None,
        metadata: Annotated[dict[str, Any] | None, Field(None, description="keys to set; a null value removes a key")] = None,
    ) -> ThreadOut:
        return await _memory(ctx).update_thread(thread_id, title, metadata)

    @mcp.tool(description=text.DELETE_THREAD, annotations=DELETE)
    @_tool_errors
    async def delete_thread(thread_id: ThreadId, ctx: Context) -> DeleteOut:
        return await _memory(ctx).delete_thread(thread_id)

    _register_resources(mcp)
    install_log_level(mcp)  # transport: logging/setLevel
    return mcp


async def _json_or_missing(memory: Memory, thread_id: str, read) -> str:
    if await memory.store.get_thread(thread_id) is None:
        raise ResourceNotFoundError(f"unknown thread {thread_id!r}")
    try:
        data = await read(memory)
    except NotFound as error:
        raise ResourceNotFoundError(str(error)) from None
    if hasattr(data, "model_dump"):
        data = data.model_dump(mode="json")
    return json.dumps(data, ensure_ascii=False, indent=2)


def _register_resources(mcp: MCPServer) -> None:
    async def read(call):
        try:
            result = await call
        except NotFound as error:
            raise ResourceNotFoundError(str(error)) from None
        return json.dumps(result.model_dump(mode="json", by_alias=True), ensure_ascii=False, indent=2)

    @mcp.resource("om://resources/{resource_id}/threads", mime_type="application/json",
                  description="The resource's threads, newest first.")
    async def resource_threads(resource_id: str, ctx: Context) -> str:
        check_resource(resource_id)  # transport: resource check
        memory = _memory(ctx)
        threads, _ = await memory.store.list_threads(resource_id, limit=50)
        return json.dumps([t.__dict__ for t in threads], ensure_ascii=False, indent=2)

    @mcp.resource("om://threads/{thread_id}/messages", mime_type="application/json",
                  description="The thread's most recent messages (a page; use the recall tool for more).")
    async def thread_messages(thread_id: str, ctx: Context) -> str:
        memory = _memory(ctx)
        await _check_thread_access(memory, thread_id)  # transport: resource check
        thread = await memory.store.get_thread(thread_id)
        if thread is None:
            raise ResourceNotFoundError(f"unknown thread {thread_id!r}")
        return await read(memory.recall(thread_id, "messages", anchor="end", limit=20))

    @mcp.resource("om://resources/{resource_id}/working-memory", mime_type="application/json",
                  description="Resource-scoped working memory.")
    async def resource_working_memory(resource_id: str, ctx: Context) -> str:
        check_resource(resource_id)  # transport: resource check
        memory = await _memory(ctx).resource_working_memory(resource_id)
        return json.dumps({"resource_id": resource_id, "memory": memory}, ensure_ascii=False)

    @mcp.resource("om://threads/{thread_id}/observations", mime_type="application/json",
                  description="The thread's active observation log (its resource's, in resource scope).")
    async def thread_observations(thread_id: str, ctx: Context) -> str:
        await _check_thread_access(_memory(ctx), thread_id)  # transport: resource check
        return await _json_or_missing(_memory(ctx), thread_id, lambda m: m.observations(thread_id))

    @mcp.resource("om://threads/{thread_id}/observations/history", mime_type="application/json",
                  description="Every generation of the thread's observation log, newest first.")
    async def thread_observation_history(thread_id: str, ctx: Context) -> str:
        await _check_thread_access(_memory(ctx), thread_id)  # transport: resource check
        return await _json_or_missing(_memory(ctx), thread_id, lambda m: m.observations(thread_id, history=True))

    @mcp.resource("om://resources/{resource_id}/observations", mime_type="application/json",
                  description="The resource's shared observation log (resource scope).")
    async def resource_observations(resource_id: str, ctx: Context) -> str:
        check_resource(resource_id)  # transport: resource check
        try:
            data = await _memory(ctx).observations_for_key(f"resource:{resource_id}")
        except NotFound as error:
            raise ResourceNotFoundError(str(error)) from None
        return json.dumps(data, ensure_ascii=False, indent=2)

    @mcp.resource("om://resources/{resource_id}/observations/history", mime_type="application/json",
                  description="Every generation of the resource's observation log, newest first.")
    async def resource_observation_history(resource_id: str, ctx: Context) -> str:
        check_resource(resource_id)  # transport: resource check
        try:
            data = await _memory(ctx).observations_for_key(f"resource:{resource_id}", history=True)
        except NotFound as error:
            raise ResourceNotFoundError(str(error)) from None
        return json.dumps(data, ensure_ascii=False, indent=2)

    @mcp.resource("om://threads/{thread_id}/events", mime_type="application/json",
                  description="The thread's observation lifecycle events (newest 200).")
    async def thread_events(thread_id: str, ctx: Context) -> str:
        memory = _memory(ctx)
        await _check_thread_access(memory, thread_id)  # transport: resource check
        if await memory.store.get_thread(thread_id) is None:
            raise ResourceNotFoundError(f"unknown thread {thread_id!r}")
        events = await memory.store.om.events(thread_id=thread_id, limit=200)
        return json.dumps([{"id": e.id, **e.payload} for e in events], ensure_ascii=False, indent=2, default=str)

    @mcp.resource("om://threads/{thread_id}/status", mime_type="application/json",
                  description="The thread's memory status: message and observation windows, buffered work.")
    async def thread_status(thread_id: str, ctx: Context) -> str:
        await _check_thread_access(_memory(ctx), thread_id)  # transport: resource check
        return await _json_or_missing(_memory(ctx), thread_id, lambda m: m.status(thread_id))

    @mcp.resource("om://threads/{thread_id}/working-memory", mime_type="application/json",
                  description="The working memory a thread sees (its resource's or its own, by scope).")
    async def thread_working_memory(thread_id: str, ctx: Context) -> str:
        memory = _memory(ctx)
        await _check_thread_access(memory, thread_id)  # transport: resource check
        if await memory.store.get_thread(thread_id) is None:
            raise ResourceNotFoundError(f"unknown thread {thread_id!r}")
        return await read(memory.get_working_memory(thread_id))
