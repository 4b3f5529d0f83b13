"""An in-process ModelClient for unit tests: replies come from a script.

    model = ScriptedModel(["first reply", TransientModelError("flaky"), "second reply"])
    model = ScriptedModel(lambda messages, target: f"saw {len(messages)} messages")

Every call is recorded in `calls`, so tests can assert on prompts and settings.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from om_mcp.config.models import ModelSettings, ModelTarget
from om_mcp.models.base import Completion, Usage
from om_mcp.models.errors import ModelError, TransientModelError

__all__ = ["ScriptedCall", "ScriptedModel", "TransientModelError"]

Reply = str | Completion | BaseException | type
Responder = Callable[[list[dict[str, Any]], ModelTarget], Any]


@dataclass
class ScriptedCall:
    messages: list[dict[str, Any]]
    target: ModelTarget
    settings: ModelSettings
    timeout: float


class ScriptedModel:
    """Replies with the next scripted item, or whatever `script(messages, target)` returns.

    A reply may be a string, a Completion, or an exception (instance or class)
    to raise; the callable may also be async. `delay` seconds pass before each
    reply (for timeout tests). With `loaded`, the client is still loading (not
    `warm`, and `warm_up` waits) until that event is set.
    """

    def __init__(
        self, script: Sequence[Reply] | Responder, *, delay: float = 0.0, loaded: anyio.Event | None = None
    ) -> None:
        self._script = script if callable(script) else list(script)
        self._next = 0
        self.delay = delay
        self.calls: list[ScriptedCall] = []
        self._loaded = loaded  # a client that is not set up until this is set (litellm's slow import)

    @property
    def warm(self) -> bool:
        return self._loaded is None or self._loaded.is_set()

    async def warm_up(self) -> None:
        if self._loaded is not None:
            await self._loaded.wait()

    async def complete(
        self, messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings, timeout: float
    ) -> Completion:
        self.calls.append(ScriptedCall(messages, target, settings, timeout))
        if self.delay:
            await anyio.sleep(self.delay)
        reply = await self._reply(messages, target)
        if isinstance(reply, type) and issubclass(reply, BaseException):
            raise reply()
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, Completion):
            return reply
        if isinstance(reply, str):
            return Completion(
                text=reply,
                model=target.model,
                usage=Usage(input_tokens=_rough_tokens(_messages_text(messages)), output_tokens=_rough_tokens(reply)),
            )
        raise TypeError(f"scripted reply must be str, Completion or exception, not {type(reply)!r}")

    async def _reply(self, messages: list[dict[str, Any]], target: ModelTarget) -> Any:
        if callable(self._script):
            reply = self._script(messages, target)
            return await reply if inspect.isawaitable(reply) else reply
        if self._next >= len(self._script):
            raise ModelError(f"script exhausted after {len(self._script)} replies")
        reply = self._script[self._next]
        self._next += 1
        return reply


def _messages_text(messages: list[dict[str, Any]]) -> str:
    parts: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(item.get("text", "") for item in content if isinstance(item, dict))
    return "\n".join(parts)


def _rough_tokens(text: str) -> int:
    return max(1, len(text) // 4)
