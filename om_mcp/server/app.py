"""The MCP adapter: an `MCPServer` whose tools and resources call `Memory`.

Each tool resolves the engine from the lifespan, calls one public `Memory`
operation and returns compact JSON text. Nothing here knows about SQL or the
engine's insides.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult
from mcp.types import Tool as MCPTool
from pydantic import ValidationError

from om_mcp import __version__, heap
from om_mcp.config import Config
from om_mcp.logs import one_line
from om_mcp.server import descriptions as text
from om_mcp.server import prompts, resources, tools
from om_mcp.server.access import subscription_refusal
from om_mcp.server.errors import describe_validation
from om_mcp.server.listen import install_scoped_listen
from om_mcp.server.live import App
from om_mcp.server.log_level import install_log_level
from om_mcp.server.notify import Notifier
from om_mcp.server.sampling import SamplingBroker
from om_mcp.server.schemas import slim
from om_mcp.server.subscriptions import install_subscriptions

if TYPE_CHECKING:
    from om_mcp.engine import Memory

log = logging.getLogger(__name__)


class MemoryServer(MCPServer):
    """MCPServer whose tool errors always say what was wrong, in one line, and whose tool
    schemas carry nothing the model does not need (they are read on every session)."""

    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        for tool in tools:
            tool.input_schema = slim(tool.input_schema)
        return tools

    live: App | None = None  # set while the lifespan runs

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as error:
            cause = error.__cause__
            while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
                cause = cause.exceptions[0]
            log.warning("tool %s failed: %s", name, one_line(cause or error))
            log.debug("tool %s failed", name, exc_info=cause)
            raise ToolError(
                f"{name} failed inside om-mcp ({type(cause).__name__}: {one_line(cause or '')});"
                " nothing was changed, see the server log"
            ) from None
        except ToolError as error:
            if isinstance(error.__cause__, ValidationError):
                raise ToolError(f"invalid arguments: {describe_validation(error.__cause__)}") from None
            message = str(error).removeprefix(f"Error executing tool {name}: ")
            raise ToolError(message) from None


async def _serve_memory(config: Config, app: App, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Open the engine (tokenizer included), report it started, then run its worker until the
    server stops, and close it."""
    try:
        from om_mcp.engine import Memory

        opened = await Memory.open(config, sampling=app.broker)
        heap.settle()  # the start-up heap leaves the full collections (a 40 ms pause in some turn)
    except Exception as error:  # noqa: BLE001 - reported to every request, in one line
        log.error("memory could not be opened: %s", one_line(error))
        log.debug("memory could not be opened", exc_info=True)
        app.opened(None, one_line(error))
        task_status.started()
        return
    opened.events.listeners.append(app.notifier.on_event)
    log.info(
        "om-mcp %s ready; database %s; observation: %s",
        __version__,
        opened.overview.location,
        opened.models()[2] if opened.config.observational_memory.enabled else "off",
    )
    try:
        async with opened.running(), app.notifier.relaying(opened):
            app.opened(opened)
            task_status.started()
            await opened.start_upkeep()
            await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await opened.close()


def _broker_of(memory: Memory) -> SamplingBroker:
    """The broker a given engine samples through; one of our own (which it does not ask) when it
    was opened without one."""
    return memory.sampler if isinstance(memory.sampler, SamplingBroker) else SamplingBroker()


def _live(server: MCPServer, app: App) -> App:
    """Keep the running App on the server too: the HTTP status page reads the same engine."""
    server.live = app  # type: ignore[attr-defined]  # any MCPServer given to the lifespan
    return app


def build_server(config: Config, memory: Memory | None = None, *, hooks: bool = False) -> MemoryServer:
    """An MCP server over `memory`, or over one opened from `config` for the server's lifespan.
    `hooks`: the host's hooks record the conversations (the Claude Code plugin), so the agent is told
    not to store or fetch them itself."""
    notifier = Notifier()

    @asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[App]:
        if memory is not None:
            memory.events.listeners.append(notifier.on_event)
            try:
                async with notifier.relaying(memory):
                    yield _live(server, App(notifier, _broker_of(memory), memory))
            finally:
                memory.events.listeners.remove(notifier.on_event)
            return
        app = App(notifier, SamplingBroker())
        async with anyio.create_task_group() as group:
            # Before the first message is read: the first request finds the engine open.
            await group.start(_serve_memory, config, app)
            try:
                yield _live(server, app)
            finally:
                group.cancel_scope.cancel()

    instructions = text.SERVER_INSTRUCTIONS_HOOKS if hooks else text.SERVER_INSTRUCTIONS
    server = MemoryServer(
        "om-mcp", version=__version__, instructions=instructions, lifespan=lifespan, subscriptions=notifier.bus
    )
    tools.register(server)
    resources.register(server)
    prompts.register(server)
    install_log_level(server)  # legacy clients may set the level of the event notifications
    # and subscribe to the resources they want updates of (those their token may read)
    install_subscriptions(server, notifier.watch, subscription_refusal)
    install_scoped_listen(server, notifier.bus)  # a token hears only the URIs it may read
    return server
