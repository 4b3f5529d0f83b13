"""Who may touch what: a bearer token bound to resources never reaches another's.

Over stdio, or HTTP without auth, everything is allowed. With a token, every tool
and resource that names a thread or a resource is checked here; a new thread of a
token bound to exactly one resource goes to that resource.

Thread ids are one space for the whole server (the store keys threads by id alone),
so tenants are kept apart by refusal rather than by scoping: another tenant's thread
is answered exactly as a thread that does not exist ("unknown thread"), naming
neither its resource nor anything in it; and creating a thread under an id another
tenant already holds is refused with one sentence that says only that the id is
taken. That refusal is the one thing a token can learn about another tenant's
threads: that an id is in use (hosts use random session ids, so guessing one is
hopeless).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError

from om_mcp.engine import NotFound
from om_mcp.server import uris
from om_mcp.server.errors import engine_error
from om_mcp.server.http.auth import ResourceNotAllowed, allowed_resources, check_resource, default_resource, is_admin
from om_mcp.server.live import App, app_of

if TYPE_CHECKING:
    from om_mcp.engine import Status

TAKEN = (
    "thread_id: {id!r} is already in use on this server (thread ids are shared by everyone who uses it);"
    " choose another id, for example one that starts with your resource"
)


def unknown(thread_id: str) -> NotFound:
    """What a thread that does not exist gets (the engine's own words)."""
    return NotFound(f"unknown thread {thread_id!r}", field="thread_id")


async def _hidden(ctx: Context, thread_id: str, allowed: frozenset[str]) -> bool:
    """Does `thread_id` exist, under a resource the caller may not use?"""
    thread = await (await app_of(ctx).ready()).thread(thread_id)
    return thread is not None and thread.resource_id not in allowed


async def authorize(
    ctx: Context,
    thread_id: str | None = None,
    resource_id: str | None = None,
    target_thread_id: str | None = None,
    *,
    creates: bool = False,
) -> str | None:
    """Refuse what the caller's token does not grant; returns the resource_id to use.
    `creates`: the call makes the thread when it does not exist (append_messages)."""
    allowed = allowed_resources()
    if allowed is None:
        return resource_id
    memory = await app_of(ctx).ready()
    for ident in (thread_id, None if target_thread_id == "current" else target_thread_id):
        if ident and await _hidden(ctx, ident, allowed):
            raise ToolError(TAKEN.format(id=ident)) if creates and ident == thread_id else engine_error(unknown(ident))
    try:
        thread = await memory.thread(thread_id) if thread_id else None
        if thread is None and resource_id is None:
            resource_id = default_resource()
            check_resource(resource_id or memory.config.default_resource_id)
        if resource_id:
            check_resource(resource_id)
    except ResourceNotAllowed as error:
        raise ToolError(str(error)) from None
    return resource_id


async def authorize_read(ctx: Context, thread_id: str | None = None, resource_id: str | None = None) -> None:
    """The same check for resources (the MCP kind), which answer 'not found'."""
    allowed = allowed_resources()
    if allowed is None:
        return
    try:
        if resource_id is not None:
            check_resource(resource_id)
    except ResourceNotAllowed as error:
        raise ResourceNotFoundError(str(error)) from None
    if thread_id is not None and await _hidden(ctx, thread_id, allowed):
        raise ResourceNotFoundError(str(unknown(thread_id)))


def status_for_caller(status: Status) -> Status:
    """A thread's status as the caller may see it: whole for an admin, else without what is the
    server's (the model's failure text, which may quote another tenant; the spend of everyone)."""
    return status if is_admin() else status.for_tenant()


async def subscription_refusal(app: App, uri: str) -> str | None:
    """Why the caller may not subscribe to `uri` (None: it may), in the words `resources/read`
    uses, so another tenant's thread reads as one nobody holds. With a token, a thread that does
    not exist yet is refused too: whoever creates it under that id would be heard."""
    allowed = allowed_resources()
    if allowed is None:
        return None
    parsed = uris.parse(uri)
    if parsed is None:
        return f"{uri!r} is not a resource of this server"
    kind, ident, _ = parsed
    if kind == "resource":
        try:
            check_resource(ident)
        except ResourceNotAllowed as error:
            return str(error)
        return None
    thread = await (await app.ready()).thread(ident)
    return None if thread is not None and thread.resource_id in allowed else str(unknown(ident))
