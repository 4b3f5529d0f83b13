"""The one small interface every model client implements, and what it returns.

Routing (fallback lists, by-input-size selection, retries, the time budget)
lives in `router.py` above this interface and knows nothing of providers. A
client's only jobs are: make one attempt, return a `Completion`, or raise a
`ModelError` (errors.py) whose `transient` flag tells the router whether a retry may help.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import anyio
from pydantic import BaseModel, Field

from om_mcp.config.models import ModelSettings, ModelTarget


class Usage(BaseModel):
    """Token usage and provider metadata of one model call, for the end hooks and events."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = Field(default=None, description="USD, when the provider or litellm knows it")
    provider_metadata: dict[str, Any] = Field(default_factory=dict)


class Completion(BaseModel):
    """The text a model returned, which model produced it, and what it cost."""

    text: str
    model: str = Field(description="the routed model name, e.g. 'gemini/gemini-2.5-flash'")
    usage: Usage = Field(default_factory=Usage)
    attempts: int = Field(default=1, ge=1, description="calls made, counting retries and fallbacks")


@runtime_checkable
class ModelClient(Protocol):
    """Makes one model call. Retries and fallbacks are the router's business.

    `messages` are OpenAI-style chat dicts; `content` is a string or a list of
    {"type": "text", "text": ...} / {"type": "image_url", "image_url": {...}} items.
    A client may also offer `async def warm_up(self) -> None`, which the router
    awaits outside the timed part of a call (e.g. a slow first import).
    """

    async def complete(
        self, messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings, timeout: float
    ) -> Completion: ...


class Meter(Protocol):
    """What is told of every request to a model: the engine's spend meter (engine/budget.py), which counts
    every call, whoever serves it (a provider, the claude CLI, MCP sampling), by the same rule.

    `reserve` comes before the call, with what it will send: it returns a ticket and the settings to call
    with (it may lower `max_output_tokens`, so the estimate bounds the call), or raises `CapReached` and no
    call is made. `settle` comes after, once, with the completion or the error (`None` and an error: the
    call failed; a cancellation is an error too); the meter decides what the call cost."""

    async def reserve(
        self, messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings
    ) -> tuple[Any, ModelSettings]: ...

    async def settle(self, ticket: Any, completion: Completion | None, error: BaseException | None) -> None: ...


class Unmetered:
    """The meter of a router outside an engine (a test, a library caller with no database): it records
    nothing. The engine gives every router it builds its own meter (`engine/budget.py: Budget`)."""

    async def reserve(
        self, messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings
    ) -> tuple[Any, ModelSettings]:
        return None, settings

    async def settle(self, ticket: Any, completion: Completion | None, error: BaseException | None) -> None:
        return None


# Extra time past a request's timeout before it is cancelled, so the client's own (cleaner) timeout
# error usually wins the race.
CANCEL_GRACE_SECONDS = 0.25


class Metered:
    """A client whose every request is reserved before it leaves and settled after, whatever happens (an
    answer, an error, a timeout, a cancellation): the only way the router reaches a client, so no retry,
    escalation, fallback, size tier or compression level above it can make a request the meter misses."""

    def __init__(self, client: ModelClient, meter: Meter):
        self.client, self.meter = client, meter

    @property
    def warm(self) -> bool:
        return getattr(self.client, "warm", True)

    async def warm_up(self) -> None:
        warm_up = getattr(self.client, "warm_up", None)
        if warm_up is not None:
            await warm_up()

    async def complete(
        self, messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings, timeout: float
    ) -> Completion:
        ticket, settings = await self.meter.reserve(messages, target, settings)  # CapReached: no request
        completion: Completion | None = None
        error: BaseException | None = None
        try:
            with anyio.fail_after(timeout + CANCEL_GRACE_SECONDS):
                completion = await self.client.complete(messages, target, settings, timeout)
            return completion
        except BaseException as exc:  # noqa: BLE001 - settled below, then raised as it was
            error = exc
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await self.meter.settle(ticket, completion, error)
