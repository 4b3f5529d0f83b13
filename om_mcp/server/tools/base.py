"""What every tool shares: annotations, and running one engine call with its
errors named and its events sent as notifications."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from om_mcp.engine import EngineError, StoreUnavailable
from om_mcp.server.access import status_for_caller
from om_mcp.server.errors import engine_error
from om_mcp.server.live import App, app_of

T = TypeVar("T")

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
# get_context may activate buffered work or observe: not read-only, but safe to repeat.
STEP = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
APPEND = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
UPDATE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
CYCLE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


async def invoke(
    ctx: Context, call: Callable[[App], Awaitable[T]], changed: Callable[[T], list[str]] | None = None
) -> T:
    """Run `call`; engine errors become tool errors naming the field, a database that cannot
    take a write (read-only, full) one that says so; the events it caused and the resources
    it changed are notified."""
    app = app_of(ctx)
    memory = await app.ready()
    # A client that offers sampling (legacy era, with a back-channel) can observe for us: any record's
    # cycle, any tenant's conversation. So only a caller that reaches every resource (stdio, HTTP without
    # auth, an admin token) lends its client; a tenant's client is never shown another's messages.
    if memory.access.every_resource:
        app.broker.register(ctx.session, ctx.client_capabilities)
    with app.memory.events.collect() as events:
        try:
            result = await call(app)
        except EngineError as error:
            raise engine_error(error) from None
        except StoreUnavailable as error:  # from any write, a background cycle's included
            raise ToolError(str(error)) from None
    if events:
        await app.notifier.events(ctx, events)
    if changed is not None:
        await app.notifier.publish(changed(result), ctx)
    return result


def progress_reporter(ctx: Context) -> Callable[[str], Awaitable[None]]:
    step = 0

    async def report(message: str) -> None:
        nonlocal step
        step += 1
        try:
            await ctx.report_progress(step, None, message)
        except Exception:  # noqa: BLE001 - progress is a courtesy
            pass

    return report


def status_view(ctx: Context, status: Any) -> dict[str, Any]:
    """The status a model can act on, in few tokens (what the caller may see of it)."""
    status = status_for_caller(app_of(ctx).memory, status)
    windows = status.windows
    view = {
        "unobserved_tokens": windows.active.messages.tokens,
        "threshold": windows.active.messages.threshold,
        "observation_tokens": windows.active.observations.tokens,
        "buffered_chunks": windows.buffered.observations.chunks,
        "generation": status.generation_count,
        "model_ready": status.observation.model_ready,
    }
    if status.observation.reason:
        view["reason"] = status.observation.reason
    if status.discarded_cycles:
        view["discarded_cycles"] = sum(status.discarded_cycles.values())
    spend = status.spend
    if spend and spend.get("caps"):
        view["spend"] = {
            **{
                name: {"usd": spend[key]["usd"], "tokens": spend[key]["tokens"]}
                for name, key in (("today", "today"), ("month", "this_month"))
                if key in spend  # a tenant is not shown the server's spend
            },
            "caps": spend["caps"],
        }
    if status.redactions:
        view["redactions"] = status.redactions
    if status.forgotten:
        view["forgotten"] = status.forgotten
    return view
