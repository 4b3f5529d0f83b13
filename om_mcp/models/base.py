"""The one small interface every model client implements, and what it returns.

Routing (fallback lists, by-input-size selection, retries, the time budget)
lives in `router.py` above this interface and knows nothing of providers. A
client's only jobs are: make one attempt, return a `Completion`, or raise a
`ModelError` whose `transient` flag tells the router whether a retry may help.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

if TYPE_CHECKING:  # only for annotations; settings imports this module
    from om_mcp.models.settings import ModelSettings, ModelTarget


class Usage(BaseModel):
    """Token usage and provider metadata of one model call (MD-13)."""

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


class ModelError(Exception):
    """A model call failed.

    Raised by a client for one failed attempt, and by the router when every
    attempt of a cycle failed (then `last_error` is the last attempt's error).
    `transient` says whether the failure may go away on retry (timeouts,
    connection errors, HTTP 408/425/429/5xx).
    """

    def __init__(
        self,
        message: str,
        *,
        last_error: str | None = None,
        transient: bool = False,
        status_code: int | None = None,
        model: str | None = None,
        attempts: int = 0,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.last_error = last_error if last_error is not None else message
        self.transient = transient
        self.status_code = status_code
        self.model = model
        self.attempts = attempts


class TransientModelError(ModelError):
    """A failure worth retrying; scripted clients raise it to simulate flaky providers."""

    def __init__(self, message: str = "transient model failure", **kwargs: Any) -> None:
        kwargs.setdefault("transient", True)
        super().__init__(message, **kwargs)


class ModelSelectionError(ModelError):
    """No model fits the request (input above the largest by-size threshold).

    Raised before any model call; the engine treats it like a tripwire (MD-07).
    """


TRANSIENT_STATUS = frozenset({408, 425, 429})


def is_transient_status(status: int | None) -> bool:
    return status is not None and (status in TRANSIENT_STATUS or 500 <= status <= 599)


def is_transient(exc: BaseException) -> bool:
    """Whether retrying after `exc` may help; unknown errors are not retried."""
    if isinstance(exc, ModelError):
        return exc.transient
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and is_transient_status(status)


@runtime_checkable
class ModelClient(Protocol):
    """Makes one model call. Retries and fallbacks are the router's business.

    `messages` are OpenAI-style chat dicts; `content` is a string or a list of
    {"type": "text", "text": ...} / {"type": "image_url", "image_url": {...}} items.
    A client may also offer `async def warm_up(self) -> None`, which the router
    awaits outside the timed part of a call (e.g. a slow first import).
    """

    async def complete(
        self,
        messages: list[dict[str, Any]],
        target: ModelTarget,
        settings: ModelSettings,
        timeout: float,
    ) -> Completion: ...
