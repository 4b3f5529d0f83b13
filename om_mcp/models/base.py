"""The one small interface every model client implements, and what it returns.

Routing (fallback lists, by-input-size selection, retries, the time budget)
lives in `router.py` above this interface and knows nothing of providers. A
client's only jobs are: make one attempt, return a `Completion`, or raise a
`ModelError` (errors.py) whose `transient` flag tells the router whether a retry may help.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

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
    """What the router tells of every attempt it makes: the engine's spend meter (engine/budget.py),
    which counts every call, whoever serves it (a provider, the claude CLI, MCP sampling), by the same rule.

    `reserve` comes before the call, with what it will send: it returns a ticket and the settings to call
    with (it may lower `max_output_tokens`, so the estimate bounds the call), or raises `CapReached` and no
    call is made. `settle` comes after, once, with the completion or the error (`None` and an error: the
    call failed; a cancellation is an error too); the meter decides what the call cost."""

    async def reserve(
        self, messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings
    ) -> tuple[Any, ModelSettings]: ...

    async def settle(self, ticket: Any, completion: Completion | None, error: BaseException | None) -> None: ...
