"""Who may touch what: a bearer token bound to resources never reaches another's.

Over stdio, or HTTP without auth, everything is allowed. With a token, every tool
and resource that names a thread or a resource is checked here; a new thread of a
token bound to exactly one resource goes to that resource.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError

from om_mcp.server.http.auth import (
    ResourceNotAllowed,
    allowed_resources,
    check_resource,
    check_thread,
    default_resource,
)
from om_mcp.server.live import app_of


async def authorize(
    ctx: Context, thread_id: str | None = None, resource_id: str | None = None, target_thread_id: str | None = None
) -> str | None:
    """Refuse what the caller's token does not grant; returns the resource_id to use."""
    if allowed_resources() is None:
        return resource_id
    memory = await app_of(ctx).ready()
    try:
        thread = await memory.thread(thread_id) if thread_id else None
        if thread_id and thread is not None:
            check_thread(thread_id, thread.resource_id)
        elif resource_id is None:
            resource_id = default_resource()
            check_resource(resource_id or memory.config.default_resource_id)
        if resource_id:
            check_resource(resource_id)
        if target_thread_id not in (None, "current"):
            other = await memory.thread(target_thread_id)
            if other is not None:
                check_thread(target_thread_id, other.resource_id)
    except ResourceNotAllowed as error:
        raise ToolError(str(error)) from None
    return resource_id


async def authorize_read(ctx: Context, thread_id: str | None = None, resource_id: str | None = None) -> None:
    """The same check for resources (the MCP kind), which answer 'not found'."""
    if allowed_resources() is None:
        return
    try:
        if resource_id is not None:
            check_resource(resource_id)
        if thread_id is not None:
            thread = await (await app_of(ctx).ready()).thread(thread_id)
            if thread is not None:
                check_thread(thread_id, thread.resource_id)
    except ResourceNotAllowed as error:
        raise ResourceNotFoundError(str(error)) from None
