"""The running app a request handler reaches: the engine once open, the notifier, the sampling broker."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from om_mcp.server.http.auth import caller_access
from om_mcp.server.notify import Notifier
from om_mcp.server.sampling import SamplingBroker

if TYPE_CHECKING:
    from om_mcp.engine import Memory


class App:
    """What a request handler needs: the engine (narrowed to the caller's access), the notifier,
    and the sampling broker that lets the `sampling` model reach clients which offer it.

    The server's lifespan opens the engine before the first message is read, so no request
    waits for it; `ready()` is there for the one case where it could not be opened."""

    def __init__(self, notifier: Notifier, broker: SamplingBroker, memory: Memory | None = None):
        self.notifier = notifier
        self.broker = broker
        self._memory = memory
        self.failure: str | None = None
        self._ready = anyio.Event()
        if memory is not None:
            self._ready.set()

    @property
    def is_open(self) -> bool:
        return self._memory is not None

    @property
    def memory(self) -> Memory:
        """The engine as the caller of the request being handled may see it (narrowed to its
        `Access`, resolved from its token by `access_of`), once open: a request handler reads it
        after `ready()` returned. Every tool, resource and page route reaches the memory here."""
        if self._memory is None:
            raise ToolError(f"om-mcp could not open its memory: {self.failure or 'still opening'}")
        return self._memory.with_access(caller_access())

    def opened(self, memory: Memory | None, failure: str | None = None) -> None:
        self._memory, self.failure = memory, failure
        self._ready.set()

    async def ready(self) -> Memory:
        await self._ready.wait()
        if self.failure is not None:
            raise ToolError(f"om-mcp could not open its memory: {self.failure}")
        return self.memory


def app_of(ctx: Context) -> App:
    # The lifespan of `build_server` yields the App: the SDK types it as a plain dict.
    return cast(App, ctx.request_context.lifespan_context)
