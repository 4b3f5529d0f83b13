"""observe and reflect: run a cycle now."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from om_mcp.server import descriptions as text
from om_mcp.server.output import compact
from om_mcp.server.schemas import ResourceId, ThreadId
from om_mcp.server.tools.base import CYCLE, invoke, progress_reporter

Instruction = Annotated[str | None, Field(None, max_length=4000, description="extra guidance for this run")]


def _result(outcome: Any) -> str:
    return compact(
        {
            "ran": outcome.ran,
            "cycle_id": outcome.cycle_id,
            "reason": outcome.reason,
            "error": outcome.error,
            "tokens_in": outcome.tokens_in,
            "tokens_out": outcome.tokens_out,
        }
    )


def register(server: MCPServer) -> None:
    @server.tool(description=text.OBSERVE, annotations=CYCLE, structured_output=False)
    async def observe(
        thread_id: ThreadId, ctx: Context, resource_id: ResourceId = None, instruction: Instruction = None
    ) -> str:
        outcome = await invoke(
            ctx, lambda app: app.memory.observe(thread_id, resource_id, instruction, progress=progress_reporter(ctx))
        )
        return _result(outcome)

    @server.tool(description=text.REFLECT, annotations=CYCLE, structured_output=False)
    async def reflect(
        thread_id: ThreadId, ctx: Context, resource_id: ResourceId = None, instruction: Instruction = None
    ) -> str:
        outcome = await invoke(
            ctx, lambda app: app.memory.reflect(thread_id, resource_id, instruction, progress=progress_reporter(ctx))
        )
        return _result(outcome)
