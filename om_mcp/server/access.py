"""What a caller may see of the server beyond its own resources, and what it may hear.

Who may touch which resource is not decided here: `server/http/auth.py: access_of` resolves
the caller's `Access` once per request, and every handler reaches the engine narrowed to it
(`App.memory`), which refuses a resource outside it and answers another tenant's thread,
message, line or generation as one nobody holds. Thread ids are one space for the whole
server (the store keys threads by id alone): creating a thread under an id another tenant
holds is refused with one sentence that says only that the id is taken, the one thing a token
can learn about another tenant's threads (hosts use random session ids, so guessing one is
hopeless).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from om_mcp.engine import EngineError
from om_mcp.server import uris
from om_mcp.server.live import App

if TYPE_CHECKING:
    from om_mcp.engine import Memory, Status


def status_for_caller(memory: Memory, status: Status) -> Status:
    """A thread's status as the caller may see it: whole for every resource's access (the local
    owner, an admin token), else without what is the server's (the model's failure text, which may
    quote another tenant; the spend of everyone)."""
    return status if memory.access.every_resource else status.for_tenant()


async def may_hear(memory: Memory, uri: str) -> bool:
    """May the caller of `memory` (narrowed to its access) hear updates of `uri`? A thread that does
    not exist yet is refused too: whoever creates it under that id would be heard."""
    if memory.access.every_resource:
        return True
    parsed = uris.parse(uri)
    if parsed is None:
        return False
    kind, ident, _ = parsed
    if kind == "resource":
        return memory.access.allows(ident)
    return await memory.thread(ident) is not None


async def subscription_refusal(app: App, uri: str) -> str | None:
    """Why the caller may not subscribe to `uri` (None: it may), in the words `resources/read`
    uses, so another tenant's thread reads as one nobody holds."""
    memory = await app.ready()
    if await may_hear(memory, uri):
        return None
    parsed = uris.parse(uri)
    if parsed is None:
        return f"{uri!r} is not a resource of this server"
    kind, ident, _ = parsed
    if kind == "resource":
        try:
            memory.check_resource(ident)
        except EngineError as error:
            return str(error)
    return f"unknown thread {ident!r}"
