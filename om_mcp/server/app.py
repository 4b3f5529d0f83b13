"""The MCP adapter: an `MCPServer` whose tools and resources call `Memory`.

Each tool resolves the engine from the lifespan, calls one public `Memory`
operation and returns compact JSON text. Nothing here knows about SQL or the
engine's insides.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

from om_mcp import __version__
from om_mcp.config import Config
from om_mcp.engine import Memory
from om_mcp.engine.observation.events import one_line
from om_mcp.models.sampling import SamplingBroker
from om_mcp.server import descriptions as text
from om_mcp.server.errors import describe_validation
from om_mcp.server.log_level import install_log_level
from om_mcp.server.notify import Notifier

log = logging.getLogger(__name__)


@dataclass
class App:
    """What a request handler needs: the engine, the notifier, and the sampling broker
    that lets the `sampling` model reach clients which offer it."""

    memory: Memory
    notifier: Notifier
    broker: SamplingBroker


def app_of(ctx: Context) -> App:
    return ctx.request_context.lifespan_context


class MemoryServer(MCPServer):
    """MCPServer whose tool errors always say what was wrong, in one line."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context | None = None) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as error:
            cause = error.__cause__
            while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
                cause = cause.exceptions[0]
            log.warning("tool %s failed: %s", name, one_line(cause or error))
            log.debug("tool %s failed", name, exc_info=cause)
            raise ToolError(f"{name} failed inside om-mcp ({type(cause).__name__}: {one_line(cause or '')});"
                            " nothing was changed, see the server log") from None
        except ToolError as error:
            if isinstance(error.__cause__, ValidationError):
                raise ToolError(f"invalid arguments: {describe_validation(error.__cause__)}") from None
            message = str(error).removeprefix(f"Error executing tool {name}: ")
            raise ToolError(message) from None


def build_server(config: Config, memory: Memory | None = None) -> MemoryServer:
    """An MCP server over `memory`, or over one opened from `config` for the server's lifespan."""
    notifier = Notifier()

    @asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[App]:
        if memory is not None:
            memory.events.listeners.append(notifier.on_event)
            try:
                async with notifier.relaying(memory.store):
                    yield App(memory, notifier, memory.observation.clients.broker)
            finally:
                memory.events.listeners.remove(notifier.on_event)
            return
        broker = SamplingBroker()
        opened = await Memory.open(config, sampling=broker)
        opened.events.listeners.append(notifier.on_event)
        status = opened.observation.readiness
        log.info("om-mcp %s ready; database %s; observation: %s", __version__, opened.store.location,
                 status.reason if opened.config.observational_memory.enabled else "off")
        try:
            async with opened.running(), notifier.relaying(opened.store):
                # Counts made by an older tokenizer are refreshed in the background.
                await opened.worker.submit("tokens", "recount", opened.recount_tokens)
                yield App(opened, notifier, broker)
        finally:
            await opened.close()

    server = MemoryServer("om-mcp", version=__version__, instructions=text.SERVER_INSTRUCTIONS, lifespan=lifespan,
                          subscriptions=notifier.bus)
    from om_mcp.server import resources, tools

    tools.register(server)
    resources.register(server)
    install_log_level(server)  # legacy clients may set the level of the event notifications
    return server
